"""Free GPUs per node and the policies that choose where a job goes.

State is kept per node (free GPU counts, numpy arrays) with per-leaf and per-pod sums updated
incrementally, so each placement is a handful of numpy operations over a few hundred nodes.
Policies share one interface: ``place(state, n) -> Allocation | None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gpuscale.cluster.choices import POLICIES as POLICIES
from gpuscale.cluster.slowdown import Shape
from gpuscale.cluster.spec import ClusterSpec
from gpuscale.errors import InputError


@dataclass(frozen=True, slots=True)
class Allocation:
    nodes: np.ndarray
    counts: np.ndarray


class ClusterState:
    """Free GPUs per node, leaf and pod; nodes that are down hold no free GPUs."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec
        self.capacity = spec.gpus_per_node.copy()
        self.free = self.capacity.copy()
        self.up = np.ones(spec.num_nodes, dtype=bool)
        self.leaf = spec.node_leaf
        self.pod = spec.node_pod
        self.leaf_free = np.bincount(
            self.leaf, weights=self.free, minlength=spec.num_leaves
        ).astype(np.int64)
        self.pod_free = np.bincount(self.pod, weights=self.free, minlength=spec.num_pods).astype(
            np.int64
        )
        self.total_free = int(self.free.sum())
        self.partial_free = 0
        """Free GPUs on nodes that are partly in use: capacity a large job cannot use whole."""
        # node type that paces a mixed allocation: the lowest 16-bit peak
        peaks = np.array([t.gpu.peak(t.gpu.half_precision) for t in spec.node_types])
        self._type_rank = np.argsort(np.argsort(peaks))
        self._single_type = len(spec.node_types) == 1

    @property
    def up_capacity(self) -> int:
        return int(self.capacity[self.up].sum())

    def _change(self, nodes: np.ndarray, delta: np.ndarray) -> None:
        before = self.free[nodes]
        after = before + delta
        cap = self.capacity[nodes]
        self.partial_free += int(
            np.where((after > 0) & (after < cap), after, 0).sum()
            - np.where((before > 0) & (before < cap), before, 0).sum()
        )
        self.free[nodes] = after
        np.add.at(self.leaf_free, self.leaf[nodes], delta)
        np.add.at(self.pod_free, self.pod[nodes], delta)
        self.total_free += int(delta.sum())

    def take(self, alloc: Allocation) -> None:
        self._change(alloc.nodes, -alloc.counts)

    def give(self, alloc: Allocation) -> None:
        """Return a job's GPUs; those on nodes that went down are not returned."""
        live = self.up[alloc.nodes]
        if live.all():
            self._change(alloc.nodes, alloc.counts)
        elif live.any():
            self._change(alloc.nodes[live], alloc.counts[live])

    def node_down(self, node: int) -> None:
        self.up[node] = False
        f = int(self.free[node])
        if f:
            self._change(np.array([node]), np.array([-f]))

    def node_up(self, node: int, busy: int = 0) -> None:
        self.up[node] = True
        f = int(self.capacity[node]) - busy - int(self.free[node])
        if f:
            self._change(np.array([node]), np.array([f]))

    def shape(self, alloc: Allocation, degrade: float = 1.0, counts: bool = False) -> Shape:
        nodes = alloc.nodes
        if nodes.shape[0] == 1:
            level = 0
        else:
            leaves = self.leaf[nodes]
            if (leaves == leaves[0]).all():
                level = 1
            else:
                pods = self.pod[nodes]
                level = 2 if (pods == pods[0]).all() else 3
        if self._single_type:
            node_type = 0
        else:
            types = self.spec.node_type[nodes]
            node_type = int(types[np.argmin(self._type_rank[types])])
        return Shape(
            node_type=node_type,
            level=level,
            per_node=int(alloc.counts.min()),
            degrade=degrade,
            counts=tuple(sorted(alloc.counts.tolist())) if counts else (),
        )


class Policy(Protocol):
    name: str

    def place(self, state: ClusterState, n: int) -> Allocation | None: ...


def _fill(state: ClusterState, order: np.ndarray, n: int) -> Allocation | None:
    """Take free GPUs from nodes in ``order`` until ``n`` are gathered."""
    free = state.free[order]
    cs = np.cumsum(free)
    k = int(np.searchsorted(cs, n))
    if k >= cs.shape[0]:
        return None
    counts = free[: k + 1].copy()
    counts[k] -= int(cs[k]) - n
    keep = counts > 0
    return Allocation(nodes=order[: k + 1][keep], counts=counts[keep])


class FirstFit:
    """What a naive scheduler does: the lowest-numbered nodes with free GPUs, in order."""

    name = "first-fit"

    def place(self, state: ClusterState, n: int) -> Allocation | None:
        if state.total_free < n:
            return None
        return _fill(state, np.flatnonzero(state.free), n)


class RandomFit:
    """Free GPUs taken from nodes in a random order (a scheduler blind to topology)."""

    name = "random"

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def place(self, state: ClusterState, n: int) -> Allocation | None:
        if state.total_free < n:
            return None
        nodes = np.flatnonzero(state.free)
        return _fill(state, self.rng.permutation(nodes), n)


class TopologyAware:
    """One node, else one leaf, else one pod, else the core; best fit at each level.

    Best fit (the smallest node, leaf or pod with room) keeps large free blocks whole for the
    large jobs that need them (the buddy/best-fit rule of memory allocators, Knuth TAOCP vol. 1
    Sec. 2.5; Tiresias, Gu et al. NSDI'19 Sec. 4.2, consolidates jobs sensitive to placement).
    Inside the chosen block, fullest-free nodes first, so a job spans as few nodes as it can
    and its tensor-parallel groups stay inside NVLink domains.
    """

    name = "topology"

    def place(self, state: ClusterState, n: int) -> Allocation | None:
        if state.total_free < n:
            return None
        free = state.free
        fits = free >= n
        if fits.any():
            room = np.where(fits, free, np.iinfo(np.int64).max)
            node = int(np.argmin(room))
            return Allocation(nodes=np.array([node]), counts=np.array([n]))
        # A multi-node job: a group (leaf, then pod) with enough whole free nodes for it, the
        # tightest such; else the tightest group with enough free GPUs at all.
        whole = np.where(free == state.capacity, free, 0)
        big = np.iinfo(np.int64).max
        for group_free, member, groups in (
            (state.leaf_free, state.leaf, state.spec.num_leaves),
            (state.pod_free, state.pod, state.spec.num_pods),
        ):
            whole_free = np.bincount(member, weights=whole, minlength=groups)
            for ok in (whole_free >= n, group_free >= n):
                if ok.any():
                    g = int(np.argmin(np.where(ok, group_free, big)))
                    nodes = np.flatnonzero((member == g) & (free > 0))
                    order = nodes[np.argsort(-free[nodes], kind="stable")]
                    return _fill(state, order, n)
        # Across pods: fullest pods first, fullest nodes first inside each.
        nodes = np.flatnonzero(free > 0)
        key = np.lexsort((-free[nodes], -state.pod_free[state.pod[nodes]]))
        return _fill(state, nodes[key], n)


def make_policy(name: str, seed: int = 0) -> Policy:
    if name == "first-fit":
        return FirstFit()
    if name == "random":
        return RandomFit(seed)
    if name == "topology":
        return TopologyAware()
    raise InputError(
        f"unknown placement policy '{name}'; accepted: {', '.join(POLICIES)}, all", field="policy"
    )
