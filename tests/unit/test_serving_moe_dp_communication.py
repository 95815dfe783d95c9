"""MoE communication under attention DP per engine (``EngineProfile.moe_dp_communication``):
TensorRT-LLM's CUTLASS MoE gathers and scatters the group's BF16 hidden states unless the
NVLink domain spans nodes; the other engines keep the all-to-all of top-k copies."""

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


def _it(name: str, gpu: str = "h200-sxm", attention_dp: int = 8) -> IterationModel:
    eng = engine(name)
    return _iteration_model(
        catalog.model("deepseek-r1"),
        catalog.cluster(gpu, 8),
        Parallelism(tp=8, ep=8, attention_dp=attention_dp),
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
    assert engine("tensorrt-llm").moe_dp_communication == "gather_scatter"
    assert engine("vllm").moe_dp_communication == "all_to_all"
    assert engine("sglang").moe_dp_communication == "all_to_all"


def test_trtllm_on_hopper_gathers_the_whole_group_in_bf16() -> None:
    it = _it("tensorrt-llm")
    assert not it.moe_all_to_all()
    a2a = dataclasses.replace(it, moe_gather_scatter=False)
    moe_layers = it.model.num_layers - it.model.dense_layers
    diff = it._communication(TOKENS, moe_layers) - a2a._communication(TOKENS, moe_layers)
    want = moe_layers * (_moe(it, TOKENS, True) - _moe(it, TOKENS, False))
    assert diff == pytest.approx(want)


def test_nvl72_keeps_the_all_to_all() -> None:
    """MNNVL racks take CutlassFusedMoE's all-to-all (select_alltoall_method_type)."""
    it = _it("tensorrt-llm", gpu="gb200")
    assert it.moe_gather_scatter and it.moe_all_to_all()
    plain = dataclasses.replace(it, moe_gather_scatter=False)
    assert it._communication(TOKENS, 58) == pytest.approx(plain._communication(TOKENS, 58))


@pytest.mark.parametrize("name", ["vllm", "sglang"])
def test_other_engines_unchanged(name: str) -> None:
    it = _it(name)
    assert it.moe_all_to_all()


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
