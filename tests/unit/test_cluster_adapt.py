"""Adaptive re-planning: never worse than static, and the plan moves off the degraded link."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from gpuscale.cluster.adapt import Timeline, adapt, cluster_of
from gpuscale.errors import InputError


def _covers(t: Timeline, horizon: float) -> None:
    assert t.segments[0].start_s == 0.0
    assert t.segments[-1].end_s == pytest.approx(horizon)
    for a, b in zip(t.segments, t.segments[1:], strict=False):
        assert a.end_s == pytest.approx(b.start_s)


def test_slow_nvlink_lowers_tensor_parallelism() -> None:
    a = adapt(
        catalog.model("llama3.1-70b"),
        cluster_of("h100-sxm", 64, 8, "ib-ndr400"),
        event="intra",
        factor=0.1,
        at_s=3600.0,
        horizon_s=86400.0,
    )
    assert "TP=2" in a.before and "TP" not in a.after_adaptive
    assert a.adaptive.tokens > 1.1 * a.static.tokens
    _covers(a.static, 86400.0)
    _covers(a.adaptive, 86400.0)


def test_node_loss_keeps_training_on_the_rest() -> None:
    a = adapt(
        catalog.model("llama3.1-8b"),
        cluster_of("h100-sxm", 32, 8, "ib-ndr400"),
        event="node-loss",
        at_s=3600.0,
        horizon_s=86400.0,
        repair_s=8 * 3600.0,
    )
    assert a.adaptive.tokens > a.static.tokens
    assert any(s.tokens_per_s == 0 and s.what.startswith("stopped") for s in a.static.segments)
    _covers(a.adaptive, 86400.0)


def test_restart_not_worth_it_near_the_horizon() -> None:
    # an event 5 minutes before the end: a restart can never pay for itself
    a = adapt(
        catalog.model("gpt3-13b"),
        cluster_of("h100-sxm", 64, 8, "ib-ndr400"),
        event="inter",
        factor=0.05,
        at_s=86400.0 - 300.0,
        horizon_s=86400.0,
    )
    assert a.adaptive.tokens == a.static.tokens
    assert a.after_adaptive.endswith("(kept)")


def test_bad_event() -> None:
    cluster = cluster_of("h100-sxm", 16, 8, "ib-ndr400")
    with pytest.raises(InputError, match="--event"):
        adapt(catalog.model("llama3.1-8b"), cluster, event="fire", at_s=0, horizon_s=10)
    with pytest.raises(InputError, match="horizon"):
        adapt(
            catalog.model("llama3.1-8b"), cluster, event="inter", factor=0.5, at_s=20, horizon_s=10
        )
