"""benchmarks/trtllm_host_overlap.py: the host-cost signatures
docs/investigations/serving-gap-analysis-rows.md quotes
(branch ``trt-host``)."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

MEDIAN = re.compile(r"^\s+(\S+)\s+TP (\d)\s+([\d.]+)\s+([\d.]+)\s+n=(\d+)$")
LINE = re.compile(
    r"^\s+(\S+)\s+TP (\d)\s+ISL\s+(\d+)\s+OSL (\d+)\s+([\d.]+)\s+([\d.]+)"
    r"(?:\s+sum\s+([\d.]+)\s+max\s+([\d.]+)|\s+\*)$"
)
LLAMA = "Llama-3.1-8B-Instruct"


def test_host_overlap_slopes_floor_at_the_host_line_and_are_not_added() -> None:
    out = run_benchmark("trtllm_host_overlap")
    assert out.returncode == 0, out.stderr
    head, rest = out.stdout.split("per grid line")
    medians = {
        (m.group(1), int(m.group(2))): (float(m.group(3)), float(m.group(4)))
        for m in map(MEDIAN.match, head.splitlines())
        if m
    }
    # The measured slope stops falling from TP4 to TP8 (a cost the GPUs do not set), while the
    # modelled (GPU) slope keeps falling.
    meas4, mod4 = medians[(LLAMA, 4)]
    meas8, mod8 = medians[(LLAMA, 8)]
    assert meas8 > 0.85 * meas4 and mod8 < 0.75 * mod4
    lines = [m for m in map(LINE.match, rest.splitlines()) if m and m.group(1) == LLAMA]
    hosts = [m for m in lines if m.group(7) is None]
    assert {int(m.group(2)) for m in hosts} == {4, 8}
    for m in lines:
        if m.group(7) is None:
            continue
        measured, sum_rule, max_rule = float(m.group(5)), float(m.group(7)), float(m.group(8))
        # Hidden behind the GPU (overlap scheduler): max(GPU, host) within 21%, the sum far
        # over, and at least 1.5x as far off as the max.
        assert abs(max_rule / measured - 1.0) < 0.21
        assert sum_rule > 1.25 * measured
        assert sum_rule / measured - 1.0 > 1.5 * abs(max_rule / measured - 1.0)


def test_the_script_takes_no_options() -> None:
    out = run_benchmark("trtllm_host_overlap", "--tp", "8")
    assert out.returncode == 2
    assert "unrecognized arguments: --tp 8" in out.stderr and "Traceback" not in out.stderr
