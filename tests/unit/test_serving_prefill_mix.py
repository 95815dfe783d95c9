"""The steady state prefills whole prompt chunks in some iterations and decodes only in the
rest (``steady_state.iteration_mix``), instead of spreading each prompt thinly over every
iteration: the iteration time is not linear in the tokens it carries."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import iteration_mix


def _it(model: str, eng_name: str, par: Parallelism, weights: str) -> IterationModel:
    m = catalog.model(model)
    cl = catalog.cluster("h200-sxm", par.gpus)
    eng = engine(eng_name)
    return _iteration_model(
        m, cl, par, weight_format(weights), "fp8", load_profile(eng.cost_profile), eng
    )


def _mix(it: IterationModel, eng_name: str, n: float, p: float, isl: float):
    eng = engine(eng_name)
    a = np.array([n])
    ctx, half = np.array([isl + 512.0]), np.array([isl / 2.0])
    mean, carrying, decode_only = iteration_mix(it, eng, a, ctx, np.array([p]), half, isl)
    spread = it.time_s(a, ctx, np.array([p]), half)
    return float(mean[0]), float(carrying[0]), float(decode_only[0]), float(spread[0])


def test_a_share_p_over_chunk_of_iterations_carries_a_whole_chunk() -> None:
    it = _it("llama3.1-70b", "tensorrt-llm", Parallelism(tp=8), "fp8")
    isl, p = 8192.0, 32.0  # 4 decoding requests of 1,024 output tokens: 4 x 8192 / 1023
    mean, carrying, decode_only, _ = _mix(it, "tensorrt-llm", 4.0, p, isl)
    # No chunked prefill on TensorRT-LLM: the whole 8,192-token prompt is one iteration.
    ctx, half = np.array([isl + 512.0]), np.array([isl / 2.0])
    assert carrying == pytest.approx(
        float(it.time_s(np.array([4.0]), ctx, np.array([isl]), half)[0])
    )
    share = p / isl
    assert mean == pytest.approx((1 - share) * decode_only + share * carrying)


def test_moe_prompt_is_not_charged_its_experts_in_every_iteration() -> None:
    # DeepSeek-R1 on 8 H200 (TP8, EP8), 4 requests decoding 8k-token contexts: 32 prompt tokens
    # per iteration on average touch most of the 256 experts, so spreading them over every
    # iteration reads almost all expert weights each time; one 8k-token prefill reads them once.
    it = _it("deepseek-r1", "tensorrt-llm", Parallelism(tp=8, ep=8), "fp8")
    mean, _, decode_only, spread = _mix(it, "tensorrt-llm", 4.0, 32.0, 8192.0)
    assert mean < 0.7 * spread
    assert decode_only < mean


def test_dense_prompt_compute_is_not_hidden_under_the_weight_read() -> None:
    # Llama-3.1-70B FP8 on one H200 reads 70 GB of weights per iteration whatever its tokens:
    # 32 spread prompt tokens ride almost free under that floor (+5%), while a whole 8k-token
    # prompt (one iteration in 256 here) costs its compute, about 1.1 s.
    it = _it("llama3.1-70b", "vllm", Parallelism(), "fp8")
    mean, carrying, decode_only, spread = _mix(it, "vllm", 4.0, 32.0, 8192.0)
    assert spread < 1.1 * decode_only
    assert carrying > 40.0 * decode_only
    assert mean > 1.1 * spread


def test_random_length_moe_tpot_matches_the_lockstep_decode() -> None:
    # The staggered steady state (random lengths) and the lockstep cohort simulation (fixed
    # lengths) decode the same 4 requests; before the mix the steady state's TPOT was 2.1x the
    # simulation's (26 vs 12 ms) because every iteration carried 32 prompt tokens' experts.
    kw = dict(
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="fp8",
        input_len=8192,
        output_len=1024,
        concurrency=4,
        tp=8,
        ep=8,
        num_requests=40,
    )
    fixed = infer("deepseek-r1", **kw).to_dict()["options"][0]["tpot_ms"]
    spread = infer("deepseek-r1", input_cv=0.064, output_cv=0.064, **kw).to_dict()
    assert spread["options"][0]["tpot_ms"] == pytest.approx(fixed, rel=0.15)
