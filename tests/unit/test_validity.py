"""The one plan-validity rule set: a single plan is refused (naming its flag) exactly when the
planner's vectorized mask drops it, and the library never prices a plan a model cannot run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import check_batch, estimate_plan
from gpuscale.errors import InputError
from gpuscale.planner.enumerate import enumerate_plans
from gpuscale.specs import ModelSpec, Plan, PlanBatch, Training
from gpuscale.specs.validity import check_plan, pipeline_layers_ok, valid_mask

from .test_planner_enumerate import models


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    dp = draw(st.sampled_from([1, 2, 3, 4, 8]))
    mbs = draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 3, 4, 8, 100]))
    return Plan(
        tp=draw(st.sampled_from([1, 2, 3, 4, 8, 16, 32])),
        pp=pp,
        dp=dp,
        cp=draw(st.sampled_from([1, 2, 3, 4, 16])),
        vp=draw(st.sampled_from([1, 2, 3])) if pp > 1 else 1,
        ep=draw(st.sampled_from([1, 2, 4, 8])),
        micro_batch=mbs,
        global_batch=mbs * dp * draw(st.sampled_from([1, 2, 3, 4, 6, 8])),
        zero=draw(st.sampled_from([0, 1, 3])),
    )


def _refused(model: ModelSpec, plan: Plan, seq: int) -> InputError | None:
    try:
        check_plan(model, plan, seq)
    except InputError as exc:
        return exc
    return None


@settings(max_examples=300, deadline=None)
@given(models(), plans(), st.sampled_from([2048, 4096, 4000, 6]))
def test_one_plan_is_refused_exactly_when_the_mask_drops_it(
    model: ModelSpec, plan: Plan, seq: int
) -> None:
    mask = valid_mask(model, PlanBatch.from_plans([plan]), seq)
    error = _refused(model, plan, seq)
    assert bool(mask[0]) == (error is None)
    if error is not None:
        # one line naming the flag at fault, with the API argument in ``field``
        assert error.field in {"tp", "pp", "vp", "cp", "ep", "zero"}
        assert f"--{error.field}" in str(error)


@settings(max_examples=60, deadline=None)
@given(models(), st.sampled_from([8, 16, 24, 64]), st.sampled_from([64, 96, 256]))
def test_every_enumerated_plan_passes_the_single_plan_check(
    model: ModelSpec, n: int, gbs: int
) -> None:
    batch = enumerate_plans(model, n, global_batch=gbs, seq_len=4096)
    assert valid_mask(model, batch, 4096).all()
    check_batch(model, batch, 4096)
    for i in range(0, len(batch), max(1, len(batch) // 20)):
        check_plan(model, batch.plan(i), 4096)


def test_the_library_refuses_tp_3_for_64_heads() -> None:
    model = catalog.model("llama3.1-70b")
    assert model.num_heads == 64
    with pytest.raises(InputError, match="--tp 3 does not divide") as err:
        estimate_plan(
            model,
            catalog.cluster("h100-sxm", 24),
            Training(seq_len=4096),
            Plan(tp=3, dp=8, global_batch=8),
            load_profile("generic"),
        )
    assert err.value.field == "tp"
    assert "accepted: 1, 2, 4, 8" in str(err.value)


def test_check_batch_names_the_first_bad_plan() -> None:
    model = catalog.model("llama3.1-8b")
    batch = PlanBatch.from_arrays(tp=np.array([1, 2, 1]), cp=np.array([1, 1, 3]))
    with pytest.raises(InputError, match="--cp") as err:
        check_batch(model, batch, 4096)
    assert err.value.field == "cp"


def test_context_parallel_needs_two_chunks_per_rank() -> None:
    model = catalog.model("llama3.1-8b")
    # 4096 % 8 == 0 but 4096 is not divisible by 2 * 8 * ... : pick a seq where seq % cp == 0
    # but seq % (2 cp) != 0, the case the old estimate rule let through
    with pytest.raises(InputError, match="2 x --cp"):
        check_plan(model, Plan(cp=3, dp=1), 4095 - 4095 % 3)


def test_pipeline_layers_rule_allows_uneven_but_not_empty_stages() -> None:
    assert pipeline_layers_ok(126, 16)  # Llama 3.1 405B on 16 stages: 8 x 15 + 6
    assert not pipeline_layers_ok(126, 100)  # 99 stages of 2 layers would need 198
    assert pipeline_layers_ok(32, 32) and not pipeline_layers_ok(32, 33)
    assert list(pipeline_layers_ok(10, np.array([1, 2, 4, 6, 9, 10, 11]))) == [
        True,
        True,
        True,
        False,
        False,
        True,
        False,
    ]
