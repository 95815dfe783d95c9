"""What the CLI fuzz of 2026-12-04 left, through the real entry point: one line on stderr
naming the flag and what is accepted, exit code 2 (docs/investigations/reviews.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
VLLM = ("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--tp", "2", "--concurrency", "8")


def _refused(proc, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            "deepgemm_moe_worst_case=true",
            ("--engine-options", "deepgemm_moe_worst_case", "has no experts", "leave it out"),
        ),
        (
            "max_num_batched_tokens=64,max_num_seqs=128",
            ("--engine-options", "max_num_batched_tokens 64 is below max_num_seqs 128"),
        ),
    ],
)
def test_engine_options_that_cannot_apply(gpuscale, options: str, words: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    _refused(gpuscale(*VLLM, "--engine-options", options), *words)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("infer", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus-per-node", "3", "--tp", "4"),
            ("--tp 4 (4 GPUs, one tensor-parallel group) must be a multiple of --gpus-per-node",),
        ),
        (
            (
                "estimate",
                "llama3.1-70b",
                "--gpu",
                "h100-sxm",
                "--gpus-per-node",
                "3",
                "--tp",
                "4",
                "--dp",
                "1",
            ),
            ("tp x pp x dp x cp = 4 x 1 x 1 x 1 = 4 GPUs must be a multiple of --gpus-per-node",),
        ),
    ],
)
def test_errors_name_the_flags_typed(
    gpuscale, args: tuple[str, ...], words: tuple[str, ...]
) -> None:  # type: ignore[no-untyped-def]
    proc = gpuscale(*args)
    _refused(proc, *words)
    assert "--gpus " not in proc.stderr and "--gpus (" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("plan", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "８"), "--gpus"),
        (("plan", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "1_6"), "--gpus"),
        (("plan", "llama3.1-70b", "--gpu", "h100-sxm", "--gpus", "8", "--price", "1_0"), "--price"),
        (("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--input", "٣٠"), "--input"),
        (("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--tp", "٣"), "--tp"),
        ((*VLLM[:-1], "٣"), "--concurrency"),
        ((*VLLM, "--prefix-hit", "0.٥"), "--prefix-hit"),
        ((*VLLM, "--engine-options", "max_num_seqs=1_00"), "--engine-options"),
        (("serve", "--port", "８０８０"), "--port"),
    ],
)
def test_numbers_take_ascii_digits_only(gpuscale, args: tuple[str, ...], flag: str) -> None:  # type: ignore[no-untyped-def]
    _refused(gpuscale(*args), flag, "ASCII digits 0-9, without '_' separators")


def test_trace_row_with_an_extra_field(gpuscale, tmp_path) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    trace.write_text("submit_s,gpus,duration_s\n0,1,100\n5,2,100,extra\n")
    proc = gpuscale(
        "cluster", "simulate", "--cluster", str(EXAMPLES / "lab-64.yaml"), "--trace", str(trace)
    )
    _refused(proc, "--trace", "line 3: 4 fields", "(submit_s, gpus, duration_s)")


def test_bf16_on_a_v100(gpuscale) -> None:  # type: ignore[no-untyped-def]
    v100 = ("infer", "llama3.1-8b", "--gpu", "v100-sxm2-32gb", "--tp", "2", "--concurrency", "4")
    _refused(
        gpuscale(*v100, "--weights", "bf16"), "--weights bf16", "has no bf16", "--weights fp16"
    )
    proc = gpuscale(*v100, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["weights"] == "fp16"
    assert any("the checkpoint's bf16 served as fp16" in n for n in doc["options"][0]["notes"])
