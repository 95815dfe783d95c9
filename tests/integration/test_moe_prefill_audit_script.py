"""benchmarks/moe_prefill_audit.py: the MoE prefill term by term against the light-load rows,
quoted in docs/investigations/serving-moe-prefill.md ("MoE prefill, term by term")."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark


def _row(text: str, pattern: str) -> list[float]:
    line = next(ln for ln in text.splitlines() if re.search(pattern, ln))
    return [float(x) for x in re.findall(r"[-+]?\d+\.\d+|[-+]?\d+", line.split("h200", 1)[1])]


def test_trtllm_gpt_oss_one_gpu_prefill_rate_is_priced_within_a_fifth() -> None:
    out = run_benchmark("moe_prefill_audit", "--engine", "trtllm", "--model", "gpt-oss")
    assert out.returncode == 0, out.stderr
    # tp ep dp c, measured a + b, model a + b, proj attn expert moe+ comm rest gpu, floor, ...
    nums = _row(out.stdout, r"gpt-oss-dev\s+gpt-oss-120b\s+h200\s+1\s+1\s+1\s+4")
    meas_slope, gpu_slope = nums[5], nums[14]
    assert 28.0 < meas_slope < 36.0
    # The grouped Triton curve prices the one-GPU prefill rate within 20% of the rows.
    assert abs(gpu_slope / meas_slope - 1.0) < 0.2
    # The eager host floor of TensorRT-LLM's context phase is listed.
    assert 30.0 < nums[15] < 45.0


def test_bad_engine_is_refused() -> None:
    out = run_benchmark("moe_prefill_audit", "--engine", "tgi")
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
