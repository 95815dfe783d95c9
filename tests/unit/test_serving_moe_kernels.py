"""MoE grouped GEMMs as the engines run them: each expert's rows padded to the kernel's tile, and
weight-only experts on Hopper at the mixed-input kernel's rate (Marlin MoE: mma.sync, about two
thirds of the wgmma peak). Prefill (many tokens per expert) pays; decode stays weight-read-bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model


def _model(
    name: str, eng_name: str, weights: str, gpu: str = "h200-sxm", **const: float
) -> IterationModel:
    m = catalog.model(name)
    cl = catalog.cluster(gpu, 1)
    eng = engine(eng_name)
    prof: Profile = load_profile(eng.cost_profile)
    if const:
        prof = dataclasses.replace(prof, constants={**prof.constants, **const})
    return _iteration_model(m, cl, Parallelism(), weight_format(weights), "bf16", prof, eng)


def _prefill(it: IterationModel, tokens: float) -> float:
    return float(it.time_s(np.zeros(1), np.zeros(1), np.array([tokens]), np.array([tokens / 2]))[0])


def _prefill_gpu(it: IterationModel, tokens: float) -> float:
    parts = it.parts_s(np.zeros(1), np.zeros(1), np.array([tokens]), np.array([tokens / 2]))
    return float(parts["gpu"][0])


def _decode(it: IterationModel, n: float) -> float:
    return float(it.time_s(np.array([n]), np.array([1024.0]), np.zeros(1), np.zeros(1))[0])


def test_padded_rows_round_each_expert_up_to_its_tile() -> None:
    it = _model("gpt-oss-120b", "vllm", "mxfp4")
    rows = it.moe_padded_rows(np.array([1.0, 10.0, 32.0, 256.0]))
    # 1 token: one 16-row tile; 10: an upper estimate, 16 plus the chance of a second; 32 tokens: a 64-row tile (32 / 0.9 > 32); 256 tokens:
    # the 64-row ceiling and half a tile of padding on average.
    assert rows.tolist() == [16.0, 18.0, 64.0, 288.0]
    assert np.all(rows >= np.array([1.0, 10.0, 32.0, 256.0]))


def test_weight_only_experts_on_hopper_run_at_the_marlin_rate_in_vllm() -> None:
    # gpt-oss-120b MXFP4 on one H200: vLLM runs Marlin MoE (PR #27523), TensorRT-LLM OpenAI's
    # triton_kernels (rate 1). An 8k-token prefill is compute-bound in the experts: the
    # Marlin rate lengthens it by up to 1.5x; a 1.0 rate gives the old time back.
    marlin = _model("gpt-oss-120b", "vllm", "mxfp4")
    wgmma = _model("gpt-oss-120b", "vllm", "mxfp4", moe_weight_only_hopper_rate=1.0)
    assert marlin.moe_math_rate() == pytest.approx(0.667)
    assert _model("gpt-oss-120b", "tensorrt-llm", "mxfp4").moe_math_rate() == 1.0
    slow, fast = _prefill(marlin, 8192.0), _prefill(wgmma, 8192.0)
    assert 1.15 < slow / fast < 1.5
    # Decode at four requests reads the touched experts' weights: unchanged.
    assert _decode(marlin, 4.0) == pytest.approx(_decode(wgmma, 4.0), rel=0.01)


def test_natively_computed_formats_and_other_generations_keep_the_curve() -> None:
    # W8A8 FP8 on Hopper and W4A16 on Blackwell (native FP4) are not weight-only there.
    assert _model("qwen3-30b-a3b", "vllm", "fp8").moe_math_rate() == 1.0
    assert _model("gpt-oss-120b", "vllm", "mxfp4", gpu="b200").moe_math_rate() == 1.0
    assert _model("gpt-oss-120b", "vllm", "int4_wo", gpu="h100-sxm").moe_math_rate() == 0.667


def test_tile_padding_costs_prefill_where_experts_get_few_tokens() -> None:
    # Qwen3-30B-A3B (128 experts, top 8) FP8 on one H200, 1,024 prompt tokens: 64 tokens per
    # expert, 96 rows computed with 64-row tiles; a 1-row tile (no padding) is faster.
    # (On the GPU: this eager SGLang prefill is held to its host's launch floor either way.)
    padded = _model("qwen3-30b-a3b", "sglang", "fp8")
    exact = _model("qwen3-30b-a3b", "sglang", "fp8", moe_block_m=1.0)
    assert _prefill_gpu(padded, 4096.0) > _prefill_gpu(exact, 4096.0) * 1.02
    # Decode at 8 requests: the expert GEMMs stay weight-read-bound with 16-row tiles.
    assert _decode(padded, 8.0) == pytest.approx(_decode(exact, 8.0), rel=0.02)


@pytest.mark.parametrize("ep", [1, 2, 4, 8])
def test_expert_gemms_stay_grouped_when_each_rank_holds_one_expert(ep: int) -> None:
    # Mixtral's 8 experts over EP = 8 leave one expert per rank: still the engine's fused-MoE
    # kernel (Marlin for INT4 weight-only on Hopper), so its rate and tile padding apply at every
    # EP size, not only where a rank holds several experts.
    def model(rate: float) -> IterationModel:
        m = catalog.model("mixtral-8x7b")
        cl = catalog.cluster("h100-sxm", ep)
        eng = engine("vllm")
        base = load_profile(eng.cost_profile)
        prof = dataclasses.replace(
            base, constants={**base.constants, "moe_weight_only_hopper_rate": rate}
        )
        par = Parallelism(tp=ep, ep=ep)
        return _iteration_model(m, cl, par, weight_format("int4_wo"), "bf16", prof, eng)

    slow, fast = _prefill(model(0.667), 16384.0), _prefill(model(1.0), 16384.0)
    assert slow / fast > 1.05
