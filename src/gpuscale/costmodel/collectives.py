"""Collective communication time on a two-level (NVLink node, network between nodes) topology.

Cost model: time = latency term + bytes / bandwidth, the alpha-beta model of Hockney (1994) with the
ring and tree algorithm costs of Thakur, Rabenseifner & Gropp (2005, IJHPCA 19(1), Sec. 4) and
NCCL's bus-bandwidth convention (nccl-tests doc/PERFORMANCE.md): for a group of ``n`` ranks and a
message of ``S`` bytes, ``busbw = algbw * factor`` with factor ``2(n-1)/n`` for all-reduce,
``(n-1)/n`` for all-gather, reduce-scatter and all-to-all, ``1`` for broadcast and send/recv. A
group's bus bandwidth is the slower of its two levels (Jeaugey, "NCCL 2.0", GTC 2017: rings cross
each node boundary once per channel, one channel per NIC on rail-optimized nodes).

Every function takes numpy arrays (or scalars) and broadcasts, so the planner can price many
plans in one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscale.costmodel.profile import Profile
from gpuscale.specs import Cluster

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv"]
OPS: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send_recv",
)

ArrayLike = np.ndarray | float | int


def bus_factor(op: str, n: ArrayLike) -> np.ndarray:
    """nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): busbw = algbw * factor."""
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    if op == "all_reduce":
        return np.asarray(2.0 * (n - 1.0) / n)
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return np.asarray((n - 1.0) / n)
    if op in ("broadcast", "send_recv"):
        return np.ones_like(n)
    raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


@dataclass(frozen=True, slots=True)
class LevelBandwidth:
    """Achieved per-GPU bandwidth (GB/s) and latency (us) of the two levels of a cluster."""

    intra_gb_per_s: float
    intra_latency_us: float
    nic_gb_per_s: float
    """One NIC port's achieved rate (after the leaf/spine oversubscription)."""
    nics_per_gpu: float
    inter_latency_us: float
    collective_nic_gb_per_s: float | None = None
    """One NIC port's achieved rate under ring collectives when measured apart from
    point-to-point traffic (``LinkCalibration.collective_bandwidth_gb_per_s``); None: ``nic``."""

    @classmethod
    def of(cls, cluster: Cluster, profile: Profile) -> LevelBandwidth:
        intra = profile.link("intra", cluster.intra.kind, cluster.intra.id)
        inter = profile.link("inter", cluster.inter.kind, cluster.inter.id)
        return cls(
            intra_gb_per_s=intra.bandwidth(cluster.intra.bandwidth_gb_per_s),
            intra_latency_us=intra.latency(cluster.intra.latency_us),
            nic_gb_per_s=inter.bandwidth(cluster.inter.bandwidth_gb_per_s)
            / cluster.oversubscription,
            nics_per_gpu=cluster.nics_per_node / cluster.gpus_per_node,
            inter_latency_us=inter.latency(cluster.inter.latency_us),
            collective_nic_gb_per_s=(
                None
                if inter.collective_bandwidth_gb_per_s is None
                else inter.collective_bandwidth(cluster.inter.bandwidth_gb_per_s)
                / cluster.oversubscription
            ),
        )


def group_bus_bandwidth(levels: LevelBandwidth, n: ArrayLike, per_node: ArrayLike) -> np.ndarray:
    """Bus bandwidth (GB/s) of a ring over ``n`` ranks placed ``per_node`` to a node.

    Inside one node the ring runs at the NVLink/PCIe rate. Across nodes, the group's ``per_node``
    ranks share ``per_node * nics_per_gpu`` NICs (the other groups of the plan use the remaining
    NICs at the same time), so the inter-node rate is ``per_node * nics_per_gpu * nic`` and the
    ring runs at the slower of the two levels.
    """
    n = np.asarray(n, dtype=float)
    per_node = np.minimum(np.asarray(per_node, dtype=float), n)
    nic = (
        levels.nic_gb_per_s
        if levels.collective_nic_gb_per_s is None
        else levels.collective_nic_gb_per_s
    )
    inter = per_node * levels.nics_per_gpu * nic
    crosses = n > per_node
    return np.where(crosses, np.minimum(levels.intra_gb_per_s, inter), levels.intra_gb_per_s)


def _latency_us(levels: LevelBandwidth, n: np.ndarray, per_node: np.ndarray) -> np.ndarray:
    return np.where(n > per_node, levels.inter_latency_us, levels.intra_latency_us)


@dataclass(frozen=True, slots=True)
class RingGroup:
    """The plan-wise terms of one communicator that do not depend on the message: computed once
    and shared by every collective a cost model runs over the same group (the data-parallel
    group runs up to seven), so each extra collective costs only its bandwidth term."""

    n: np.ndarray
    """Ranks (float, at least 1)."""
    per: np.ndarray
    """Ranks per node (at most ``n``)."""
    alpha: np.ndarray
    """Latency of one step (s)."""
    levels: LevelBandwidth
    _memo: dict[str, np.ndarray]

    @classmethod
    def of(cls, levels: LevelBandwidth, n: ArrayLike, per_node: ArrayLike) -> RingGroup:
        n_arr = np.maximum(np.asarray(n, dtype=float), 1.0)
        per = np.minimum(np.asarray(per_node, dtype=float), n_arr)
        alpha = _latency_us(levels, n_arr, per) * 1e-6
        return cls(n=n_arr, per=per, alpha=alpha, levels=levels, _memo={})

    def _get(self, key: str) -> np.ndarray:
        memo = self._memo
        if key in memo:
            return memo[key]
        n_arr, alpha = self.n, self.alpha
        value: np.ndarray
        if key == "multi":
            value = n_arr > 1
        elif key == "busbw":
            value = group_bus_bandwidth(self.levels, n_arr, self.per) * 1e9
        elif key.startswith("factor:"):
            value = bus_factor(key[7:], n_arr)
        elif key == "ring_latency:1":
            value = 1.0 * (n_arr - 1.0) * alpha
        elif key == "ring_latency:2":
            value = 2.0 * (n_arr - 1.0) * alpha
        elif key == "tree_latency":
            value = 2.0 * np.ceil(np.log2(n_arr)) * alpha
        elif key == "tree_denominator":
            value = np.maximum(n_arr - 1.0, 1.0)
        else:
            raise KeyError(key)
        memo[key] = value
        return value

    def time_s(self, op: str, message_bytes: ArrayLike) -> np.ndarray:
        """As :func:`collective_time_s` over this group (the same arithmetic, term by term)."""
        levels = self.levels
        size = np.asarray(message_bytes, dtype=float)
        n_arr, per, alpha = self.n, self.per, self.alpha
        multi = self._get("multi")
        if op == "send_recv":
            bw = np.where(
                n_arr > per, levels.nics_per_gpu * levels.nic_gb_per_s, levels.intra_gb_per_s
            )
            return np.where(multi, alpha + size / (bw * 1e9), 0.0)
        if op == "all_to_all":
            # (per-1)/n of the buffer stays in the node, (n-per)/n crosses the network
            local = size * (per - 1.0) / n_arr / (levels.intra_gb_per_s * 1e9)
            remote = (
                size
                * (n_arr - per)
                / n_arr
                / (np.maximum(levels.nics_per_gpu * levels.nic_gb_per_s, 1e-9) * 1e9)
            )
            return np.where(multi, (n_arr - 1.0) * alpha + np.maximum(local, remote), 0.0)
        steps = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "broadcast": 1.0}[op]
        if not size.any():
            bandwidth_term: np.ndarray | float = 0.0  # size 0: the latency term alone
            ring = self._get(f"ring_latency:{steps:.0f}")
        else:
            bandwidth_term = size * self._get(f"factor:{op}") / self._get("busbw")
            ring = self._get(f"ring_latency:{steps:.0f}") + bandwidth_term
        if op != "all_reduce":
            # NCCL's tree exists for all-reduce only (src/graph/tuning.cc); the others are rings.
            return np.where(multi, ring, 0.0)
        tree = self._get("tree_latency") + bandwidth_term * n_arr / self._get("tree_denominator")
        return np.where(multi, np.minimum(ring, tree), 0.0)


def collective_time_s(
    op: str,
    message_bytes: ArrayLike,
    n: ArrayLike,
    per_node: ArrayLike,
    levels: LevelBandwidth,
) -> np.ndarray:
    """Seconds for one collective of ``message_bytes`` (the full buffer, as nccl-tests sizes
    it) over ``n`` ranks placed ``per_node`` to a node. Zero for a group of one.

    For all-reduce NCCL picks the faster of ring and (double binary) tree; the tree pays
    ``log2(n)`` latency steps instead of ``n - 1`` (Sanders, Speck & Traff 2009, two-tree
    broadcast/reduction). All-gather, reduce-scatter and broadcast run as rings.
    """
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; known: {', '.join(OPS)}")
    return RingGroup.of(levels, n, per_node).time_s(op, message_bytes)
