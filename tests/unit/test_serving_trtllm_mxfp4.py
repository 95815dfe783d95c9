"""TensorRT-LLM's gpt-oss MXFP4 experts on Hopper (W4A16_MXFP4 through the TRITON MoE backend,
OpenAI triton_kernels ``matmul_ogs``): stored and computed padded to the kernel's alignment
(``TritonMXFP4FusedMoEMethod`` k_alignment 128, n_alignment 256), at the grouped Triton kernel's
measured rate as a share of the BF16 peak. Blackwell's native FP4 experts and the other formats
keep their model."""

from __future__ import annotations

import dataclasses
from importlib import resources

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model


def _it(gpu: str = "h200-sxm", tp: int = 1, weights: str = "mxfp4", eng: str = "tensorrt-llm"):
    e = engine(eng)
    return _iteration_model(
        catalog.model("gpt-oss-120b"),
        catalog.cluster(gpu, tp),
        Parallelism(tp=tp),
        weight_format(weights),
        "bf16",
        load_profile(e.cost_profile),
        e,
    )


def _prefill_ms(it: IterationModel, tokens: float) -> float:
    p = np.array([tokens])
    return float(it.parts_s(np.zeros(1), np.zeros(1), p, p / 2.0)["gpu"][0]) * 1e3


@pytest.mark.parametrize(("tp", "dims"), [(1, (2944.0, 2944.0)), (8, (2944.0, 384.0))])
def test_hopper_experts_are_padded_to_the_triton_alignment(
    tp: int, dims: tuple[float, float]
) -> None:
    # gemm1 K = hidden 2,880 -> 2,944 (128); intermediate per rank 2,880 -> 2,944, 360 -> 384.
    assert _it(tp=tp).moe_expert_dims() == dims


def test_blackwell_native_fp4_experts_are_not_padded() -> None:
    assert _it(gpu="b200").moe_expert_dims() == (2880.0, 2880.0)


def test_grouped_rate_is_the_triton_curve_at_the_bf16_peak() -> None:
    it = _it()
    curve = load_profile("tensorrt-llm").moe_gemm_precise("h200-sxm", "hopper", "mxfp4")
    assert curve is not None
    he, f = it.moe_expert_dims()
    rows = np.array([32.0, 256.0, 4096.0])
    # gate and up (K = 2,944) and down (N = 3,072) of one expert
    flops = 2.0 * rows * (2.0 * he + it.moe_expert_out_hidden()) * f
    bf16 = it.cluster.device.peak("bf16") * 1e12
    np.testing.assert_allclose(it.moe_grouped_rate(rows), curve(flops) * bf16, rtol=1e-12)
    # wgmma after the in-register decode: no Ampere mma.sync share, unlike vLLM's Marlin.
    assert it.moe_math_rate() == 1.0
    assert _it(eng="vllm").moe_math_rate() == pytest.approx(0.667)


def test_the_curve_is_vllms_measured_triton_curve() -> None:
    # Borrowed whole, not refitted: the same five points as vLLM's Triton fused_moe curve.
    trt = load_profile("tensorrt-llm").moe_gemm_precise("h200-sxm", "hopper", "mxfp4")
    vllm = load_profile("vllm").moe_gemm_curve("h200-sxm", "hopper")
    assert trt is not None and vllm is not None
    assert tuple(trt.flops) == tuple(vllm.flops)
    assert tuple(trt.efficiency) == tuple(vllm.efficiency)


def test_the_profile_cites_the_kernel_and_states_the_assumption() -> None:
    text = (
        resources.files("gpuscale.catalog")
        .joinpath("data/profiles/tensorrt-llm.yaml")
        .read_text(encoding="utf-8")
    )
    for needle in ("TritonMXFP4FusedMoEMethod", "k_alignment", "W4A16_MXFP4", "ASSUMPTION"):
        assert needle in text


def test_long_prompts_cost_more_per_token_than_the_dense_curve_gave() -> None:
    # An 8k prompt puts 256 rows on each expert (1.3e10 FLOPs per expert MLP): the grouped
    # kernel's curve (~0.4 of the peak there) binds, not the dense curve at the group's FLOPs.
    it = _it()
    curves = {k: v for k, v in it.profile.moe_gemm.items() if k != "hopper-mxfp4"}
    dense = dataclasses.replace(it, profile=dataclasses.replace(it.profile, moe_gemm=curves))
    assert _prefill_ms(it, 8192.0) > 1.3 * _prefill_ms(dense, 8192.0)
    # Decode stays weight-read-bound: a few rows per expert never reach the curve's ceiling.
    dec, ctx, none = np.array([8.0]), np.array([2048.0]), np.zeros(1)
    assert it.time_s(dec, ctx, none, none)[0] == pytest.approx(
        dense.time_s(dec, ctx, none, none)[0], rel=1e-9
    )


def test_other_formats_and_engines_are_untouched() -> None:
    # vLLM keeps its Marlin alignment (hidden 256) and its device curve.
    assert _it(eng="vllm").moe_expert_dims() == (3072.0, 2944.0)
    # TensorRT-LLM's block-FP8 experts keep DeepGEMM's curve.
    prof = load_profile("tensorrt-llm")
    assert prof.moe_gemm_precise("h200-sxm", "hopper", "fp8_block") is not None
    assert prof.moe_gemm_precise("h200-sxm", "hopper", "bf16") is None


def test_the_down_gemm_output_is_padded_to_the_n_alignment() -> None:
    # w2 is (experts, pad(f_rank, 128) / 2, pad(hidden, n_alignment = 256)) and matmul_ogs
    # computes every column of it before _maybe_remove_padding slices the output back to 2,880:
    # the down GEMM's N is 3,072, where the up GEMM's K is 2,944.
    assert _it().moe_expert_out_hidden() == 3072.0
    assert _it(tp=8).moe_expert_out_hidden() == 3072.0
    # vLLM's Marlin pads the hidden size once, to 256, for both GEMMs; Blackwell: as stored.
    assert _it(eng="vllm").moe_expert_out_hidden() == 3072.0
    assert _it(gpu="b200").moe_expert_out_hidden() == 2880.0


def test_the_padded_down_projection_is_stored_and_computed() -> None:
    from gpuscale.planner.serving.deployment import kv_pool
    from gpuscale.planner.serving.steady_state import Workload

    it = _it(gpu="h100-sxm")
    short = dataclasses.replace(
        it.profile,
        constants={**it.profile.constants, "moe_marlin_mxfp4_hidden_out_align": 128.0},
    )
    m, cl, par, fmt = it.model, it.cluster, it.par, it.fmt
    eng, work = engine("tensorrt-llm"), Workload(input_len=1024.0, output_len=1024.0)
    _, w_256, _ = kv_pool(m, cl, par, fmt, "bf16", it.profile, eng, work)
    _, w_128, _ = kv_pool(m, cl, par, fmt, "bf16", short, eng, work)
    # 36 layers x 128 experts x 2,944 x (3,072 - 2,944) MXFP4 values more on one GPU.
    extra = m.num_layers * m.num_experts * 2944 * (3072 - 2944) * fmt.weight_bytes
    assert (w_256 - w_128) * 2**30 == pytest.approx(extra, rel=1e-9)
    # and the 8k prefill computes them
    assert _prefill_ms(it, 8192.0) > _prefill_ms(dataclasses.replace(it, profile=short), 8192.0)
