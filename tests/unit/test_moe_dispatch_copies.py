"""MoE dispatch copies in the training step (costmodel/compute.py): the gathered copies of each
token in expert order and their weighted scatter back, forward and backward, as hidden-width
passes counted from Megatron-Core's all-to-all dispatcher. Their time is exactly the profile's
passes at the HBM rate; the local re-sort only runs when a rank holds several experts; dense
models carry none."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import Plan, PlanBatch, Training

NO_DISPATCH = {
    "moe_dispatch_token_passes": 0.0,
    "moe_dispatch_slot_passes": 0.0,
    "moe_sort_slot_passes": 0.0,
}


def _layer(model_id: str, ep: int, profile_name: str, constants=None) -> tuple[float, float]:
    m = catalog.model(model_id)
    profile = load_profile(profile_name)
    if constants:
        profile = dataclasses.replace(profile, constants={**profile.constants, **constants})
    plan = Plan(
        tp=1,
        pp=1,
        dp=max(ep, 8),
        cp=1,
        vp=1,
        ep=ep,
        micro_batch=2,
        global_batch=512,
        recompute="none",
        zero=1,
        sequence_parallel=False,
    )
    lc = layer_compute(
        m,
        catalog.gpu("gb200"),
        Training(seq_len=4096, precision="bf16"),
        PlanBatch.from_plans([plan]),
        profile,
    )
    return float(np.ravel(lc.layer_forward_s)[0]), float(np.ravel(lc.layer_backward_s)[0])


def _expected(model_id: str, passes_per_slot: float, profile_name: str) -> float:
    m = catalog.model(model_id)
    profile = load_profile(profile_name)
    hbm = catalog.gpu("gb200").hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    share = (m.num_layers - m.dense_layers) / m.num_layers
    passes = profile.const("moe_dispatch_token_passes") + m.experts_per_token * passes_per_slot
    return share * 2.0 * 8192 * passes * m.hidden_size / hbm


@pytest.mark.parametrize("model_id", ["qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b"])
def test_copies_cost_their_passes_forward_and_backward(model_id: str) -> None:
    fwd, bwd = _layer(model_id, 8, "megatron")
    fwd0, bwd0 = _layer(model_id, 8, "megatron", NO_DISPATCH)
    # Megatron: permute + unpermute (2 per copy) and the local re-sort and its inverse (4 more).
    expected = _expected(model_id, 2.0 + 4.0, "megatron")
    assert fwd - fwd0 == pytest.approx(expected, rel=1e-9)
    assert bwd - bwd0 == pytest.approx(expected, rel=1e-9)


def test_no_resort_with_one_expert_per_rank_or_in_the_generic_stack() -> None:
    m = catalog.model("gpt-oss-120b")
    fwd, _ = _layer("gpt-oss-120b", m.num_experts, "megatron")
    fwd0, _ = _layer("gpt-oss-120b", m.num_experts, "megatron", NO_DISPATCH)
    assert fwd - fwd0 == pytest.approx(_expected("gpt-oss-120b", 2.0, "megatron"), rel=1e-9)
    fwd, _ = _layer("qwen3-30b-a3b", 8, "generic")
    fwd0, _ = _layer("qwen3-30b-a3b", 8, "generic", NO_DISPATCH)
    assert fwd - fwd0 == pytest.approx(_expected("qwen3-30b-a3b", 2.0, "generic"), rel=1e-9)


def test_dense_models_carry_no_dispatch() -> None:
    assert _layer("llama3.1-8b", 1, "megatron") == _layer("llama3.1-8b", 1, "megatron", NO_DISPATCH)
