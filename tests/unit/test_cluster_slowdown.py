"""The slowdown model: spread allocations run slower where the cost model says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale.cluster.slowdown import Shape, SlowdownModel
from gpuscale.cluster.spec import load_cluster

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def rail() -> SlowdownModel:
    return SlowdownModel(load_cluster(EXAMPLES / "rail-4096.yaml"))


def test_packed_is_reference(rail: SlowdownModel) -> None:
    for n in (1, 8, 64):
        assert rail.speed("bert-large", n, rail.packed_shape(n)) == pytest.approx(1.0)


def test_oversubscribed_core_slows_and_levels_order(rail: SlowdownModel) -> None:
    leaf = rail.speed("bert-large", 64, Shape(node_type=0, level=1, per_node=8))
    core = rail.speed("bert-large", 64, Shape(node_type=0, level=3, per_node=8))
    thin = rail.speed("bert-large", 64, Shape(node_type=0, level=3, per_node=1))
    assert leaf == pytest.approx(1.0)
    assert core < leaf  # 1:7 above the pod
    assert thin < core  # one rank per node: one NIC instead of eight


def test_degradation_slows(rail: SlowdownModel) -> None:
    base = rail.speed("bert-large", 16, Shape(node_type=0, level=1, per_node=2))
    worse = rail.speed("bert-large", 16, Shape(node_type=0, level=1, per_node=2, degrade=0.1))
    assert worse < base


def test_faster_generation_runs_faster() -> None:
    lab = SlowdownModel(load_cluster(EXAMPLES / "lab-64.yaml"))
    # the reference node type is the first in the file (A100); the same job on H100 is faster
    assert lab.speed("bert-large", 8, Shape(node_type=1, level=0, per_node=8)) > 1.2
