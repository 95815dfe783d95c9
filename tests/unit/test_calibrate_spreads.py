"""The prior spreads of ``calibrate run`` come from published per-stack figures: the pooled
within-group SD of their logs, every quantity sourced, and the arithmetic written next to the
figures agrees with what the code computes from them."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale.catalog import calibration_priors
from gpuscale.planner.calibrate_run import QUANTITIES, SIGMA
from gpuscale.planner.calibrate_spreads import pooled_log_sd, sourced_spreads


def test_two_figures_give_their_log_ratio_over_root_two() -> None:
    assert pooled_log_sd([{"a": 1.0, "b": math.exp(0.3)}]) == pytest.approx(0.3 / math.sqrt(2))


def test_groups_pool_their_squares_and_degrees_of_freedom() -> None:
    # ln figures {0, 0.2} and {0, 0.1, 0.2}: squares 0.02 and 0.02, 1 + 2 degrees of freedom
    groups = [
        {"a": 1.0, "b": math.exp(0.2)},
        {"a": 1.0, "b": math.exp(0.1), "c": math.exp(0.2)},
    ]
    assert pooled_log_sd(groups) == pytest.approx(math.sqrt(0.04 / 3))


@given(
    figures=st.lists(st.floats(0.01, 1e4), min_size=2, max_size=5),
    scale=st.floats(1e-3, 1e3),
)
def test_a_groups_level_does_not_count_only_the_spread_between_its_stacks(
    figures: list[float], scale: float
) -> None:
    """What differs between groups (GPU, shape, op: the profile's own curves) is not a stack
    difference: scaling a whole group, or reordering its stacks, leaves the spread alone."""
    group = {f"s{i}": v for i, v in enumerate(figures)}
    other = {"x": 1.0, "y": 2.0}
    base = pooled_log_sd([group, other])
    scaled = {k: v * scale for k, v in reversed(group.items())}
    assert pooled_log_sd([scaled, other]) == pytest.approx(base, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        ([{"a": 1.0}], "at least two"),
        ([], "at least two"),
        ([{"a": 1.0, "b": 0.0}], "positive"),
        ([{"a": 1.0, "b": -2.0}], "positive"),
        ([{"a": 1.0, "b": float("nan")}], "positive"),
        ([{"a": 1.0, "b": float("inf")}], "finite"),
        ([{"a": 1.0, "b": "12 TFLOPS"}], "number"),
        ([{"a": 1.0, "b": True}], "number"),
    ],
)
def test_a_spread_needs_two_positive_figures(groups: list[dict[str, Any]], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pooled_log_sd(groups)


def test_every_quantity_has_its_sourced_spread_and_the_rule_uses_it() -> None:
    data = calibration_priors()["quantities"]
    assert tuple(data) == QUANTITIES
    spreads = sourced_spreads()
    assert spreads == SIGMA
    for name, entry in data.items():
        for key in ("source", "why", "arithmetic"):
            assert isinstance(entry.get(key), str) and entry[key].strip(), (name, key)
        # the arithmetic written in the YAML lands on the value the code computes
        assert f"{spreads[name]:.3f}" in entry["arithmetic"], name
        # every figure is a stack's value of one thing; a group compares two stacks or more
        for group in entry["groups"]:
            assert len(group["figures"]) >= 2, (name, group["label"])
            assert all(v > 0 for v in group["figures"].values())


def test_the_sourced_spreads_keep_the_direction_the_stacks_show() -> None:
    """The published figures order the quantities as the held-out empirical-Bayes estimate of
    docs/investigations/training-calibration.md does (branch calib-prior, not used to set
    them): the GEMM rate varies
    least between stacks, the memory-bound kernels more than attention, the host floor most."""
    s = sourced_spreads()
    assert s["compute"] < s["intra"] < s["attention"] < s["memory_bound"] < s["host"]


def test_a_document_of_its_own_is_read_instead_of_the_shipped_one() -> None:
    doc = {"quantities": {"compute": {"groups": [{"figures": {"a": 1.0, "b": math.e}}]}}}
    assert sourced_spreads(doc) == {"compute": pytest.approx(1 / math.sqrt(2))}
