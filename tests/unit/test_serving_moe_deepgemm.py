"""TensorRT-LLM's block-FP8 experts on Hopper run DeepGEMM's grouped kernel (its CUTLASS fused
MoE's ``fp8_grouped_gemm_run``); the ``tensorrt-llm`` profile carries DeepGEMM's published rates
as a curve keyed by the experts' precision (``moe_gemm: hopper-fp8``), a share of the FP8 peak.
Formats computed in another precision keep today's model; vLLM's curve is unchanged."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model

FP8_PEAK = 1979e12  # H100 SXM and H800 SXM5 dense FP8 (DeepGEMM's README ran on H800)
# DeepGEMM README @55ab91f: (rows per expert, gate+up TFLOP/s, down TFLOP/s).
README = ((256, 932.0, 815.0), (512, 1040.0, 916.0), (1024, 1233.0, 925.0), (4096, 1346.0, 1214.0))


def _model(name: str, eng_name: str, weights: str, gpu: str = "h100-sxm") -> IterationModel:
    eng = engine(eng_name)
    cl = catalog.cluster(gpu, 1)
    prof = load_profile(eng.cost_profile)
    return _iteration_model(
        catalog.model(name), cl, Parallelism(), weight_format(weights), "bf16", prof, eng
    )


def test_the_profile_reads_back_a_monotone_fp8_curve() -> None:
    prof = load_profile("tensorrt-llm")
    curve = prof.moe_gemm_precise("h200-sxm", "hopper", "fp8_block")
    assert curve is not None
    assert all(b > a for a, b in zip(curve.flops, curve.flops[1:], strict=False))
    assert all(b >= a for a, b in zip(curve.efficiency, curve.efficiency[1:], strict=False))
    # No curve for the experts' 16-bit math (gpt-oss MXFP4 on Hopper) nor for a device curve.
    assert prof.moe_gemm_precise("h200-sxm", "hopper", "bf16") is None
    # DeepGEMM runs block-scaled FP8 only: per-tensor FP8 experts take another kernel.
    assert prof.moe_gemm_precise("h200-sxm", "hopper", "fp8") is None
    assert prof.moe_gemm_curve("h200-sxm", "hopper") is None


def test_the_profile_cites_the_kernel_and_its_published_table() -> None:
    text = (
        resources.files("gpuscale.catalog")
        .joinpath("data/profiles/tensorrt-llm.yaml")
        .read_text(encoding="utf-8")
    )
    for needle in ("fp8_grouped_gemm_run", "GroupedWithOffset", "DeepGEMM", "@55ab91f"):
        assert needle in text


@pytest.mark.parametrize(("rows", "up", "down"), README)
def test_deepseek_experts_run_at_deepgemms_published_rate(
    rows: int, up: float, down: float
) -> None:
    # One DeepSeek-V3 expert MLP: gate+up has twice the down projection's FLOPs.
    it = _model("deepseek-v3", "tensorrt-llm", "fp8_block")
    published = 3.0 / (2.0 / up + 1.0 / down) * 1e12
    rate = float(it.moe_grouped_rate(np.array([float(rows)]))[0])
    assert rate == pytest.approx(published, rel=0.005)
    assert rate < FP8_PEAK


def test_other_precisions_and_engines_keep_their_model() -> None:
    rows = np.array([256.0])
    # gpt-oss MXFP4 on Hopper runs triton_kernels at 16 bits: its own curve, not DeepGEMM's
    # (tests/unit/test_serving_trtllm_mxfp4.py).
    oss = float(_model("gpt-oss-120b", "tensorrt-llm", "mxfp4").moe_grouped_rate(rows)[0])
    assert np.isfinite(oss) and oss < 989e12
    # vLLM's FP8 experts keep its Triton curve x 1.17, not TensorRT-LLM's DeepGEMM rate.
    vllm_fp8 = _model("qwen3-30b-a3b", "vllm", "fp8").moe_grouped_rate(rows)[0]
    vllm_bf16 = _model("qwen3-30b-a3b", "vllm", "bf16").moe_grouped_rate(rows)[0]
    assert vllm_fp8 / vllm_bf16 == pytest.approx(1.17)
    # Dense models have no grouped kernel.
    assert np.isinf(_model("llama3.1-8b", "tensorrt-llm", "fp8").moe_grouped_rate(rows)).all()


def test_a_precision_curve_wins_over_the_device_curve(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "schema_version: 1\nmoe_gemm:\n"
        "  hopper: {flops: [1.0e9, 1.0e12], efficiency: [0.1, 0.1]}\n"
        "  h100-sxm-fp8: {flops: [1.0e9, 1.0e12], efficiency: [0.5, 0.5]}\n"
    )
    prof = load_profile_for("vllm", str(path))
    eng = engine("vllm")
    it = _iteration_model(
        catalog.model("qwen3-30b-a3b"),
        catalog.cluster("h100-sxm", 1),
        Parallelism(),
        weight_format("fp8"),
        "bf16",
        prof,
        eng,
    )
    # A share of the FP8 peak, without the FP8-over-BF16 factor of device curves.
    assert float(it.moe_grouped_rate(np.array([256.0]))[0]) == pytest.approx(0.5 * FP8_PEAK)


@pytest.mark.parametrize(
    ("key", "needle"), [("hopper-fp9", "moe_gemm.hopper-fp9"), ("hoper-fp8", "did you mean")]
)
def test_unknown_precision_keys_are_one_line_errors(tmp_path: Path, key: str, needle: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        f"schema_version: 1\nmoe_gemm: {{{key}: {{flops: [1.0e9], efficiency: [0.3]}}}}\n"
    )
    with pytest.raises(InputError) as err:
        load_profile_for("tensorrt-llm", str(path))
    assert needle in str(err.value) and "\n" not in str(err.value)
