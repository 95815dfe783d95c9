"""MoE parallel folding (``etp``, Megatron-Core ``expert_tensor_parallel_size``): experts split
``etp`` ways and spread ``ep`` ways over a pipeline stage's ``tp*dp*cp`` ranks. Left out, it is
``tp`` and every figure is what it was; folded, the work per rank is the same, the expert
weights per rank grow ``tp/etp``-fold, and the plan runs where ``ep`` does not divide
``dp*cp``."""

from __future__ import annotations

import numpy as np
import pytest

import gpuscale
from gpuscale import catalog
from gpuscale.costmodel.communication import expert_params_per_gpu
from gpuscale.costmodel.flops import layer_gemms
from gpuscale.errors import InputError
from gpuscale.specs import Plan, PlanBatch
from gpuscale.specs.plan import expert_replicas
from gpuscale.specs.validity import check_experts, valid_mask

QWEN = catalog.model("qwen3-235b-a22b")
FOLDED = {"tp": 2, "pp": 8, "dp": 16, "ep": 32, "micro_batch": 1, "global_batch": 2048}


def test_left_out_it_follows_tp() -> None:
    assert Plan(tp=4, dp=2, global_batch=2).etp == 4
    assert Plan(tp=4, dp=2, ep=2, etp=1, global_batch=2).etp == 1
    batch = PlanBatch.from_arrays(tp=np.array([1, 2, 8]), dp=np.array([8, 4, 1]))
    assert batch.etp.tolist() == [1, 2, 8]
    with pytest.raises(InputError, match="--etp must be a positive integer"):
        Plan(tp=2, etp=-1)


def test_folding_lets_ep_span_the_tensor_parallel_ranks() -> None:
    unfolded = Plan(**FOLDED)
    folded = Plan(**FOLDED, etp=1)
    with pytest.raises(InputError, match=r"--ep 32 must divide dp x cp = 16, or fold .* --etp 1"):
        check_experts(QWEN, unfolded)
    check_experts(QWEN, folded)
    mask = valid_mask(QWEN, PlanBatch.from_plans([unfolded, folded]), 4096)
    assert mask.tolist() == [False, True]
    with pytest.raises(InputError, match=r"--ep 32 x --etp 2 = 64 must divide"):
        check_experts(QWEN, Plan(**{**FOLDED, "tp": 4, "dp": 8}, etp=2))
    with pytest.raises(InputError, match="--etp 5 must divide the expert MLP width 1536"):
        check_experts(QWEN, Plan(tp=1, dp=8, ep=8, etp=5, global_batch=8))
    with pytest.raises(InputError, match=r"llama3\.1-8b is dense"):
        check_experts(catalog.model("llama3.1-8b"), Plan(tp=2, dp=4, etp=1, global_batch=4))


def test_work_per_rank_is_the_same_and_the_shapes_follow_etp() -> None:
    T = 4096.0
    by_etp = {}
    for etp in (2, 1):
        gemms = {g.name: g for g in layer_gemms(QWEN, T, 2, 32, etp)}
        by_etp[etp] = gemms
        assert float(np.ravel(gemms["mlp_up"].n)[0]) == 2 * QWEN.ffn_hidden_size / etp
    total = {
        etp: sum(float(np.ravel(g.total_flops)[0]) for n, g in gs.items() if n.startswith("mlp"))
        for etp, gs in by_etp.items()
    }
    assert total[1] == pytest.approx(total[2])
    # Unfolded rows per local expert: T*k*ep/E; folded: half as many ranks gather each expert.
    rows = {etp: float(np.ravel(gs["mlp_up"].tokens)[0]) for etp, gs in by_etp.items()}
    assert rows[2] == pytest.approx(T * QWEN.experts_per_token * 32 / QWEN.num_experts)
    assert rows[1] == pytest.approx(rows[2] / 2)


def test_expert_weights_and_replicas() -> None:
    batch = PlanBatch.from_plans([Plan(**FOLDED, etp=1), Plan(**{**FOLDED, "ep": 16})])
    folded_w, unfolded_w = expert_params_per_gpu(QWEN, batch)
    # etp 1 x ep 32 against etp 2 x ep 16: the same 32-way split of the experts.
    assert folded_w == pytest.approx(unfolded_w)
    assert expert_replicas(batch).tolist() == [1, 1]
    wide = PlanBatch.from_plans([Plan(tp=2, dp=16, ep=8, etp=1, global_batch=32)])
    assert expert_replicas(wide).tolist() == [4]


def test_estimate_unchanged_when_left_out_and_folded_plan_priced() -> None:
    base = {"gpu": "h100-sxm", "gpus": 64, "tp": 2, "ep": 8, "gbs": 256, "seq": 4096}
    left_out = gpuscale.estimate("qwen3-30b-a3b", **base)
    explicit = gpuscale.estimate("qwen3-30b-a3b", **base, etp=2)
    assert left_out.tokens_per_s_per_gpu == explicit.tokens_per_s_per_gpu
    assert left_out.memory_per_gpu_gib == explicit.memory_per_gpu_gib
    folded = gpuscale.estimate("qwen3-30b-a3b", **{**base, "ep": 64}, etp=1)
    assert folded.plan.etp == 1 and folded.tokens_per_s_per_gpu > 0
    with pytest.raises(InputError, match="fold over the tensor-parallel ranks"):
        gpuscale.estimate("qwen3-30b-a3b", **{**base, "ep": 64})
