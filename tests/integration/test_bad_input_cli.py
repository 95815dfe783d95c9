"""Bad input found by driving the CLI as a new user would: each case is one line on stderr and
exit code 2 (never a traceback, a silently ignored flag, or a search that does not end)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]
INFER = ("infer", "llama3.1-8b", "--gpu", "h100-sxm")
DISAGG = ("--prefill-workers", "1", "--decode-workers", "1")
HUGE_GPN = ("--gpus-per-node", "99999999999999999999")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # An integer past int64 overflowed numpy's plan arrays with a traceback.
        (
            (*("estimate", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8"), *HUGE_GPN),
            "'--gpus-per-node': 99999999999999999999 is too large; accepted: a whole number up "
            "to 2^53",
        ),
        (
            ("fit", "llama3.1-8b", "--gpu", "h100-sxm", "--mbs", "99999999999999999999"),
            "'--mbs': 99999999999999999999 is too large",
        ),
        (
            (*INFER, "--concurrency", "1,99999999999999999999"),
            "--concurrency '1,99999999999999999999': give a whole number of requests up to 2^53",
        ),
        # A search over 10^12 GPUs ran for minutes and took tens of GB.
        (
            ("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "1000000000000"),
            "--gpus must be 1 to 1,048,576 (2^20 GPUs, above the largest clusters built), got "
            "1000000000000",
        ),
        # Flags the chosen question does not take were ignored without a word.
        ((*INFER, "--pp", "2"), "--pp: the static-batch table"),
        ((*INFER, "--concurrency", "8", "--batch", "4"), "--batch: the serving model under load"),
        ((*INFER, "--concurrency", "8", "--price", "2"), "--price: the serving model under load"),
        ((*INFER, "--search", "--gpus", "8", "--tp", "2"), "--tp: --search chooses the layout"),
        (
            (*INFER, "--concurrency", "8", *DISAGG, "--tp", "4"),
            "--tp 4 applies only to aggregated serving",
        ),
        ((*INFER, "--concurrency", "8", "--tp", "2", "--attention-dp", "2"), "is dense"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(
    gpuscale: Run, args: tuple[str, ...], expected: str
) -> None:
    result = gpuscale(*args, "--json")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuscale: "), result.stderr
    assert expected in lines[0]
