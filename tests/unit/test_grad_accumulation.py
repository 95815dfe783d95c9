"""FSDP2's unsharded gradient accumulation under pipeline parallelism
(costmodel/grad_accumulation.py): bytes counted from the FSDP2 code, priced per micro-batch."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.communication import params_per_gpu
from gpuscale.costmodel.grad_accumulation import (
    accumulation_bytes_per_param,
    fsdp_accumulation_s,
)
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import Plan, PlanBatch, Training

TORCHTITAN = load_profile("torchtitan")
PP_PLAN = Plan(tp=8, pp=8, dp=8, micro_batch=1, global_batch=64, zero=3, recompute="full")


def without_accumulation(profile):
    return dataclasses.replace(
        profile, constants={**profile.constants, "fsdp_unsharded_grad_accumulation": 0.0}
    )


def run(plan: Plan, profile=TORCHTITAN):
    cluster = catalog.cluster("h100-sxm", plan.num_gpus, gpus_per_node=8, inter="ib-ndr400")
    training = Training(seq_len=8192, precision="bf16")
    return estimate_plan(catalog.model("llama3.1-405b"), cluster, training, plan, profile)


def test_bytes_per_parameter_are_the_cast_then_the_adds() -> None:
    # bf16 gradients, fp32 accumulator: cast 2 + 4 after the first micro-batch, then
    # 2 + 4 + 4 per later one; one micro-batch reduces directly.
    got = accumulation_bytes_per_param(np.array([1.0, 2.0, 8.0]), 2.0, 4.0)
    assert got.tolist() == [0.0, 6.0 + 10.0, 6.0 + 7 * 10.0]
    # Same dtype: autograd adds in place from the second micro-batch (read 2, write 1).
    same = accumulation_bytes_per_param(np.array([1.0, 8.0]), 2.0, 2.0)
    assert same.tolist() == [0.0, 7 * 3 * 2.0]


def test_seconds_per_microbatch_are_the_stage_gradients_over_hbm() -> None:
    model = catalog.model("llama3.1-405b")
    device = catalog.gpu("h100-sxm")
    plans = PlanBatch.from_plans([PP_PLAN])
    m = float(plans.num_microbatches[0])
    expected = (
        float(params_per_gpu(model, plans)[0])
        * (6.0 + (m - 1) * 10.0)
        / m
        / (device.hbm_bandwidth_gb_per_s * 1e9 * TORCHTITAN.hbm_efficiency)
    )
    got = fsdp_accumulation_s(model, device, Training(seq_len=8192), plans, TORCHTITAN)
    assert got[0] == pytest.approx(expected, rel=1e-12)


def test_only_pipelined_fsdp_with_several_microbatches_pays() -> None:
    model = catalog.model("llama3.1-405b")
    device = catalog.gpu("h100-sxm")
    others = [
        dataclasses.replace(PP_PLAN, pp=1, dp=64),  # no pipeline: FSDP reduces every backward
        dataclasses.replace(PP_PLAN, zero=1),  # not FSDP
        dataclasses.replace(PP_PLAN, micro_batch=8),  # one micro-batch per step
    ]
    plans = PlanBatch.from_plans([PP_PLAN, *others])
    got = fsdp_accumulation_s(model, device, Training(seq_len=8192), plans, TORCHTITAN)
    assert got[0] > 0 and got[1:].tolist() == [0.0, 0.0, 0.0]
    generic = fsdp_accumulation_s(
        model, device, Training(seq_len=8192), plans, load_profile("generic")
    )
    assert generic.tolist() == [0.0] * 4


def test_every_microbatch_slot_of_the_pipeline_pays_it() -> None:
    # The pass is part of each stage's micro-batch time, so the step grows by it over the
    # m micro-batches and over the bubble's slots alike: (m + bubble / t_mb) x the pass.
    on, off = run(PP_PLAN), run(PP_PLAN, without_accumulation(TORCHTITAN))
    plans = PlanBatch.from_plans([PP_PLAN])
    per_mb = fsdp_accumulation_s(
        catalog.model("llama3.1-405b"),
        catalog.gpu("h100-sxm"),
        Training(seq_len=8192),
        plans,
        TORCHTITAN,
    )[0]
    m = float(plans.num_microbatches[0])
    parts = off.parts(0)
    per_mb_parts = ("compute", "comm_tp", "comm_cp", "comm_ep", "comm_pp", "comm_zero")
    t_mb_off = sum(parts[k] for k in per_mb_parts) / m
    slots = m + parts["bubble"] / t_mb_off
    assert per_mb > 0
    assert on.parts(0)["compute"] - parts["compute"] == pytest.approx(m * per_mb, rel=1e-9)
    growth = float(on.step_time_s[0] - off.step_time_s[0])
    assert growth == pytest.approx(slots * per_mb, rel=1e-9)
    assert sum(on.parts(0).values()) == pytest.approx(float(on.step_time_s[0]), rel=1e-9)
