"""`gpuscale calibrate run` through the real entry point: it writes a profile that estimate,
plan and scale take with --profile, `calibrate --from` still works, and bad input is one line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

Gpuscale = Callable[..., CompletedProcess[str]]

RUN = [
    "llama3.1-8b",
    "--gpu",
    "h100-sxm",
    "--gpus",
    "16",
    "--tp",
    "2",
    "--mbs",
    "2",
    "--gbs",
    "64",
    "--seq",
    "4096",
    "--zero",
    "1",
]


def _estimate(gpuscale: Gpuscale, *extra: str) -> dict[str, float]:
    proc = gpuscale("estimate", *RUN, "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_written_profile_reproduces_the_run_in_estimate_and_feeds_scale(
    gpuscale: Gpuscale, tmp_path: Path
) -> None:
    generic = _estimate(gpuscale)
    measured = 0.85 * generic["tokens_per_s"]
    out = tmp_path / "mine.yaml"
    proc = gpuscale(
        "calibrate", "run", *RUN, "--measured-tokens-per-s", str(measured), "-o", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "fitted compute efficiency 0.74 -> " in said
    assert "--framework generic --profile" in said
    calibrated = _estimate(gpuscale, "--profile", str(out))
    assert calibrated["tokens_per_s"] == pytest.approx(measured, rel=1e-6)
    assert calibrated["profile"].endswith("calibrated")

    scale = gpuscale(
        "scale",
        "llama3.1-8b",
        "--gpu",
        "h100-sxm",
        "--max-gpus",
        "16",
        "--json",
        "--profile",
        str(out),
    )
    assert scale.returncode == 0, scale.stderr
    plan = gpuscale(
        "plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "16", "--json", "--profile", str(out)
    )
    assert plan.returncode == 0, plan.stderr


def test_json_is_the_api_document(gpuscale: Gpuscale, tmp_path: Path) -> None:
    from gpuscale import api

    proc = gpuscale("calibrate", "run", *RUN, "--measured-step-s", "2.5", "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    expected = api.calibrate_run(
        "llama3.1-8b",
        gpu="h100-sxm",
        gpus=16,
        tp=2,
        mbs=2,
        gbs=64,
        seq=4096,
        zero=1,
        measured_step_s=2.5,
    ).to_dict()
    assert doc == json.loads(json.dumps(expected))
    assert doc["fitted"][0]["parameter"] == "compute"
    assert doc["predicted_tokens_per_s_after"] == pytest.approx(64 * 4096 / 2.5)


def test_calibrate_from_still_works(gpuscale: Gpuscale, data_dir: Path) -> None:
    log = data_dir / "nccl-tests" / "h100-2node-allreduce-k8s-mpijob.log"
    proc = gpuscale("calibrate", "--from", str(log), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "profile" in json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "exactly one of --measured-tokens-per-s"),
        (["--measured-tokens-per-s", "1e5", "--measured-step-s", "1"], "exactly one"),
        (["--measured-step-s", "nan"], "not a finite number"),
        (["--measured-step-s", "0"], "--measured-step-s must be > 0"),
        (["--measured-tokens-per-s", "-5"], "--measured-tokens-per-s must be > 0"),
        (["--measured-tokens-per-s", "1e9"], "physical range"),
        (["--measured-tokens-per-s", "1e3"], "physical range"),
        (["--measured-step-s", "1", "--measured-memory-gib", "500"], "exceeds"),
        (["--measured-step-s", "1", "--gpus", "12", "--tp", "3"], "--tp 3 does not divide"),
        (["--measured-step-s", "1", "-o", "/nonexistent-dir/x.yaml"], "does not exist"),
    ],
)
def test_bad_input_is_one_line_exit_2(gpuscale: Gpuscale, extra: list[str], message: str) -> None:
    proc = gpuscale("calibrate", "run", *RUN, *extra)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpuscale: ")
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


def test_the_output_says_why_and_fit_forces_a_quantity(gpuscale: Gpuscale) -> None:
    small = ["gpt3-125m", "--gpu", "h100-sxm", "--gpus", "8", "--mbs", "8", "--gbs", "64"]
    proc = gpuscale("calibrate", "run", *small, "--seq", "2048", "--measured-tokens-per-s", "2.5e6")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    # a small model: its memory-bound kernels dominate the step's prior uncertainty, so they take
    # the largest share of the gap, and the output says each share and what the run cannot tell
    assert "fitted HBM efficiency of memory-bound kernels 0.8 -> " in said
    assert "of the gap to 312,500 tokens/s per GPU" in said
    assert "why memory_bound: " in said and "of the step's prior uncertainty" in said
    assert "not identifiable from this run alone" in said
    assert said.index("fitted HBM efficiency") < said.index("fitted compute efficiency")
    forced = gpuscale(
        "calibrate", "run", *small, "--measured-tokens-per-s", "2.5e6", "--fit", "compute", "--json"
    )
    assert forced.returncode == 0, forced.stderr
    doc = json.loads(forced.stdout)
    assert doc["rule"] == "only" and [f["parameter"] for f in doc["fitted"]] == ["compute"]
    assert doc["fitted"][0]["why"].startswith("asked for (compute)")
    # one node: there is no network between nodes to fit
    refused = gpuscale("calibrate", "run", *small, "--measured-step-s", "1", "--fit", "inter")
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: --fit: cannot fit 'inter'")


def test_json_echoes_the_run_it_calibrated_on_as_estimate_does(gpuscale: Gpuscale) -> None:
    """The document says which run it was fitted to: the inputs estimate's --json echoes, with
    the same keys and values (the plan whole, the assumed batch), and the table names them."""
    flags = [*RUN, "--pp", "2", "--recompute", "selective", "--compile", "--framework", "megatron"]
    estimated = json.loads(gpuscale("estimate", *flags, "--json").stdout)
    measured = ["--measured-tokens-per-s", str(0.9 * estimated["tokens_per_s"])]
    proc = gpuscale("calibrate", "run", *flags, *measured, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    inputs = ("model", "gpu", "gpus", "gpus_per_node", "inter", "framework", "seq", "precision")
    for key in (*inputs, "compile", "plan", "assumed"):
        assert doc[key] == estimated[key], key
    assert doc["plan"]["tp"] == 2 and doc["plan"]["pp"] == 2 and doc["plan"]["dp"] == 4
    assert doc["plan"]["recompute"] == "selective" and doc["compile"] is True
    assert doc["start_profile"] == estimated["profile"] == "megatron"
    table = " ".join(gpuscale("calibrate", "run", *flags, *measured).stdout.split())
    assert "tp=2 pp=2 dp=4" in table and "recompute=selective" in table
