"""Which ranks share a node: the map from global ranks to nodes and to cross-node rails.

Pure Python (no torch) so that it can be validated and tested anywhere. ``torchrun`` numbers
ranks node-major (``RANK = GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``, torch.distributed.run
docs, "Environment variables"); an explicit layout may list any equal-sized nodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuscale.errors import InputError, require


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeTopology:
    """Global ranks grouped by node; every node holds the same number of ranks."""

    nodes: tuple[tuple[int, ...], ...]
    """``nodes[i]`` lists the global ranks on node ``i`` in local-rank order."""

    def __post_init__(self) -> None:
        require(
            len(self.nodes) >= 1 and all(len(n) >= 1 for n in self.nodes),
            "topology: every node needs at least one rank",
        )
        sizes = {len(n) for n in self.nodes}
        require(
            len(sizes) == 1,
            f"topology: nodes must hold the same number of ranks, got sizes {sorted(sizes)}",
        )
        flat = sorted(r for node in self.nodes for r in node)
        require(
            flat == list(range(len(flat))),
            f"topology: ranks must be 0..{len(flat) - 1}, each on exactly one node",
        )

    @classmethod
    def contiguous(cls, world_size: int, local_world_size: int) -> NodeTopology:
        """``world_size`` ranks, ``local_world_size`` to a node, numbered node-major (torchrun)."""
        require(
            local_world_size >= 1 and world_size >= 1,
            f"topology: world size ({world_size}) and ranks per node ({local_world_size}) must be >= 1",
        )
        require(
            world_size % local_world_size == 0,
            f"topology: world size {world_size} is not a multiple of {local_world_size} ranks per node",
        )
        return cls(
            nodes=tuple(
                tuple(range(start, start + local_world_size))
                for start in range(0, world_size, local_world_size)
            )
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> NodeTopology:
        """The layout ``torchrun`` describes in ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``RANK``,
        ``LOCAL_RANK`` and ``GROUP_RANK``."""
        try:
            world = int(env["WORLD_SIZE"])
            local = int(env["LOCAL_WORLD_SIZE"])
        except KeyError as exc:
            raise InputError(
                f"topology: {exc.args[0]} is not set; launch with torchrun or pass "
                "an explicit NodeTopology"
            ) from None
        except ValueError:
            raise InputError("topology: WORLD_SIZE and LOCAL_WORLD_SIZE must be integers") from None
        topo = cls.contiguous(world, local)
        if all(key in env for key in ("RANK", "LOCAL_RANK", "GROUP_RANK")):
            rank, local_rank, node = (
                int(env["RANK"]),
                int(env["LOCAL_RANK"]),
                int(env["GROUP_RANK"]),
            )
            require(
                rank == node * local + local_rank,
                f"topology: RANK {rank} is not GROUP_RANK*LOCAL_WORLD_SIZE+LOCAL_RANK "
                f"({node}*{local}+{local_rank}); ranks are not node-major, pass an explicit "
                "NodeTopology",
            )
        return topo

    @classmethod
    def from_nodes(cls, nodes: Sequence[Sequence[int]]) -> NodeTopology:
        return cls(nodes=tuple(tuple(int(r) for r in node) for node in nodes))

    @property
    def world_size(self) -> int:
        return len(self.nodes) * self.local_world_size

    @property
    def local_world_size(self) -> int:
        return len(self.nodes[0])

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def rails(self) -> tuple[tuple[int, ...], ...]:
        """Cross-node groups: ``rails[j]`` holds local rank ``j`` of every node. On a
        rail-optimized cluster each rail maps to its own NIC, so the rails run side by side."""
        return tuple(zip(*self.nodes, strict=True))

    def node_of(self, rank: int) -> int:
        for index, node in enumerate(self.nodes):
            if rank in node:
                return index
        raise InputError(f"topology: rank {rank} is on no node (world size {self.world_size})")

    def local_rank_of(self, rank: int) -> int:
        return self.nodes[self.node_of(rank)].index(rank)
