"""benchmarks/deepgemm_moe_rate.py: TensorRT-LLM's grouped-kernel ceiling against DeepGEMM's
published rates, as quoted in docs/investigations/serving-moe-kernels.md."""

from __future__ import annotations

from tests.benchmark_scripts import run_benchmark


def test_every_published_layout_comes_back_and_the_dense_curve_is_compared() -> None:
    out = run_benchmark("deepgemm_moe_rate")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()[1:] if line.strip()]
    assert len(rows) == 5, out.stdout
    # model / published within 1% for every published layout.
    assert all(abs(float(r[5]) - 1.0) <= 0.01 for r in rows), rows
    # The dense FP8 curve the model used before stays within a factor of two of the kernel.
    assert all(0.5 < float(r[7]) < 2.0 for r in rows), rows
