"""A model whose first blocks are dense (DeepSeek-V3: 3 of 61) splits only its MoE blocks'
experts over expert parallelism. The mean block's expert part is the MoE blocks' share of all
experts (``params.expert_layer_params``); before, the whole expert set was taken out of every
block's mean and the dense remainder went negative, so DeepSeek-V3 on 1,024 H100s at EP 256
fitted in 1.0 GiB per GPU."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.memory import training_memory
from gpuscale.costmodel.params import expert_layer_params, layer_params, mlp_params
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner.enumerate import enumerate_plans
from gpuscale.specs import Plan, PlanBatch, Training

DS = catalog.model("deepseek-v3")


def test_expert_part_of_the_mean_block() -> None:
    moe_blocks = DS.num_layers - DS.dense_layers
    assert DS.num_layers * expert_layer_params(DS) == pytest.approx(
        moe_blocks * DS.num_experts * mlp_params(DS), rel=1e-9
    )
    assert layer_params(DS) - expert_layer_params(DS) > 0
    no_dense = dataclasses.replace(DS, dense_layers=0)
    assert expert_layer_params(no_dense) == DS.num_experts * mlp_params(DS)
    assert expert_layer_params(catalog.model("llama3.1-8b")) == 0


def test_weights_per_gpu_fall_with_ep_and_stay_above_the_dense_part() -> None:
    profile = load_profile("megatron")
    plans = [
        Plan(tp=1, pp=1, dp=1024, ep=ep, micro_batch=1, global_batch=1024)
        for ep in (8, 64, 128, 256)
    ]
    mem = training_memory(DS, Training(seq_len=4096), PlanBatch.from_plans(plans), profile=profile)
    weights = np.asarray(mem.weights)
    assert np.all(weights > 0)
    assert np.all(np.diff(weights) < 0)
    # At EP 256 each GPU still holds every non-expert weight of the 61 blocks in 16 bits.
    dense_total = DS.num_layers * (layer_params(DS) - expert_layer_params(DS))
    assert weights[-1] > 2.0 * dense_total


def test_search_offers_folded_expert_splits_for_moe_models_only() -> None:
    moe = enumerate_plans(DS, 256, global_batch=1024, seq_len=4096)
    folded = moe.etp != moe.tp
    assert folded.any()
    assert np.all(moe.etp[folded] == 1) and np.all(moe.tp[folded] > 1)
    # Folding lets EP exceed dp x cp: plans the unfolded rule refused.
    assert np.any(moe.ep[folded] > moe.dp[folded] * moe.cp[folded])
    dense = enumerate_plans(catalog.model("llama3.1-70b"), 64, global_batch=256, seq_len=4096)
    assert np.all(dense.etp == dense.tp)
