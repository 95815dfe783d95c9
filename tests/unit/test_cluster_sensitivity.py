"""The slowdown model against measured packed-vs-spread throughputs (placement_sensitivity.csv)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.cluster.sensitivity import allreduce_s, evaluate, load_hardware, summary
from gpuscale.costmodel.profile import load_profile
from gpuscale.validation import DATA_DIR

HERE = Path(DATA_DIR) / "cluster"


@pytest.fixture(scope="module")
def rows() -> list:
    return evaluate(HERE / "placement_sensitivity.csv", HERE / "placement_hardware.yaml")


def test_every_pollux_and_sia_pair_is_scored(rows: list) -> None:
    assert {r.source for r in rows} == {"pollux", "sia-rtx", "sia-dgx-ext", "sia-azure"}
    assert len(rows) > 1500


def test_model_tracks_the_slow_network(rows: list) -> None:
    # On the T4 servers behind one capped TCP flow, placement matters and the model must beat
    # a placement-blind guess and rank the rows by the measured penalty.
    pollux = summary([r for r in rows if r.source == "pollux"])
    assert pollux["median_abs_error"] < pollux["blind_median_abs_error"]
    assert pollux["spearman"] > 0.7
    overall = summary(rows)
    assert overall["mean_abs_error"] < overall["blind_mean_abs_error"]


def test_spread_over_a_network_costs_more_than_inside_a_server() -> None:
    servers, _ = load_hardware(HERE / "placement_hardware.yaml")
    profile = load_profile("generic")
    for server in servers.values():
        assert allreduce_s(server, "11", 4e8, profile) > allreduce_s(server, "2", 4e8, profile)
