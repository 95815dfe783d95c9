"""`plan` never recommends a plan at the edge of memory: every recommended plan fits the
budget (the card less the profile's headroom), and the headroom is stated."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.costmodel.memory import headroom_assumption, memory_budget_bytes
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.search import Hardware, Workload, search, search_count
from gpuscale.specs import Training

PROFILE = load_profile("generic")
GIB = float(2**30)


def _workload(model: str, seq: int = 8192) -> Workload:
    spec = catalog.model(model)
    return Workload(
        model=spec,
        training=Training(seq_len=seq),
        global_batch=int(defaults.global_batch(spec, seq).value),
        tokens=1e11,
    )


def _without_headroom() -> Profile:
    return dataclasses.replace(
        PROFILE, constants=dict(PROFILE.constants, memory_headroom_fraction=0.0)
    )


def test_budget_is_the_card_less_the_headroom() -> None:
    share = PROFILE.const("memory_headroom_fraction")
    assert 0.05 <= share <= 0.2
    card = catalog.gpu("h100-sxm").memory_bytes
    assert memory_budget_bytes(card, PROFILE) == pytest.approx(card * (1 - share))
    words = headroom_assumption(card, PROFILE)
    assert f"{share:.0%}" in words and "GiB usable" in words


@pytest.mark.parametrize(
    ("model", "gpu", "n"),
    [("llama3.1-8b", "h100-sxm", 8), ("llama3.1-70b", "h100-sxm", 64)],
)
def test_no_recommended_plan_within_the_headroom_of_capacity(model: str, gpu: str, n: int) -> None:
    card = catalog.gpu(gpu).memory_bytes
    budget = memory_budget_bytes(card, PROFILE)
    result = search(_workload(model), Hardware(gpu=gpu), PROFILE, n, top_k=5)
    assert result.ranked
    for p in result.ranked:
        assert p.memory_per_gpu_gib * GIB <= budget < card
    for count in result.counts:
        for p in count.top:
            assert p.memory_per_gpu_gib * GIB <= budget
    assert result.memory_assumption == headroom_assumption(card, PROFILE)


def test_headroom_rules_out_plans_that_fill_the_card() -> None:
    """The test above can fail: without the headroom the same search keeps plans whose peak
    lies between the budget and the card, and the winner changes to one of them."""
    workload, hardware = _workload("llama3.1-8b"), Hardware(gpu="h100-sxm")
    card = catalog.gpu("h100-sxm").memory_bytes
    budget = memory_budget_bytes(card, PROFILE)
    loose = search_count(workload, hardware, _without_headroom(), 8, top_k=20)
    tight = search_count(workload, hardware, PROFILE, 8, top_k=20)
    at_edge = [p for p in loose.top if budget < p.memory_per_gpu_gib * GIB <= card]
    assert at_edge, "no plan between the budget and the card: the headroom tests nothing"
    assert tight.fitting < loose.fitting
    assert all(p.memory_per_gpu_gib * GIB <= budget for p in tight.top)


def test_no_fit_error_names_the_budget() -> None:
    workload = _workload("llama3.1-70b", seq=8192)
    with pytest.raises(InputError, match="GiB budget"):
        search(workload, Hardware(gpu="h100-sxm"), PROFILE, 1)
