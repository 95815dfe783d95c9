"""Uneven pipeline stages: Megatron-Core's first/last stage layer counts and embedding/loss
accounting, the slowest stage setting the pace, and the layout rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.errors import InputError
from gpuscale.specs import Plan, PlanBatch, Training
from gpuscale.specs.validity import check_pipeline, pipeline_layers_ok

L405 = 126
M405 = catalog.model("llama3.1-405b")


def _layout_error(plan: Plan) -> str | None:
    """Why Llama 3.1 405B cannot split over ``plan``'s pipeline (the one rule set), or None."""
    try:
        check_pipeline(M405, plan)
    except InputError as error:
        return str(error)
    return None


def _plan(**kw: int | bool) -> Plan:
    base: dict = dict(tp=8, pp=8, dp=2, micro_batch=1, global_batch=64)
    base.update(kw)
    return Plan(**base)


def test_megatron_bridge_405b_pp8_vp8_is_accepted_with_lighter_ends() -> None:
    plan = _plan(vp=8)
    assert _layout_error(plan) is None
    split = stage_layers(M405, PlanBatch.from_plans([plan]))
    # 126 + embedding + loss = 128 units: 16 per rank, one fewer on each end.
    assert (split.first[0], split.middle[0], split.last[0]) == (15, 16, 15)
    assert split.first[0] + split.last[0] + 6 * split.middle[0] == L405


def test_explicit_accounting_resolves_to_the_same_counts() -> None:
    plan = _plan(vp=8, embedding_in_split=True, loss_in_split=True)
    assert _layout_error(plan) is None
    split = stage_layers(M405, PlanBatch.from_plans([plan]))
    assert (split.first[0], split.middle[0], split.last[0]) == (15, 16, 15)
    assert _layout_error(_plan(vp=8, loss_in_split=True)) is not None  # 127 units


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        (dict(vp=7), "must divide the 126 layers"),
        (dict(first_stage_layers=14, last_stage_layers=14), "do not split evenly"),
        (dict(first_stage_layers=15, last_stage_layers=15, vp=2), "multiples of 2"),
        (dict(first_stage_layers=120, last_stage_layers=10), "leave -4"),
    ],
)
def test_bad_layouts_say_what_is_wrong(kw: dict, fragment: str) -> None:
    message = _layout_error(_plan(**kw))
    assert message is not None and fragment in message


def test_split_flags_need_a_pipeline_and_exclude_each_other() -> None:
    with pytest.raises(InputError, match="need --pp > 1"):
        Plan(first_stage_layers=3)
    with pytest.raises(InputError, match="not both"):
        _plan(first_stage_layers=15, embedding_in_split=True)


@given(
    layers=st.integers(2, 160),
    pp=st.integers(2, 16),
    vp=st.integers(1, 8),
    first=st.integers(0, 40),
    last=st.integers(0, 40),
)
def test_accepted_layouts_place_every_layer_once(
    layers: int, pp: int, vp: int, first: int, last: int
) -> None:
    plan = Plan(pp=pp, vp=vp, first_stage_layers=first, last_stage_layers=last)
    if not pipeline_layers_ok(layers, pp, vp, first, last):
        return
    model = catalog.model("llama3.1-8b")
    model = type(model)(**{**{f: getattr(model, f) for f in model.__slots__}, "num_layers": layers})
    split = stage_layers(model, PlanBatch.from_plans([plan]))
    total = split.first[0] + split.last[0] + (pp - 2) * split.middle[0]
    assert min(split.first[0], split.last[0]) >= 1
    if first or last or layers % (pp * vp) == 0 or vp > 1:
        assert total == layers
    else:  # automatic split without interleaving: the heaviest rank holds ceil(L/pp)
        assert split.heaviest[0] == -(-layers // pp)


def _step(plan: Plan, model: str = "llama3.1-70b") -> float:
    spec = catalog.model(model)
    cluster = catalog.cluster("h100-sxm", plan.num_gpus, inter="ib-ndr400")
    est = estimate_plan(spec, cluster, Training(seq_len=4096), plan, load_profile("megatron"))
    return float(est.step_time_s[0])


def test_a_heavier_stage_sets_the_pace() -> None:
    even = _step(_plan(pp=8, global_batch=64))  # 80 layers: 10 a rank
    heavy_last = _step(_plan(pp=8, global_batch=64, first_stage_layers=4, last_stage_layers=16))
    assert heavy_last > even * 1.3  # 16 layers + head on the last rank against 10


def test_lighter_last_stage_offsets_the_output_layer() -> None:
    # Llama 3.2 1B's 128k-vocabulary head costs about four of its layers: moving layers off
    # the last rank (Megatron's --account-for-loss-in-pipeline-split idea) shortens the pace.
    plan = dict(tp=1, pp=2, dp=4, micro_batch=1, global_batch=32)
    even = _step(Plan(**plan), "llama3.2-1b")  # 8 + 8 (+ head)
    lighter = _step(Plan(**plan, first_stage_layers=10, last_stage_layers=6), "llama3.2-1b")
    assert lighter < 0.9 * even


def test_bubble_of_equal_stages_matches_the_1f1b_formula() -> None:
    spec = catalog.model("llama3.1-70b")
    plan = _plan(pp=8, vp=2, global_batch=64)
    cluster = catalog.cluster("h100-sxm", plan.num_gpus, inter="ib-ndr400")
    profile = load_profile("megatron")
    est = estimate_plan(spec, cluster, Training(seq_len=4096), plan, profile)
    m = plan.num_microbatches
    t_mb = (float(est.step_time_s[0]) - float(est.bubble_s[0]) - float(est.comm_dp_s[0])) / m
    # (sum_i t_i - t_max) / v, between (p-1)/v x (layers only) and (p-1)/v x t_mb
    assert float(est.bubble_s[0]) <= (8 - 1) / 2 * t_mb * (1 + 1e-9)
    assert float(est.bubble_s[0]) >= 0.8 * (8 - 1) / 2 * t_mb
    assert np.isfinite(est.bubble_s).all()
