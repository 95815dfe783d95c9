"""benchmarks/trt_rc3_ttft_hold.py: the TTFT-hold signatures
docs/investigations/serving-gap-analysis-rows.md quotes
(branch ``aic-trt10``)."""

from __future__ import annotations

import re
import statistics

from tests.benchmark_scripts import run_benchmark

SUMMARY = re.compile(
    r"^\s+(\S+)\s+ISL\s+(\d+)\s+n=\s*(\d+)\s+([\d.]+) \(\s*([\d.]+)\.\.\s*([\d.]+)\)"
    r"\s+ISL/it\s+([\d.]+)$"
)
SHARE = re.compile(r"^\s+(\S+)\s+n=\s*(\d+)\s+([\d.]+) \(([\d.]+)\.\.([\d.]+)\)$")
THROUGH = re.compile(r"^\s+(measured|model as shipped|model, generator launch)\s+n=\s*(\d+)"
                     r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$")  # fmt: skip
CROSS = re.compile(r"^\s+TP(\d) ISL\s+(\d+) C\s+(\d+)\s+vLLM.*ratio\s+([\d.]+)$")


def test_hold_signatures() -> None:
    out = run_benchmark("trt_rc3_ttft_hold")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    summary = {(m.group(1), int(m.group(2))): m for m in map(SUMMARY.match, lines) if m}
    # Qwen3-32B: a hold of about one decode iteration per 75-80 prompt tokens at every ISL
    for isl in (1024, 2048, 4096):
        per_it = float(summary[("Qwen3-32B", isl)].group(7))
        assert 60.0 < per_it < 100.0
    share = {m.group(1): float(m.group(3)) for m in map(SHARE.match, lines) if m}
    assert set(share) == {"Llama-3.1-8B-Instruct", "Qwen3-235B-A22B-FP8", "Qwen3-32B"}
    assert all(v > 0.7 for v in share.values())  # most of the measured TTFT is the hold
    through = {
        m.group(1): [float(m.group(i)) for i in (3, 4, 5)] for m in map(THROUGH.match, lines) if m
    }
    # measured prompts lie in the decode spans; the shipped model puts them in the wait
    assert through["measured"][0] > 0.85
    assert through["model as shipped"][0] < 0.7
    ratios = [float(m.group(4)) for m in map(CROSS.match, lines) if m]
    assert len(ratios) >= 20
    # the campaign's vLLM grid holds about as long in milliseconds
    assert 0.85 < statistics.median(ratios) < 1.15


def test_the_script_takes_only_readings() -> None:
    out = run_benchmark("trt_rc3_ttft_hold", "--tp", "8")
    assert out.returncode == 2
    assert "unrecognized arguments: --tp 8" in out.stderr and "Traceback" not in out.stderr
