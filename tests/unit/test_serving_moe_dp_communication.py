"""MoE communication under attention DP per engine (``EngineProfile.moe_dp_communication``):
TensorRT-LLM's CUTLASS MoE gathers and scatters the group's BF16 hidden states unless the
NVLink domain spans nodes; vLLM 0.12's default backend and SGLang 0.5.8's DP attention
(``moe_a2a_backend`` none) gather and scatter everywhere."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model

TOKENS = np.array([1.0, 64.0, 922.0 * 8])


def _it(
    name: str, gpu: str = "h200-sxm", attention_dp: int = 8, tp: int = 8, ep: int = 8
) -> IterationModel:
    eng = engine(name)
    return _iteration_model(
        catalog.model("deepseek-r1"),
        catalog.cluster(gpu, 8),
        Parallelism(tp=tp, ep=ep, attention_dp=attention_dp),
        weight_format("fp8"),
        "fp8",
        load_profile(eng.cost_profile),
        eng,
    )


def _moe(it: IterationModel, tokens: np.ndarray, gathered: bool) -> np.ndarray:
    levels = LevelBandwidth.of(it.cluster, it.profile)
    h = float(it.model.hidden_size)
    if gathered:
        buffer = tokens * 8 * h * 2.0
        return collective_time_s("all_gather", buffer, 8, 8, levels) + collective_time_s(
            "reduce_scatter", buffer, 8, 8, levels
        )
    return collective_time_s("all_to_all", tokens * 8 * h * 3.0, 8, 8, levels)


def test_profiles_name_the_communication() -> None:
    assert engine("tensorrt-llm").moe_dp_communication == "gather_scatter_without_mnnvl"
    assert engine("vllm").moe_dp_communication == "gather_scatter"
    assert engine("sglang").moe_dp_communication == "gather_scatter"


def test_trtllm_on_hopper_gathers_the_whole_group_in_bf16() -> None:
    it = _it("tensorrt-llm")
    assert not it.moe_all_to_all()
    a2a = dataclasses.replace(it, moe_gather_scatter=False)
    moe_layers = it.model.num_layers - it.model.dense_layers
    diff = it._communication(TOKENS, moe_layers) - a2a._communication(TOKENS, moe_layers)
    want = moe_layers * (_moe(it, TOKENS, True) - _moe(it, TOKENS, False))
    assert diff == pytest.approx(want)


def test_nvl72_keeps_the_all_to_all() -> None:
    """MNNVL racks take CutlassFusedMoE's all-to-all (select_alltoall_method_type); vLLM's
    default backend has no such switch."""
    it = _it("tensorrt-llm", gpu="gb200")
    assert it.moe_gather_scatter and it.moe_all_to_all()
    plain = dataclasses.replace(it, moe_gather_scatter=False)
    assert it._communication(TOKENS, 58) == pytest.approx(plain._communication(TOKENS, 58))
    assert not _it("vllm", gpu="gb200").moe_all_to_all()


def test_sglang_decode_gathers_like_trtllm_on_hopper() -> None:
    """TP8 with DP attention 8: SGLang's MAX_LEN gather and reduce-scatter price as
    TensorRT-LLM's gather on an HGX node."""
    sgl, trt = _it("sglang"), _it("tensorrt-llm")
    assert not sgl.moe_all_to_all()
    plain_s = dataclasses.replace(sgl, moe_gather_scatter=False)
    plain_t = dataclasses.replace(trt, moe_gather_scatter=False)
    got = sgl._communication(TOKENS, 58) - plain_s._communication(TOKENS, 58)
    want = trt._communication(TOKENS, 58) - plain_t._communication(TOKENS, 58)
    assert got == pytest.approx(want)


def test_vllm_gathers_over_the_dp_group_and_reduces_over_its_tp_ranks() -> None:
    """TP2 x DP2 with the experts over all four GPUs (no expert parallelism, the vLLM rows'
    launch): all-gather and reduce-scatter of the two DP ranks' BF16 hidden states, then the
    all-reduce over the two attention-TP ranks, per MoE layer."""
    it = _it("vllm", tp=4, ep=1, attention_dp=2)
    assert not it.moe_all_to_all()
    levels = LevelBandwidth.of(it.cluster, it.profile)
    h = float(it.model.hidden_size)
    buffer = TOKENS * 2 * h * 2.0
    moe = collective_time_s("all_gather", buffer, 2, 2, levels) + collective_time_s(
        "reduce_scatter", buffer, 2, 2, levels
    )
    ar = collective_time_s("all_reduce", TOKENS * h * 2.0, 2, 2, levels)
    moe_layers = it.model.num_layers - it.model.dense_layers
    dense = it.model.num_layers - moe_layers
    want = (it.model.num_layers + dense) * ar + moe_layers * (moe + ar)
    assert it._communication(TOKENS, moe_layers) == pytest.approx(want)


def test_without_attention_dp_nothing_changes() -> None:
    """TP attention: the MoE output is all-reduced as before; the gather is an attention-DP
    path only."""
    it = _it("tensorrt-llm", attention_dp=1)
    plain = dataclasses.replace(it, moe_gather_scatter=False)
    assert it._communication(TOKENS, 58) == pytest.approx(plain._communication(TOKENS, 58))


def test_the_gather_grows_with_the_whole_group() -> None:
    """Every rank receives every rank's tokens: eight ranks' buffers, whatever top-k is."""
    it = _it("tensorrt-llm")
    one = it._communication(np.array([1000.0]), 58)
    two = it._communication(np.array([2000.0]), 58)
    assert float(two[0]) > float(one[0])
