"""What the CLI fuzz of 2026-12-04 left, through the real entry point: one line on stderr
naming the flag and what is accepted, exit code 2 (docs/investigations/reviews.md)."""

from __future__ import annotations

import pytest

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
            "max_num_batched_tokens=64",
            ("--engine-options", "max_num_batched_tokens 64 is below max_num_seqs 1024"),
        ),
    ],
)
def test_engine_options_that_cannot_apply(gpuscale, options: str, words: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    _refused(gpuscale(*VLLM, "--engine-options", options), *words)
