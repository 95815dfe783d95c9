"""benchmarks/gap_rows.py: the gap-analysis signatures quoted in docs/benchmarks.md."""

from __future__ import annotations

import re

from tests.integration.benchmark_scripts import run_benchmark

HEAVY = re.compile(r"^\s+(\S+)\s+OSL\s+(\d+)\s+n=\s*(\d+)\s+([\d.]+)\s+([\d.]+)$")


def test_gap_rows_print_the_measured_and_modelled_load_ratios() -> None:
    out = run_benchmark("gap_rows")
    assert out.returncode == 0, out.stderr
    heavy = out.stdout.split("heavy load:")[1].split("TPOT measured")[0]
    rows = [m for m in map(HEAVY.match, heavy.splitlines()) if m]
    models = {m.group(1) for m in rows}
    assert {"Llama-3.1-8B-Instruct", "Qwen3-32B"} <= models
    for m in rows:
        measured, modelled = float(m.group(4)), float(m.group(5))
        assert int(m.group(3)) > 0 and measured > 0 and modelled > 0
    # The signature the docs quote: from C = 64 to 128 the measured TTFT of the dense gap rows
    # grows far more than the modelled one (no launch setting explains it yet).
    llama = [m for m in rows if m.group(1) == "Llama-3.1-8B-Instruct"]
    assert all(float(m.group(4)) > 1.5 * float(m.group(5)) for m in llama)


WAITING = re.compile(
    r"^\s+(\S+)\s+C\s+(\d+)\s+n=\s*(\d+)\s+(-?[\d.]+)\s+(-?[\d.]+)\.\.\s*(-?[\d.]+)$"
)


def test_gap_rows_waiting_reads_one_request_for_llama_and_a_share_of_c_for_qwen() -> None:
    out = run_benchmark("gap_rows")
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("waiting:")[1]
    rows = {(m.group(1), int(m.group(2))): m for m in map(WAITING.match, block.splitlines()) if m}
    for c in (8, 16):
        m = rows[("Llama-3.1-8B-Instruct", c)]
        lo, mid, hi = float(m.group(5)), float(m.group(4)), float(m.group(6))
        # The docs' signature: about one request always waiting, whatever C (Little's law).
        assert lo <= mid <= hi and 0.8 < mid < 1.4
    # Qwen3-32B's waiting grows with C (partial cohorts), unlike Llama-3.1-8B's.
    qwen = [float(rows[("Qwen3-32B", c)].group(4)) for c in (8, 16, 32)]
    assert qwen[0] < qwen[1] < qwen[2]
