"""Hopper-specific terms of the training step: persistent matmuls slowed by overlapped
data-parallel collectives, and the copies of a padding-free (unpad/varlen/pad) attention path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.communication import PERSISTENT_GEMM_GENERATIONS
from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import Plan, PlanBatch, Training
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import load_all, to_case

GENERIC = load_profile("generic")
FSDP = Plan(dp=32, zero=3, micro_batch=2, global_batch=64)


def _with(profile: Profile, **constants: float) -> Profile:
    return dataclasses.replace(profile, constants={**profile.constants, **constants})


def _zero_comm_s(gpu: str, profile: Profile) -> float:
    cluster = catalog.cluster(gpu, FSDP.num_gpus, gpus_per_node=8, inter="ib-ndr400")
    est = estimate_plan(
        catalog.model("llama3.1-8b"), cluster, Training(seq_len=2048), FSDP, profile
    )
    return float(est.comm_zero_s[0])


def test_only_hopper_runs_persistent_matmuls() -> None:
    assert {"hopper"} == PERSISTENT_GEMM_GENERATIONS
    assert catalog.gpu("h100-sxm").generation in PERSISTENT_GEMM_GENERATIONS
    assert catalog.gpu("a100-sxm-80gb").generation not in PERSISTENT_GEMM_GENERATIONS


def test_overlapped_fsdp_collectives_cost_hopper_more_than_the_base_interference() -> None:
    # Without the persistent-matmul term (loss = the base interference) Hopper pays what any
    # GPU pays; with it, the matmuls beside the gathers and reduce-scatters lose half their
    # progress (pytorch/pytorch#143988), so more of the collective time shows in the step.
    base = _with(GENERIC, persistent_gemm_overlap_loss=GENERIC.const("comm_compute_interference"))
    with_term = _zero_comm_s("h100-sxm", GENERIC)
    without = _zero_comm_s("h100-sxm", base)
    assert with_term > 1.2 * without
    # Ampere's matmuls are not persistent: the term does not touch them.
    assert _zero_comm_s("a100-sxm-80gb", GENERIC) == pytest.approx(
        _zero_comm_s("a100-sxm-80gb", base), rel=1e-12
    )


def test_persistent_loss_is_weighted_by_the_matmul_share_of_the_layer() -> None:
    # A collective fully hidden behind compute costs interference x its time; the interference
    # is loss on the matmul share g and the base on the rest: raising the loss by d adds
    # d x g x (hidden collective time), so the added time is linear in the loss.
    p0 = _with(GENERIC, persistent_gemm_overlap_loss=0.3)
    p1 = _with(GENERIC, persistent_gemm_overlap_loss=0.4)
    p2 = _with(GENERIC, persistent_gemm_overlap_loss=0.5)
    t0, t1, t2 = (_zero_comm_s("h100-sxm", p) for p in (p0, p1, p2))
    assert t1 - t0 > 0
    assert t2 - t1 == pytest.approx(t1 - t0, rel=1e-9)


def test_unpad_passes_add_hidden_width_traffic_and_kernels() -> None:
    model = catalog.model("llama3.1-8b")
    device = catalog.gpu("h100-sxm")
    training = Training(seq_len=2048)
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=4, global_batch=32)])
    passes, kernels = 6.0, 9.0
    base = layer_compute(model, device, training, plans, GENERIC)
    more = layer_compute(
        model,
        device,
        training,
        plans,
        _with(GENERIC, attention_unpad_hidden_passes=passes, attention_unpad_kernels=kernels),
    )
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * GENERIC.hbm_efficiency
    tokens = 4 * 2048
    expected = 2.0 * tokens * passes * model.hidden_size / hbm + kernels * (
        GENERIC.const("kernel_launch_us") * 1e-6
    )
    extra = more.layer_forward_s - base.layer_forward_s
    np.testing.assert_allclose(extra, expected, rtol=1e-9)
    # The backward pays the elementwise traffic twice (the profile's passes are forward-equivalent).
    np.testing.assert_allclose(
        more.layer_backward_s - base.layer_backward_s, 2.0 * expected, rtol=1e-9
    )


def test_llm_foundry_flash_rows_carry_the_unpad_copies() -> None:
    rows = {r["id"]: r for r in load_all(DATA_DIR)}
    flash = to_case(rows["llmfoundry-h100-80gb-1b-128gpu-ls"])
    assert flash.framework == "llm-foundry-flash"
    profile = load_profile(flash.framework)
    # The counted passes and kernels of the unpad/varlen/pad path (llm-foundry-flash.yaml).
    assert profile.const("attention_unpad_hidden_passes") == 22.0 / 3.0
    assert profile.const("attention_unpad_kernels") == 34.0 / 3.0
    # The Triton rows (attn_impl 'triton') gather nothing.
    triton = to_case(rows["llmfoundry-h100-80gb-13b-128gpu-ls"])
    assert triton.framework == "llm-foundry"
    assert load_profile(triton.framework).const("attention_unpad_hidden_passes") == 0.0


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-sxm-80gb"])
def test_advise_comm_default_row_is_the_step(gpu: str) -> None:
    # advise-comm prices the default hook with the step's own interference rule, so its default
    # row reproduces the step on Hopper (persistent matmuls) as on Ampere.
    from gpuscale.costmodel.grad_sync import HookOptions
    from gpuscale.planner.comm_hooks import advise_hooks

    cluster = catalog.cluster(gpu, 16, gpus_per_node=8, inter="roce-100")
    plan = Plan(dp=16, micro_batch=1, global_batch=16)
    training = Training(seq_len=2048)
    model = catalog.model("llama3.1-8b")
    advice = advise_hooks(model, cluster, training, plan, GENERIC, HookOptions(), min_gain=0.02)
    est = estimate_plan(model, cluster, training, plan, GENERIC)
    assert advice.rows["default"].step_s == pytest.approx(float(est.step_time_s[0]), rel=1e-9)
    assert advice.rows["default"].exposed_s == pytest.approx(float(est.comm_dp_s[0]), rel=1e-9)
