"""benchmarks/ttft_light_load.py: the light-load TTFT breakdown quoted in docs/benchmarks.md."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "ttft_light_load.py"
ROW = re.compile(r"meas\s+([\d.]+)\s+pred\s+([\d.]+)\s+alone\s+([\d.]+)\s+ratio\s+([\d.]+)")


def test_one_request_rows_are_their_own_lone_prefill() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--max-concurrency", "1", "--isl-scaling"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("aggregated rows at concurrency <= 1: ")
    rows = [ROW.search(line) for line in out.stdout.splitlines()]
    found = [m for m in rows if m]
    assert found, out.stdout
    for m in found:
        meas, pred, alone, ratio = (float(g) for g in m.groups())
        # At concurrency 1 the row's prediction is the lone request's: nothing to wait for.
        assert pred == alone
        assert abs(ratio - meas / pred) < 0.01
    assert "ISL scaling" in out.stdout
