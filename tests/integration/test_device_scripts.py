"""The device-machine scripts (benchmarks/device_*.py): a CPU smoke run of each writes the file
its GPU run writes, a CPU run without --smoke says in one line why not, and the comparison
script reads the shipped H200 readings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.benchmark_scripts import run_benchmark


def test_kernel_readings_smoke_run_writes_every_section(tmp_path: Path) -> None:
    out = tmp_path / "kernels.json"
    run = run_benchmark("device_serving_kernels", "--smoke", "--out", str(out), timeout=300)
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert data["bandwidth"]["copy_gb_per_s"] > 0 and data["gaps"]["kernels"] == 50
    kinds = {r["kind"] for r in data["gemms"]}
    assert kinds == {"bf16", "fp8_tensor", "fp8_rowwise"}
    assert all(r["seconds"] > 0 for r in data["gemms"] if r["kind"] == "bf16")
    assert data["decode_attention"] and data["prefill_attention"]


def test_step_smoke_run_times_both_steps(tmp_path: Path) -> None:
    out = tmp_path / "step.json"
    run = run_benchmark("device_serving_step", "--smoke", "--out", str(out), timeout=300)
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    for kind in ("prefill", "decode"):
        assert data[kind]["replays"] >= 1
        assert data[kind]["first_tenth_s"] > 0 and data[kind]["one_layer_isolated_s"] > 0


@pytest.mark.parametrize("name", ["device_serving_kernels", "device_serving_step"])
def test_without_a_gpu_the_run_says_so(name: str, tmp_path: Path) -> None:
    run = run_benchmark(name, "--out", str(tmp_path / "x.json"), timeout=120)
    assert run.returncode == 2
    assert run.stderr.strip() == "no CUDA device: run with --smoke for a CPU syntax check"
    assert not (tmp_path / "x.json").exists()


def test_comparison_reads_the_shipped_h200_readings() -> None:
    run = run_benchmark("device_kernels_vs_model", timeout=300)
    assert run.returncode == 0, run.stderr
    # the measured form's mean |error| per regime, BF16 and per-tensor FP8: at most 13%
    graph = re.findall(r"graph (bf16|fp8_tensor)\s.*;\s+(\d+)%\)", run.stdout)
    assert len(graph) == 6
    assert all(int(err) <= 13 for _, err in graph)
    assert "a = 5.39 us" in run.stdout  # the BF16 weight-bound intercept
