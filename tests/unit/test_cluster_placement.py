"""Placement policies: allocations are exact, topology-aware packs, state stays consistent."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cluster.placement import POLICIES, Allocation, ClusterState, make_policy
from gpuscale.cluster.spec import load_cluster
from gpuscale.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FAT = load_cluster(EXAMPLES / "fat-tree-512.yaml")


def _take(state: ClusterState, nodes: list[int], counts: list[int]) -> None:
    state.take(Allocation(nodes=np.array(nodes), counts=np.array(counts)))


def test_topology_best_fit_in_one_node() -> None:
    state = ClusterState(FAT)
    _take(state, [5], [6])  # node 5 has 2 free: the tightest fit for a 2-GPU job
    alloc = make_policy("topology").place(state, 2)
    assert alloc is not None
    assert alloc.nodes.tolist() == [5]


def test_topology_keeps_a_job_in_one_leaf_where_first_fit_spreads() -> None:
    state = ClusterState(FAT)
    # leaf 0 (nodes 0-7): every node half used; leaf 1 untouched
    _take(state, list(range(8)), [4] * 8)
    topo = make_policy("topology").place(state, 16)
    first = make_policy("first-fit").place(state, 16)
    assert topo is not None and first is not None
    assert state.shape(topo).per_node == 8  # two whole nodes
    assert state.shape(first).per_node == 4  # four half nodes
    assert int(topo.counts.sum()) == int(first.counts.sum()) == 16


def test_topology_prefers_one_pod() -> None:
    state = ClusterState(FAT)
    alloc = make_policy("topology").place(state, 128)  # a leaf holds 64 GPUs, a pod 256
    assert alloc is not None
    assert state.shape(alloc).level == 2


def test_no_room_returns_none_and_unknown_policy_fails() -> None:
    state = ClusterState(FAT)
    for name in POLICIES:
        assert make_policy(name).place(state, FAT.num_gpus + 1) is None
    with pytest.raises(InputError, match="accepted"):
        make_policy("best")


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(POLICIES),
    st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16, 24, 64]), st.booleans()), max_size=40),
)
def test_state_accounting(policy: str, ops: list[tuple[int, bool]]) -> None:
    state = ClusterState(FAT)
    place = make_policy(policy, seed=3).place
    live: list[Allocation] = []
    for n, release in ops:
        if release and live:
            state.give(live.pop(0))
        alloc = place(state, n)
        if alloc is not None:
            assert int(alloc.counts.sum()) == n and (alloc.counts > 0).all()
            assert (state.free[alloc.nodes] >= alloc.counts).all()
            state.take(alloc)
            live.append(alloc)
        assert (state.free >= 0).all()
        assert state.total_free == int(state.free.sum())
        assert (state.leaf_free == np.bincount(FAT.node_leaf, weights=state.free)).all()
        partial = state.free[(state.free > 0) & (state.free < state.capacity)].sum()
        assert state.partial_free == int(partial)
