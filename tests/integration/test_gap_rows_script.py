"""benchmarks/gap_rows.py: the gap-analysis signatures quoted in
docs/investigations/serving-gap-analysis-rows.md."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.benchmark_scripts import run_benchmark


@pytest.fixture(scope="module")
def gap_rows() -> subprocess.CompletedProcess[str]:
    """One run of the script (no arguments) for every test here: it reads only the data."""
    return run_benchmark("gap_rows")


HEAVY = re.compile(r"^\s+(\S+)\s+OSL\s+(\d+)\s+n=\s*(\d+)\s+([\d.]+)\s+([\d.]+)$")


def test_gap_rows_print_the_measured_and_modelled_load_ratios(
    gap_rows: subprocess.CompletedProcess[str],
) -> None:
    out = gap_rows
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


def test_gap_rows_waiting_reads_one_request_for_llama_and_a_share_of_c_for_qwen(
    gap_rows: subprocess.CompletedProcess[str],
) -> None:
    out = gap_rows
    assert out.returncode == 0, out.stderr
    block = out.stdout.split("waiting:")[1].split("held per completion:")[0]
    rows = {(m.group(1), int(m.group(2))): m for m in map(WAITING.match, block.splitlines()) if m}
    for c in (8, 16):
        m = rows[("Llama-3.1-8B-Instruct", c)]
        lo, mid, hi = float(m.group(5)), float(m.group(4)), float(m.group(6))
        # The docs' signature: about one request always waiting, whatever C (Little's law).
        assert lo <= mid <= hi and 0.8 < mid < 1.4
    # Qwen3-32B's waiting grows with C (partial cohorts), unlike Llama-3.1-8B's.
    qwen = [float(rows[("Qwen3-32B", c)].group(4)) for c in (8, 16, 32)]
    assert qwen[0] < qwen[1] < qwen[2]


HELD = re.compile(r"^\s+(\S+)\s+C\s+(\d+)\s+n=\s*(\d+)\s+(-?[\d.]+)\s+(-?[\d.]+)\.\.\s*(-?[\d.]+)$")
CEILING = re.compile(r"^\s+(\S+)\s+TP\s+(\d+)\s+OSL\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)$")


def test_gap_rows_hold_per_completion_and_output_ceiling(
    gap_rows: subprocess.CompletedProcess[str],
) -> None:
    """Branch ``trt-dense``: the two measured signatures
    docs/investigations/serving-gap-analysis-rows.md quotes."""
    out = gap_rows
    assert out.returncode == 0, out.stderr
    held_block = out.stdout.split("held per completion:")[1].split("output ceiling")[0]
    held = {
        (m.group(1), int(m.group(2))): float(m.group(4))
        for m in map(HELD.match, held_block.splitlines())
        if m
    }
    # Llama-3.1-8B's light-load TTFT carries about one whole interval between completions
    # (it grows with the output length at a fixed prompt); Qwen3-32B's, same engine and
    # version, carries none.
    for c in (8, 16):
        assert 0.8 < held[("Llama-3.1-8B-Instruct", c)] < 1.1
        assert abs(held[("Qwen3-32B", c)]) < 0.1
    ceiling_block = out.stdout.split("output ceiling")[1].split("prefill slope")[0]
    rows = {
        (m.group(1), int(m.group(2)), int(m.group(3))): m
        for m in map(CEILING.match, ceiling_block.splitlines())
        if m
    }
    measured = [float(rows[("Llama-3.1-8B-Instruct", tp, 512)].group(4)) for tp in (2, 4, 8)]
    modelled = [float(rows[("Llama-3.1-8B-Instruct", tp, 512)].group(5)) for tp in (2, 4, 8)]
    # Measured output rate at C = 128 does not grow from TP2 to TP8 (within 5%), the model's
    # (GPU-bound) rate does; the requests decoding by Little's law stay below C.
    assert max(measured) < 1.05 * min(measured)
    assert modelled[2] > 1.5 * modelled[0]
    for tp in (4, 8):
        assert float(rows[("Llama-3.1-8B-Instruct", tp, 512)].group(6)) < 100
