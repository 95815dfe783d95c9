"""MoE communication under attention DP per engine (``EngineProfile.moe_dp_communication``):
TensorRT-LLM's CUTLASS MoE gathers and scatters the group's BF16 hidden states unless the
NVLink domain spans nodes; vLLM 0.12's default backend and SGLang 0.5.8's DP attention
(``moe_a2a_backend`` none) gather and scatter everywhere; SGLang's prompt-carrying (extend)
iterations gather with an all-reduce of the summed rows instead (``SUM_LEN``)."""

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


def test_sglang_prefill_iterations_all_reduce_the_summed_rows() -> None:
    """SGLang's extend batches (SUM_LEN): an all-reduce of the group's summed rows before the
    MoE and one of its output after, over the TP group, per MoE layer; decode-only iterations
    keep the all-gather and reduce-scatter (MAX_LEN)."""
    it = _it("sglang", tp=8, ep=1, attention_dp=8)
    assert it.moe_prefill_gather_all_reduce and not it.moe_all_to_all()
    levels = LevelBandwidth.of(it.cluster, it.profile)
    h = float(it.model.hidden_size)
    ar = collective_time_s("all_reduce", TOKENS * 8 * h * 2.0, 8, 8, levels)
    moe_layers = it.model.num_layers - it.model.dense_layers
    prefill = it._communication(TOKENS, moe_layers, TOKENS)
    assert prefill == pytest.approx(moe_layers * 2.0 * ar)
    decode = it._communication(TOKENS, moe_layers, np.zeros_like(TOKENS))
    assert decode == pytest.approx(moe_layers * _moe(it, TOKENS, True))
    # About twice the bytes of the gather and scatter (an all-reduce is a reduce-scatter and
    # an all-gather, nccl-tests' bus-bandwidth convention), where the bytes, not the
    # latencies, set the time (a prompt's rows).
    assert prefill[-1] == pytest.approx(2.0 * decode[-1], rel=0.05)
    # The other engines' prefill iterations gather as their decodes do.
    for name in ("tensorrt-llm", "vllm"):
        other = _it(name, tp=8, ep=1, attention_dp=8)
        assert not other.moe_prefill_gather_all_reduce
        assert other._communication(TOKENS, moe_layers, TOKENS) == pytest.approx(
            other._communication(TOKENS, moe_layers, np.zeros_like(TOKENS))
        )


def test_sglang_prefill_rule_reaches_the_iteration_time() -> None:
    """The rule is in the iteration a prompt-carrying batch is priced with: the same prompt
    tokens cost more with it than priced as a decode batch's gather."""
    it = _it("sglang", tp=8, ep=1, attention_dp=8)
    off = dataclasses.replace(it, moe_prefill_gather_all_reduce=False)
    z = np.zeros(1)
    tokens, context = np.array([7372.0]), np.array([3686.0])
    on_t = it.parts_s(z, z, tokens, context)
    off_t = off.parts_s(z, z, tokens, context)
    assert float(on_t["communication"][0]) > 1.8 * float(off_t["communication"][0])
    assert float(on_t["total"][0]) > float(off_t["total"][0])
    decode_on = it.parts_s(np.array([64.0]), np.array([2000.0]), z, z)
    decode_off = off.parts_s(np.array([64.0]), np.array([2000.0]), z, z)
    assert float(decode_on["total"][0]) == pytest.approx(float(decode_off["total"][0]))


def test_sglang_prefill_gather_takes_in_the_attention_tp_reduction() -> None:
    """TP8 with attention DP 4 (two attention-TP ranks per DP group): the prompt-carrying
    iteration's gather all-reduce runs over all eight ranks and sums the attention-TP partial
    outputs too (dp_gather_partial), so the MoE layers pay no attention all-reduce of their own;
    the dense layers keep theirs."""
    it = _it("sglang", tp=8, ep=1, attention_dp=4)
    assert it.par.attention_tp == 2
    levels = LevelBandwidth.of(it.cluster, it.profile)
    h = float(it.model.hidden_size)
    summed = collective_time_s("all_reduce", TOKENS * 4 * h * 2.0, 8, 8, levels)
    attn = collective_time_s("all_reduce", TOKENS * h * 2.0, 2, 2, levels)
    m = it.model
    moe_layers = m.num_layers - m.dense_layers
    # Every layer's attention all-reduce and the dense MLPs' (the MoE layers' folded in).
    want = (m.num_layers + m.dense_layers) * attn + moe_layers * (2.0 * summed - attn)
    assert it._communication(TOKENS, moe_layers, TOKENS) == pytest.approx(want)
