"""benchmarks/vllm_grid_regime.py: the vLLM 0.12 Qwen3-32B grid figures quoted in
docs/investigations/serving-gap-analysis-rows.md ("vLLM rows: ... the regime of the Qwen3-32B
grid")."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

GRID = re.compile(r"^\s*(1024|4096)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s")
BY_TP = re.compile(r"^ISL\s+(\d+) TP(\d) +alone +[\d.]+ +(.*)$")
BUDGET = re.compile(r"^ISL\s+(\d+)\s+2048:\s+(\d+)%\s+8192:\s+(\d+)%\s+16384:\s+(\d+)%$")


def test_grid_regime_prints_the_readings_the_docs_quote() -> None:
    out = run_benchmark("vllm_grid_regime")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    grid = {(int(m[1]), int(m[2])): m for m in map(GRID.match, lines) if m}
    assert len(grid) == 10 and all(int(m[3]) == 9 for m in grid.values())
    # Short prompts at low concurrency: the lockstep reading is far too long, the staggered
    # far too short (measured / model below 1 and above 1).
    low = grid[(1024, 8)]
    assert float(low[4]) < 0.6 and float(low[5]) > 1.5
    # The measured TTFT in prompt-times grows with the concurrency for both prompt lengths.
    for isl in (1024, 4096):
        times = [float(grid[(isl, c)][6]) for c in (8, 16, 32, 64, 128)]
        assert times == sorted(times)
    # Prompt-times by TP: one line per (ISL, TP).
    assert sum(bool(BY_TP.match(line)) for line in lines) == 6
    # No token budget fits both prompt lengths: the best budget differs by length.
    budget = {int(m[1]): [int(m[k]) for k in (2, 3, 4)] for m in map(BUDGET.match, lines) if m}
    best = {isl: errs.index(min(errs)) for isl, errs in budget.items()}
    assert best[1024] != best[4096]
