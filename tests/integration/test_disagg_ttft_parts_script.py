"""benchmarks/disagg_ttft_parts.py: the disaggregated TTFT parts quoted in
docs/investigations/serving-disaggregated.md ("Disaggregated TTFT: the KV hand-off")."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

ROW = re.compile(
    r"^(trtllm|sglang)\s+\S+\s+\d+\s+\d+\s+\S+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|"
    r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+) \|"
)


def test_every_run_prints_parts_that_add_up() -> None:
    proc = run_benchmark("disagg_ttft_parts")
    assert proc.returncode == 0, proc.stderr
    rows = [m for line in proc.stdout.splitlines() if (m := ROW.match(line))]
    assert len(rows) >= 30
    for m in rows:
        model = float(m.group(3))
        pre, admit, hand_off, burst, queue = (float(m.group(i)) for i in range(5, 10))
        # the hand-off runs inside the decode admission; the other parts add to the mean TTFT
        assert hand_off <= admit + 0.5
        assert abs(pre + admit + burst + queue - model) <= 3.0
    assert "disagg" in proc.stdout.split("median measured/modelled TTFT")[-1]
