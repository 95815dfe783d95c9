"""Where a serving deployment's workers sit on nodes.

A worker (one engine instance: ``tp x pp`` GPUs) no larger than a node lies inside one node, and
several small workers share a node; a larger worker spans whole nodes, each pipeline stage
inside one node or over whole nodes. That is how the engines start one: SGLang's multi-node
launch gives every node ``tp_size // nnodes`` ranks of a worker and each pipeline stage
``nnodes / pp_size`` whole nodes (``sglang/srt/entrypoints/engine.py`` ``_launch_subprocesses``,
``tp_size_per_node``, ``nnodes_per_pp_rank``), and a disaggregated recipe starts each small
worker on GPUs of one node (Dynamo's SGLang/TensorRT-LLM disaggregation examples, InferenceX's
multi-node DeepSeek-R1 recipes: 1-3 TP4 prefill workers beside a TP8/DP-attention decode pool on
8-GPU nodes). Workers are packed first-fit by decreasing size (prefill before decode at equal
size), which fills nodes exactly when every size divides the node, as power-of-two degrees do.

The deployment occupies the nodes that hold its workers; its GPU count is its workers' (the rest
of its last node stays free for other work), and per-GPU figures divide by the GPUs used.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscale.errors import require


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    """``workers`` workers of one pool, each ``tp x pp`` GPUs; ``field`` names the argument a
    refusal points at."""

    pool: str
    workers: int
    tp: int
    pp: int = 1
    field: str = "tp"

    @property
    def worker_gpus(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """``per_node`` workers of ``pool`` on each of nodes ``first .. first + nodes - 1``; a worker
    larger than a node is one run of its own, ``per_node`` 0 and ``nodes`` its span."""

    pool: str
    first: int
    nodes: int
    per_node: int
    worker_gpus: int

    @property
    def workers(self) -> int:
        return self.nodes * self.per_node if self.per_node else 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Placement:
    gpus_per_node: int
    runs: tuple[Run, ...]

    @property
    def gpus(self) -> int:
        """GPUs the workers use (the figure per-GPU throughput and cost divide by)."""
        return sum(r.workers * r.worker_gpus for r in self.runs)

    @property
    def nodes(self) -> int:
        """Nodes holding at least one worker (they are numbered from 0 without gaps)."""
        return max((r.first + r.nodes for r in self.runs), default=0)

    def nodes_of(self, pool: str) -> int:
        """Nodes holding at least one worker of ``pool``."""
        held: set[int] = set()
        for r in self.runs:
            if r.pool == pool:
                held.update(range(r.first, r.first + r.nodes))
        return len(held)

    def workers(self, pool: str) -> int:
        return sum(r.workers for r in self.runs if r.pool == pool)

    def same_node_share(self, a: str, b: str) -> float:
        """Share of (``a`` worker, ``b`` worker) pairs inside one node: a request routed
        uniformly over the workers of each pool (Dynamo's router, SGLang's mini load balancer
        without cache hits) hands its KV from ``a`` to ``b`` over NVLink that often. A worker
        spanning nodes shares none with another (it holds its nodes whole)."""
        total = self.workers(a) * self.workers(b)
        if total == 0:
            return 0.0
        same = 0
        for x in self.runs:
            for y in self.runs:
                if x.pool != a or y.pool != b or not x.per_node or not y.per_node:
                    continue
                lo, hi = max(x.first, y.first), min(x.first + x.nodes, y.first + y.nodes)
                same += max(hi - lo, 0) * x.per_node * y.per_node
        return same / total


def placeable(tp: int, pp: int, gpus_per_node: int) -> bool:
    """Whether a worker of ``tp x pp`` GPUs has a place on ``gpus_per_node``-GPU nodes
    (:func:`check_worker`)."""
    n, size = gpus_per_node, tp * pp
    return size <= n or (size % n == 0 and (tp % n == 0 or n % tp == 0))


def check_worker(group: Group, gpus_per_node: int) -> None:
    """Refuse a worker no placement on ``gpus_per_node``-GPU nodes holds: one larger than a
    node must span whole nodes, and none of its pipeline stages may straddle a node boundary."""
    n, t, size = gpus_per_node, group.tp, group.worker_gpus
    require(
        placeable(t, group.pp, n),
        f"{'a replica' if group.pool == 'replica' else f'a {group.pool} worker'} of {size} "
        f"GPUs (TP{t}"
        + (f" x PP{group.pp}" if group.pp > 1 else "")
        + f") cannot be placed on {n}-GPU nodes: a worker larger than a node spans whole nodes "
        f"with no stage across a node boundary; accepted: at most {n} GPUs per worker, or a "
        f"multiple of {n} whose TP divides {n} or is a multiple of it (--gpus-per-node sets "
        "the node)",
        field=group.field,
    )


def place(groups: Sequence[Group], gpus_per_node: int) -> Placement:
    """The workers of ``groups`` on ``gpus_per_node``-GPU nodes, first-fit by decreasing worker
    size (module docstring). Identical workers are placed a node at a time, so a deployment of a
    million single-GPU workers costs a few runs, not a million steps."""
    n = gpus_per_node
    for g in groups:
        check_worker(g, n)
    # stable: prefill before decode at equal size, in the order given
    order = sorted((g for g in groups if g.workers > 0), key=lambda g: -g.worker_gpus)
    runs: list[Run] = []
    partial: list[list[int]] = []  # [node, free GPUs] of nodes with room left, oldest first
    nodes = 0
    for g in order:
        size, left = g.worker_gpus, g.workers
        if size > n:
            span = size // n
            for _ in range(left):
                runs.append(Run(pool=g.pool, first=nodes, nodes=span, per_node=0, worker_gpus=size))
                nodes += span
            continue
        for slot in partial:
            take = min(left, slot[1] // size)
            if take:
                runs.append(Run(pool=g.pool, first=slot[0], nodes=1, per_node=take,
                                worker_gpus=size))  # fmt: skip
                slot[1] -= take * size
                left -= take
        partial = [slot for slot in partial if slot[1] > 0]
        per = n // size
        full, rest = divmod(left, per)
        if full:
            runs.append(Run(pool=g.pool, first=nodes, nodes=full, per_node=per, worker_gpus=size))
            if n - per * size:
                partial.extend([node, n - per * size] for node in range(nodes, nodes + full))
            nodes += full
        if rest:
            runs.append(Run(pool=g.pool, first=nodes, nodes=1, per_node=rest, worker_gpus=size))
            partial.append([nodes, n - rest * size])
            nodes += 1
    return Placement(gpus_per_node=n, runs=tuple(runs))
