"""vLLM's grouped expert-GEMM kernels on Hopper at their measured rate: the whole fused-MoE op
sustains a share of the 16-bit peak that follows one expert's work (benchmark_moe.py results in
vLLM PRs #44818 and #24700), FP8 W8A8 at most 1.17x the BF16 kernel (PR #35457), Marlin's
mma.sync at two thirds of that. Engines whose profile measured no grouped kernel keep the dense
curve; decode stays weight-read-bound."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import Profile, load_profile, load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model

H100_BF16_PEAK = 989.4e12


def _model(
    name: str,
    eng_name: str,
    weights: str,
    gpu: str = "h200-sxm",
    tp: int = 1,
    profile: Profile | None = None,
) -> IterationModel:
    eng = engine(eng_name)
    prof = profile or load_profile(eng.cost_profile)
    par = Parallelism(tp=tp)
    cl = catalog.cluster(gpu, tp)
    m = catalog.model(name)
    return _iteration_model(m, cl, par, weight_format(weights), "bf16", prof, eng)


def _without_curve(eng_name: str = "vllm") -> Profile:
    return dataclasses.replace(load_profile(engine(eng_name).cost_profile), moe_gemm={})


def _prefill(it: IterationModel, tokens: float) -> float:
    return float(it.time_s(np.zeros(1), np.zeros(1), np.array([tokens]), np.array([tokens / 2]))[0])


def _decode(it: IterationModel, n: float) -> float:
    return float(it.time_s(np.array([n]), np.array([1024.0]), np.zeros(1), np.zeros(1))[0])


def test_the_curve_gives_back_the_benchmark_it_was_read_from() -> None:
    # Mixtral-8x7B BF16 TP2 on an H100, 1,024 tokens (vLLM PR #24700, tuned config): 2,048
    # token-expert pairs, 256 rows per expert, 360.8 GFLOP in 833.72 us for the whole op.
    it = _model("mixtral-8x7b", "vllm", "bf16", gpu="h100-sxm", tp=2)
    rate = float(it.moe_grouped_rate(np.array([256.0]))[0])
    flops = 2.0 * 2048 * 3 * 4096 * 14336 / 2
    assert flops / rate == pytest.approx(833.72e-6, rel=0.01)
    # Twice the rows per expert, a larger share of the peak; never above the dense best.
    assert it.moe_grouped_rate(np.array([512.0]))[0] > rate
    assert rate < 0.5 * H100_BF16_PEAK


def test_fp8_and_marlin_scale_the_same_kernel_curve() -> None:
    rows = np.array([256.0])
    bf16 = _model("qwen3-30b-a3b", "vllm", "bf16").moe_grouped_rate(rows)[0]
    fp8 = _model("qwen3-30b-a3b", "vllm", "fp8").moe_grouped_rate(rows)[0]
    marlin = _model("qwen3-30b-a3b", "vllm", "int4_wo").moe_grouped_rate(rows)[0]
    assert fp8 / bf16 == pytest.approx(1.17)
    assert marlin / bf16 == pytest.approx(0.667)


# TensorRT-LLM's gpt-oss MXFP4 experts on Hopper have their own curve now
# (tests/unit/test_serving_trtllm_mxfp4.py); on Blackwell they are native FP4, without one.
@pytest.mark.parametrize(
    ("eng_name", "gpu"), [("tensorrt-llm", "b200"), ("sglang", "h200-sxm"), ("vllm", "b200")]
)
def test_no_measured_kernel_no_ceiling(eng_name: str, gpu: str) -> None:
    it = _model("gpt-oss-120b", eng_name, "mxfp4", gpu=gpu)
    assert np.isinf(it.moe_grouped_rate(np.array([256.0]))).all()


def test_dense_models_are_untouched() -> None:
    it = _model("llama3.1-8b", "vllm", "bf16")
    assert np.isinf(it.moe_grouped_rate(np.array([256.0]))).all()


def test_vllm_prefill_slows_where_the_experts_compute_and_decode_does_not() -> None:
    # gpt-oss-120b MXFP4 on one H200 through Marlin MoE: an 8k-token chunk puts 256 tokens on
    # each expert, where the measured grouped kernel is well below the dense curve's best.
    measured = _model("gpt-oss-120b", "vllm", "mxfp4")
    dense = _model("gpt-oss-120b", "vllm", "mxfp4", profile=_without_curve())
    assert _prefill(measured, 8192.0) > 1.25 * _prefill(dense, 8192.0)
    # Four decoding requests read the touched experts' weights either way.
    assert _decode(measured, 4.0) == pytest.approx(_decode(dense, 4.0), rel=0.01)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("moe_gemm: {hoper: {flops: [1.0e9], efficiency: [0.3]}}\n", "did you mean hopper"),
        (
            "moe_gemm: {hopper: {flops: [1.0e9], efficiency: [1.5]}}\n",
            "moe_gemm.hopper.efficiency[0]",
        ),
        ("moe_gemm: 3\n", "moe_gemm must be a mapping"),
        ("constants: {moe_fp8_over_bf16_rate: 0.5}\n", ">= 1"),
    ],
)
def test_bad_grouped_curves_are_one_line_errors(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("schema_version: 1\n" + text)
    with pytest.raises(InputError) as err:
        load_profile_for("vllm", str(path))
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_an_overlay_can_measure_its_own_grouped_kernel(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "schema_version: 1\nmoe_gemm: {h200-sxm: {flops: [1.0e9, 1.0e11], efficiency: [0.2, 0.6]}}\n"
    )
    prof = load_profile_for("vllm", str(path))
    curve = prof.moe_gemm_curve("h200-sxm", "hopper")
    assert curve is not None and float(curve(1.0e10)) == pytest.approx(0.4)
    # The device's own curve wins over the generation's; other Hopper parts keep vLLM's.
    assert prof.moe_gemm_curve("h100-sxm", "hopper") == load_profile("vllm").moe_gemm["hopper"]


def test_marlin_mxfp4_experts_are_padded_to_the_kernels_alignment() -> None:
    # vLLM v0.18 Mxfp4MoEMethod.create_weights for Marlin: hidden to 256, intermediate per rank
    # to 128; gpt-oss-120b's 2,880 / 2,880 become 3,072 / 2,944 on one GPU, 3,072 / 384 at TP8.
    assert _model("gpt-oss-120b", "vllm", "mxfp4").moe_expert_dims() == (3072.0, 2944.0)
    assert _model("gpt-oss-120b", "vllm", "mxfp4", tp=8).moe_expert_dims() == (3072.0, 384.0)
    # TensorRT-LLM's Triton MXFP4 method pads both to 128 (test_serving_trtllm_mxfp4.py).
    assert _model("gpt-oss-120b", "tensorrt-llm", "mxfp4").moe_expert_dims() == (2944.0, 2944.0)
    # Other engines' kernels, other formats (Kimi's INT4 Marlin path needs no padding: it
    # falls back to another kernel where the shape does not divide) and Blackwell: as stored.
    assert _model("gpt-oss-120b", "sglang", "mxfp4").moe_expert_dims() == (2880.0, 2880.0)
    assert _model("gpt-oss-120b", "vllm", "mxfp4", gpu="b200").moe_expert_dims() == (2880.0, 2880.0)
    assert _model("qwen3-30b-a3b", "vllm", "int4_wo").moe_expert_dims() == (2048.0, 768.0)


def test_padding_costs_the_experts_math_and_weight_read() -> None:
    padded = _model("gpt-oss-120b", "vllm", "mxfp4")
    base = padded.profile
    exact = dataclasses.replace(
        base,
        constants={
            **base.constants,
            "moe_marlin_mxfp4_hidden_align": 1.0,
            "moe_marlin_mxfp4_intermediate_align": 1.0,
            "moe_marlin_mxfp4_hidden_out_align": 1.0,
        },
    )
    unpadded = _model("gpt-oss-120b", "vllm", "mxfp4", profile=exact)
    assert unpadded.moe_expert_dims() == (2880.0, 2880.0)
    # 8k-token prefill on one H200: the experts, most of the iteration, do (3072 x 2944) /
    # (2880 x 2880) = 1.09x the work.
    ratio = _prefill(padded, 8192.0) / _prefill(unpadded, 8192.0)
    assert 1.03 < ratio < 1.09
    # Decode at 64 requests streams every touched expert's padded weights.
    assert _decode(padded, 64.0) > _decode(unpadded, 64.0)


def test_padded_experts_are_counted_in_the_memory_before_the_kv_pool() -> None:
    # vLLM allocates Marlin MXFP4 experts padded (Mxfp4MoEMethod.create_weights), so the weights
    # left before the KV pool are the padded ones: gpt-oss-120b on one H100 stores
    # 36 layers x 128 experts x 3 x (3072 x 2944 - 2880 x 2880) MXFP4 weights more, ~5.5 GB.
    from gpuscale.planner.serving.deployment import kv_pool
    from gpuscale.planner.serving.steady_state import Workload

    padded = _model("gpt-oss-120b", "vllm", "mxfp4", gpu="h100-sxm")
    base = padded.profile
    exact = dataclasses.replace(
        base,
        constants={
            **base.constants,
            "moe_marlin_mxfp4_hidden_align": 1.0,
            "moe_marlin_mxfp4_intermediate_align": 1.0,
            "moe_marlin_mxfp4_hidden_out_align": 1.0,
        },
    )
    m, cl, par, fmt = padded.model, padded.cluster, padded.par, padded.fmt
    eng, work = engine("vllm"), Workload(input_len=1024.0, output_len=1024.0)
    kv_p, w_p, _ = kv_pool(m, cl, par, fmt, "bf16", base, eng, work)
    kv_e, w_e, _ = kv_pool(m, cl, par, fmt, "bf16", exact, eng, work)
    extra = m.num_layers * m.num_experts * 3 * (3072 * 2944 - 2880 * 2880) * fmt.weight_bytes
    assert (w_p - w_e) * 2**30 == pytest.approx(extra, rel=1e-9)
    assert kv_p < kv_e
    # Blackwell computes MXFP4 natively (no Marlin): weights as stored.
    b200 = _model("gpt-oss-120b", "vllm", "mxfp4", gpu="b200")
    _, w_b, _ = kv_pool(m, b200.cluster, par, fmt, "bf16", base, eng, work)
    _, w_b_exact, _ = kv_pool(m, b200.cluster, par, fmt, "bf16", exact, eng, work)
    assert w_b == pytest.approx(w_b_exact)
