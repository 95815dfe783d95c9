"""Synchronous kernel launches (CUDA_LAUNCH_BLOCKING=1): the host's per-layer work adds to every
micro-batch of the slowest pipeline stage (costmodel/step.py, profile deepspeed.yaml)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import blocking_host_s_per_layer, estimate_plan
from gpuscale.specs import Plan, Training
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import cases, load_rows, with_overrides

DEEPSPEED = load_profile("deepspeed")


def blocking(profile: Profile, on: float = 1.0) -> Profile:
    return dataclasses.replace(profile, constants={**profile.constants, "cuda_launch_blocking": on})


def step(plan: Plan, profile: Profile):
    model = catalog.model("llama2-7b")
    cluster = catalog.cluster("a100-sxm-80gb", plan.num_gpus)
    return estimate_plan(model, cluster, Training(seq_len=2048), plan, profile)


def test_off_by_default_everywhere() -> None:
    for name in ("generic", "deepspeed", "megatron", "torchtitan"):
        assert blocking_host_s_per_layer(load_profile(name)) == 0.0


def test_hand_computed_cost_on_one_stage() -> None:
    # 32 layers on one stage, 8 micro-batches: 8 x 32 x 3.68 ms = 0.942 s more, all in "other".
    plan = Plan(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    off, on = step(plan, DEEPSPEED), step(plan, blocking(DEEPSPEED))
    assert blocking_host_s_per_layer(blocking(DEEPSPEED)) == pytest.approx(3.68e-3)
    extra = 8 * 32 * 3.68e-3
    assert float(on.step_time_s[0] - off.step_time_s[0]) == pytest.approx(extra, rel=1e-9)
    assert float(on.other_s[0] - off.other_s[0]) == pytest.approx(extra, rel=1e-9)
    assert sum(on.parts(0).values()) == pytest.approx(float(on.step_time_s[0]))


def test_pipeline_cost_counts_the_slowest_stage_and_the_bubble() -> None:
    # pp=4: 8 layers per stage, 16 micro-batches; the bubble pays it as well, (p-1) passes of
    # the slowest stage less the LM head it alone runs: between 2 and 3 stage passes.
    plan = Plan(tp=1, pp=4, dp=2, micro_batch=1, global_batch=32)
    off, on = step(plan, DEEPSPEED), step(plan, blocking(DEEPSPEED))
    host_mb = 8 * 3.68e-3
    assert float(on.other_s[0] - off.other_s[0]) == pytest.approx(16 * host_mb, rel=1e-9)
    assert 2 * host_mb < float(on.bubble_s[0] - off.bubble_s[0]) < 3 * host_mb
    assert sum(on.parts(0).values()) == pytest.approx(float(on.step_time_s[0]))


@settings(max_examples=25, deadline=None)
@given(mbs=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 4, 8]))
def test_cost_grows_as_micro_batches_shrink(mbs: int, tp: int) -> None:
    """Host work is per layer and micro-batch, not per token: at a fixed global batch, halving
    the micro-batch doubles the added time (less the bubble's share, at most one stage pass)."""
    big = Plan(tp=tp, pp=2, dp=64 // (2 * tp), micro_batch=2 * mbs, global_batch=512)
    small = dataclasses.replace(big, micro_batch=mbs)
    added = [
        float(step(p, blocking(DEEPSPEED)).step_time_s[0] - step(p, DEEPSPEED).step_time_s[0])
        for p in (small, big)
    ]
    assert added[0] > added[1] > 0
    assert 1.5 < added[0] / added[1] <= 2.0


def test_the_sweep_rows_that_state_it_get_it() -> None:
    mapped, _ = cases(load_rows(DATA_DIR / "layout_sweeps.csv"))
    flags = np.array(
        [c.overrides.get("constants", {}).get("cuda_launch_blocking", 0.0) for c in mapped]
    )
    assert (flags == 1.0).all()  # every BigScience trial ran with the hang workaround


def test_fp16_deepspeed_rows_reduce_16_bit_gradients() -> None:
    """The fp16 trials (02-21, 02-25) reduce DeepSpeed's fp16 gradients; the BF16-optimizer
    trials (02-28) keep fp32 gradients (the generic 4 bytes)."""
    mapped, _ = cases(load_rows(DATA_DIR / "layout_sweeps.csv"))
    for c in mapped:
        reduce_bytes = c.overrides.get("constants", {}).get("grad_reduce_bytes")
        assert reduce_bytes == (None if "-0228-" in c.id else 2.0), c.id
    fp16 = next(c for c in mapped if "-0225-" in c.id)
    profile = with_overrides(load_profile(fp16.framework), fp16.overrides)
    as_fp32 = with_overrides(
        load_profile(fp16.framework), {"constants": {"grad_reduce_bytes": 4.0}}
    )
    half = estimate_plan(fp16.model, fp16.cluster, fp16.training, fp16.plan, profile)
    full = estimate_plan(fp16.model, fp16.cluster, fp16.training, fp16.plan, as_fp32)
    assert float(half.gradient_bytes_per_gpu[0]) == pytest.approx(
        float(full.gradient_bytes_per_gpu[0]) / 2
    )
    assert float(half.comm_dp_s[0]) < float(full.comm_dp_s[0])
