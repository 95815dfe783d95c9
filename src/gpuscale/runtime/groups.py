"""Process groups for two-level collectives, created once from the topology.

``torch.distributed.new_group`` is collective: every rank must create every group, in the same
order, even the groups it is not in (torch.distributed docs, ``new_group``). So all node groups
and all rail groups are built together here, once, right after ``init_process_group``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from gpuscale.errors import require
from gpuscale.runtime._compat import reduce_scatter_single
from gpuscale.runtime.topology import NodeTopology


@dataclass(frozen=True, kw_only=True, slots=True)
class HierarchicalGroups:
    """This rank's place in a two-level topology and the groups it talks through."""

    topology: NodeTopology
    rank: int
    node_group: Any
    """The ranks on this rank's node (``ProcessGroup``): node reduce-scatters."""
    node_gather_group: Any
    """The same ranks in a second group: node all-gathers, which a pipelined hook issues from
    another thread than the reduce-scatters (one group per thread keeps every group's
    collectives in the same order on every rank)."""
    rail_group: Any
    """The ranks with this rank's local rank on every node: one rank per node (``ProcessGroup``)."""
    node_reduce_scatter: bool
    """The backend reduces-scatters natively; otherwise a node all-reduce stands in (same sum,
    ``local_world_size`` times the node traffic)."""

    @property
    def world_size(self) -> int:
        return self.topology.world_size

    @property
    def local_world_size(self) -> int:
        return self.topology.local_world_size

    @property
    def local_rank(self) -> int:
        return self.topology.local_rank_of(self.rank)

    @property
    def num_nodes(self) -> int:
        return self.topology.num_nodes


def _supports_reduce_scatter(group: Any, size: int) -> bool:
    """Probe once: older gloo builds raise on reduce_scatter, before any traffic, on every rank
    alike, so all ranks reach the same answer."""
    probe = torch.zeros(size)
    try:
        reduce_scatter_single(torch.empty(1), probe, group=group)
    except (RuntimeError, NotImplementedError):
        return False
    return True


def build_groups(topology: NodeTopology | None = None) -> HierarchicalGroups:
    """Create the node and rail groups on every rank (collective: call on all ranks).

    ``topology`` defaults to the one torchrun describes in the environment.
    """
    require(
        dist.is_available() and dist.is_initialized(),
        "build_groups: call torch.distributed.init_process_group first",
    )
    topo = topology or NodeTopology.from_env(os.environ)
    require(
        topo.world_size == dist.get_world_size(),
        f"build_groups: topology has {topo.world_size} ranks but the job has "
        f"{dist.get_world_size()}",
    )
    node_group, _ = dist.new_subgroups_by_enumeration([list(n) for n in topo.nodes])
    node_gather_group, _ = dist.new_subgroups_by_enumeration([list(n) for n in topo.nodes])
    rail_group, _ = dist.new_subgroups_by_enumeration([list(r) for r in topo.rails])
    native = _supports_reduce_scatter(node_group, topo.local_world_size)
    return HierarchicalGroups(
        topology=topo,
        rank=dist.get_rank(),
        node_group=node_group,
        node_gather_group=node_gather_group,
        rail_group=rail_group,
        node_reduce_scatter=native,
    )
