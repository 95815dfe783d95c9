"""benchmarks/validate_trtllm_throughput.py: TensorRT-LLM's published maximum-throughput runs,
held out, on a sample of its rows."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

LINE = re.compile(r"^(\S+)\s+n=\s*(\d+)\s+mean\|e\|\s+([\d.]+)%\s+median\|e\|\s+([\d.]+)%")


def test_sample_is_predicted_and_summarised() -> None:
    out = run_benchmark("validate_trtllm_throughput", "--limit", "60", "--by", "arch")
    assert out.returncode == 0, out.stderr
    lines = {m.group(1): m for m in map(LINE.match, out.stdout.splitlines()) if m}
    assert int(lines["all"].group(2)) >= 20
    # Held-out throughput: far from the Little's-law reading's +60%.
    assert float(lines["all"].group(4)) < 40.0
    assert "arch=dense" in lines
    assert "not read" in out.stdout


def test_bad_arguments_get_one_line() -> None:
    out = run_benchmark("validate_trtllm_throughput", "--by", "colour")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "accepted" in out.stderr
