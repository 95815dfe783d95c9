"""`gpuscale estimate` through the real entry point: the DESIGN.md JSON contract and errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CONTRACT = {
    "fits",
    "memory_per_gpu_gib",
    "step_time_s",
    "tokens_per_s",
    "tflops_per_gpu",
    "mfu",
    "breakdown",
}
BREAKDOWN = {"compute", "exposed_comm", "bubble", "optimizer", "other"}

BASE = [
    "estimate",
    "llama3.1-70b",
    "--gpu",
    "h100-sxm",
    "--gpus",
    "64",
    "--tp",
    "8",
    "--pp",
    "2",
    "--dp",
    "4",
    "--mbs",
    "1",
    "--gbs",
    "256",
    "--seq",
    "4096",
    "--recompute",
    "selective",
    "--zero",
    "1",
    "--precision",
    "bf16",
    "--framework",
    "megatron",
]


def test_json_follows_the_design_contract(gpuscale) -> None:
    proc = gpuscale(*BASE, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc.keys() >= CONTRACT
    assert doc["breakdown"].keys() >= BREAKDOWN
    assert 0 < doc["mfu"] < 1
    assert doc["schema_version"] == 1
    assert doc["tokens_per_s"] * doc["step_time_s"] == pytest.approx(256 * 4096, rel=1e-6)
    band = doc["uncertainty"]
    assert band["tokens_per_s_low"] < doc["tokens_per_s"] < band["tokens_per_s_high"]


def test_table_output_names_the_bottleneck(gpuscale) -> None:
    proc = gpuscale(*BASE)
    assert proc.returncode == 0, proc.stderr
    assert "verdict" in proc.stdout and "MFU" in proc.stdout


def test_hf_config_json_is_accepted(gpuscale, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 2048,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 8192,
                "vocab_size": 128256,
                "max_position_embeddings": 131072,
                "tie_word_embeddings": True,
            }
        )
    )
    proc = gpuscale(
        "estimate",
        str(cfg),
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "8",
        "--gbs",
        "64",
        "--mbs",
        "2",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["fits"] is True


def test_extrapolation_is_flagged(gpuscale) -> None:
    proc = gpuscale(
        "estimate",
        "mixtral-8x7b",
        "--gpu",
        "b200",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--gbs",
        "64",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    warnings = " ".join(json.loads(proc.stdout)["uncertainty"]["warnings"])
    assert "blackwell" in warnings and "mixture-of-experts" in warnings


def test_a_measured_profile_changes_the_prediction(gpuscale, tmp_path: Path) -> None:
    slow = tmp_path / "measured.yaml"
    slow.write_text(
        "schema_version: 1\nname: measured\nlinks:\n"
        "  inter: {bandwidth_gb_per_s: 4.0, latency_us: 40}\n"
    )
    rated = json.loads(gpuscale(*BASE, "--json").stdout)
    measured = json.loads(gpuscale(*BASE, "--profile", str(slow), "--json").stdout)
    assert measured["step_time_s"] > rated["step_time_s"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpu", "h100"], "did you mean h100-pcie, h100-sxm"),
        (["--dp", "3", "--gbs", "240"], "but --gpus is 64"),
        (["--gpus", "56", "--tp", "7"], "does not divide the 64 attention heads"),
        (["--gbs", "255"], "divisible"),
        (["--framework", "megatorn"], "did you mean megatron"),
        (["--recompute", "sometimes"], "--recompute"),
        (["--recompute-modules", "moe_act"], "needs a mixture-of-experts model"),
        (["--recompute-modules", "mlp,attention"], "unknown module 'attention'"),
        (["--loss", "liger"], "--loss"),
        (["--seq", "0"], "--seq"),
        (["--inter", "infiniband"], "unknown fabric"),
        (["--profile", "/nonexistent/p.yaml"], "cannot read profile"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(gpuscale, args: list[str], needle: str) -> None:
    argv = list(BASE)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    proc = gpuscale(*argv)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_model_lists_close_ids(gpuscale) -> None:
    proc = gpuscale("estimate", "llama3-70b", "--gpu", "h100-sxm", "--gpus", "8")
    assert proc.returncode == 2
    assert "did you mean" in proc.stderr and "llama3.1-70b" in proc.stderr


def test_compile_flag_fuses_an_eager_stack(gpuscale) -> None:
    # torchtitan's eager Llama block vs the same under torch.compile (costmodel/fusion.py).
    run = [
        "estimate",
        "llama3.1-8b",
        "--gpu",
        "h100-sxm-500w",
        "--gpus",
        "8",
        "--zero",
        "3",
        "--mbs",
        "2",
        "--seq",
        "8192",
        "--recompute",
        "selective",
        "--framework",
        "torchtitan",
        "--json",
    ]
    eager, compiled = gpuscale(*run), gpuscale(*run, "--compile")
    assert eager.returncode == 0 and compiled.returncode == 0, eager.stderr + compiled.stderr
    e, c = json.loads(eager.stdout), json.loads(compiled.stdout)
    assert (e["compile"], c["compile"]) == (False, True)
    assert c["tokens_per_s"] > 1.03 * e["tokens_per_s"]
    assert c["breakdown"]["exposed_comm"] == pytest.approx(e["breakdown"]["exposed_comm"], rel=0.2)
