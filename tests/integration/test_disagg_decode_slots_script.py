"""benchmarks/disagg_decode_slots.py run as a script: every run printed, the groups, and the
TTFT error with the decode-slot queue re-priced (figures quoted in
docs/investigations/serving-disaggregated.md)."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

RUN = re.compile(
    r"^(trtllm|sglang)\s+\S+\s+\d+\s+(\d+)\s+(\d+)\s+[\d.]+ \|\s+([\d.]+)\s+([\d.]+) \|"
)
SUMMARY = re.compile(
    r"of which bound by the slots \((\d+) runs\): model ([\d.]+) / ([\d.]+)%, "
    r"queue at the measured TPOT ([\d.]+) / ([\d.]+)%"
)


def test_script_prints_every_run_and_the_bound_runs_summary() -> None:
    proc = run_benchmark("disagg_decode_slots")
    assert proc.returncode == 0, proc.stderr
    runs = [m for line in proc.stdout.splitlines() if (m := RUN.match(line))]
    assert len(runs) >= 60
    # measured occupancy (Little's law on the measured TTFT/TPOT) never exceeds the slots
    assert max(float(m.group(4)) for m in runs) <= 1.05
    summary = SUMMARY.search(proc.stdout)
    assert summary is not None
    assert int(summary.group(1)) >= 10
    assert float(summary.group(4)) < float(summary.group(2))
    assert "by group" in proc.stdout


WHAT_IF = re.compile(
    r"trtllm DeepSeek (agg|disagg) .*n=\s*(\d+)\s+TTFT\s+([\d.]+) /\s+[\d.]+% ->\s+([\d.]+) /"
)


def test_allgather_what_if_prints_both_modes() -> None:
    proc = run_benchmark("disagg_decode_slots", "--allgather")
    assert proc.returncode == 0, proc.stderr
    lines = [m for line in proc.stdout.splitlines() if (m := WHAT_IF.search(line))]
    assert {m.group(1) for m in lines} == {"agg", "disagg"}
    assert sum(int(m.group(2)) for m in lines if m.group(1) == "disagg") >= 60
    # the what-if moves the TensorRT-LLM TTFT by a few points, not by the 2x of the miss
    for m in lines:
        assert abs(float(m.group(4)) - float(m.group(3))) < 10.0
