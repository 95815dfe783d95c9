"""benchmarks/search_vs_infer.py: the SLO search's winner and runner-up against ``infer`` of the
same deployment, as quoted in docs/benchmarks.md."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

ROW = r"^\s+(search|infer --request-rate [\d.]+|infer --concurrency \d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$"


def test_search_rows_equal_infer_at_the_request_rate() -> None:
    proc = run_benchmark("search_vs_infer")
    assert proc.returncode == 0, proc.stderr
    rows = [m.groups() for m in re.finditer(ROW, proc.stdout, re.M)]
    places = [rows[i : i + 3] for i in range(0, len(rows), 3)]
    assert len(places) == 14  # 7 searches, winner and runner-up
    for search, rate, closed in places:
        assert search[0] == "search" and rate[0].startswith("infer --request-rate")
        assert search[1:] == rate[1:]  # TTFT p99, TPOT p99, tok/s to the printed digit
        # the closed loop at the same mean in flight is another load: its burst's TTFT p99
        assert float(closed[1]) > 3 * float(search[1])
