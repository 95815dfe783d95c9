"""Collective benchmark in the manner of nccl-tests, on ``torch.distributed``.

Each rank times every iteration of every (level, op, size); the per-iteration times are then
reduced with MAX over ranks, because a collective is only done when its slowest rank is (as
nccl-tests' ``-I`` report does: "i_* uses max over process rows"). Sizes, counts, algbw and busbw
follow nccl-tests (doc/PERFORMANCE.md): ``size`` is the whole buffer, ``count`` the elements per
rank for gathers, scatters and all-to-all.

With ``group_by_node`` the two levels of the topology are measured separately and concurrently,
like the process groups of a real job: ``intra`` groups are the ranks of one node (tensor
parallelism's shape), ``inter`` groups take one rank from every node (the rails that data
parallelism uses across nodes).
"""

from __future__ import annotations

import math
import os
import platform
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from gpuscale.costmodel.collectives import OPS, bus_factor
from gpuscale.errors import InputError, require
from gpuscale.measure.results import CollectiveRun, CollectiveSample
from gpuscale.measure.stats import jitter
from gpuscale.measure.timing import time_calls

if TYPE_CHECKING:
    from gpuscale.measure.worker import Channel

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int8": 1}
DTYPES = tuple(ELEMENT_BYTES)
BACKENDS = ("auto", "gloo", "nccl")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """``8``, ``64K``, ``128M``, ``1G`` (binary units, as nccl-tests' ``-b``/``-e``)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)(?:i?B)?\s*", text, flags=re.IGNORECASE)
    if not m:
        raise InputError(
            f"size '{text}' is not understood; accepted: bytes with an optional K, M or G "
            "suffix (e.g. 8, 64K, 128M)"
        )
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_sizes(text: str, factor: float = 2.0) -> list[int]:
    """``MIN:MAX`` swept by ``factor`` (nccl-tests ``-b MIN -e MAX -f FACTOR``), or a comma list."""
    require(
        math.isfinite(factor) and factor > 1,
        f"--factor must be a finite number > 1, got {factor:g}; accepted: e.g. 2 (doubling)",
    )
    try:
        return _sweep(text, factor)
    except InputError as exc:
        raise InputError(f"--sizes '{text}': {exc}") from None


def _sweep(text: str, factor: float) -> list[int]:
    require(bool(text.strip()), "empty; accepted: MIN:MAX or a comma list of sizes")
    if ":" not in text:
        items = text.split(",")
        require(all(i.strip() for i in items), "an empty item; accepted: a comma list of sizes")
        sizes = sorted({parse_size(s) for s in items})
    else:
        lo_text, hi_text = text.split(":", 1)
        lo, hi = parse_size(lo_text), parse_size(hi_text)
        require(0 < lo <= hi, "MIN must be > 0 and <= MAX; accepted: e.g. 8:128M")
        sizes, s = [], float(lo)
        while s <= hi * (1 + 1e-9):
            sizes.append(round(s))
            s *= factor
    require(
        bool(sizes) and all(s > 0 for s in sizes), "a size of 0; accepted: sizes of 1 byte or more"
    )
    require(
        len(sizes) <= 64,
        f"{len(sizes)} sizes; accepted: at most 64 (raise --factor or narrow MIN:MAX)",
    )
    return sizes


def whole_elements(sizes: Sequence[int], dtype: str) -> tuple[list[int], str]:
    """Sizes rounded down to whole elements of ``dtype`` (at least one), as the ranks will run
    them, with duplicates merged; and what was merged, for a warning (nccl-tests also sizes its
    buffers in elements)."""
    elem = ELEMENT_BYTES[dtype]
    out: dict[int, list[int]] = {}
    for size in sizes:
        out.setdefault(max(elem, size // elem * elem), []).append(size)
    merged = [
        f"{', '.join(f'{s} B' for s in given)} run as {actual} B"
        for actual, given in out.items()
        if given != [actual]
    ]
    note = f"sizes are whole {dtype} elements ({elem} B): {'; '.join(merged)}" if merged else ""
    return sorted(out), note


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveConfig:
    """What every rank runs; travels to the ranks as JSON."""

    ops: tuple[str, ...] = OPS
    sizes: tuple[int, ...] = (8, 1024, 2**20)
    iters: int = 20
    warmup: int = 5
    dtype: str = "float32"
    backend: str = "auto"
    timeout_s: float = 60.0
    group_by_node: bool = False
    ranks_per_node: int | None = None
    """Pretend every ``ranks_per_node`` consecutive ranks are one node (to try the two-level
    measurement on one machine); default: group ranks by host name."""
    init_method: str | None = None
    command: str = ""

    def __post_init__(self) -> None:
        for op in self.ops:
            require(op in OPS, f"unknown collective '{op}'; known: {', '.join(OPS)}")
        require(self.dtype in DTYPES, f"unknown dtype '{self.dtype}'; known: {', '.join(DTYPES)}")
        require(
            self.backend in BACKENDS,
            f"unknown backend '{self.backend}'; known: {', '.join(BACKENDS)}",
        )
        require(self.iters >= 1, f"--iters must be >= 1, got {self.iters}; accepted: e.g. 20")
        require(self.warmup >= 0, f"--warmup must be >= 0, got {self.warmup}; accepted: e.g. 5")
        require(
            math.isfinite(self.timeout_s) and self.timeout_s > 0,
            f"--timeout must be a finite number of seconds > 0, got {self.timeout_s:g}; "
            "accepted: e.g. 120",
        )
        require(
            self.ranks_per_node is None or self.ranks_per_node >= 1,
            f"--ranks-per-node must be >= 1, got {self.ranks_per_node}; accepted: a divisor "
            "of the ranks",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "collectives",
            "ops": list(self.ops),
            "sizes": list(self.sizes),
            "iters": self.iters,
            "warmup": self.warmup,
            "dtype": self.dtype,
            "backend": self.backend,
            "timeout_s": self.timeout_s,
            "group_by_node": self.group_by_node,
            "ranks_per_node": self.ranks_per_node,
            "init_method": self.init_method,
            "command": self.command,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CollectiveConfig:
        return cls(
            ops=tuple(data["ops"]),
            sizes=tuple(int(s) for s in data["sizes"]),
            iters=int(data["iters"]),
            warmup=int(data["warmup"]),
            dtype=str(data["dtype"]),
            backend=str(data["backend"]),
            timeout_s=float(data["timeout_s"]),
            group_by_node=bool(data["group_by_node"]),
            ranks_per_node=data.get("ranks_per_node"),
            init_method=data.get("init_method"),
            command=str(data.get("command", "")),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class LevelGroup:
    """The group this rank measures a level in."""

    level: str
    ranks: tuple[int, ...]
    ranks_per_node: int
    handle: Any = field(default=None, compare=False)


def node_layout(hosts: Sequence[str], ranks_per_node: int | None) -> list[list[int]]:
    """Global ranks of each node, in node order."""
    world = len(hosts)
    if ranks_per_node:
        require(
            world % ranks_per_node == 0,
            f"--ranks-per-node {ranks_per_node} does not divide the {world} ranks",
        )
        return [list(range(i, i + ranks_per_node)) for i in range(0, world, ranks_per_node)]
    order = list(dict.fromkeys(hosts))
    return [[r for r, h in enumerate(hosts) if h == host] for host in order]


def plan_levels(
    layout: Sequence[Sequence[int]], group_by_node: bool
) -> list[tuple[str, list[list[int]], int]]:
    """``(level, groups, ranks_per_node)`` to measure; every rank is in one group per level."""
    per_node = max(len(node) for node in layout)
    if not group_by_node:
        world = sorted(r for node in layout for r in node)
        return [("intra" if len(layout) == 1 else "inter", [world], per_node)]
    require(
        len({len(node) for node in layout}) == 1,
        f"--group-by-node needs the same number of ranks on every node, got "
        f"{[len(n) for n in layout]}",
    )
    levels: list[tuple[str, list[list[int]], int]] = []
    if per_node > 1:
        levels.append(("intra", [list(node) for node in layout], per_node))
    if len(layout) > 1:
        levels.append(("inter", [[node[j] for node in layout] for j in range(per_node)], 1))
    require(bool(levels), "--group-by-node with one rank: nothing to measure")
    return levels


def _resolve_backend(name: str) -> str:
    import torch
    import torch.distributed as dist

    if name == "auto":
        return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if name == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise InputError("--backend nccl needs CUDA GPUs and a torch built with NCCL; use gloo")
    return name


_WHOLE_BUFFER_OPS = ("all_reduce", "broadcast", "send_recv")
"""Ops whose every rank holds the whole buffer; the others split it into one chunk per rank."""


def actual_size(op: str, size: int, elem: int, ranks: int) -> tuple[int, int]:
    """``(bytes, count)`` that a requested size runs as: whole elements, and for gathers,
    scatters and all-to-all whole elements per rank (at least one), as nccl-tests sizes them."""
    if op in _WHOLE_BUFFER_OPS:
        count = max(1, size // elem)
        return count * elem, count
    count = max(1, size // (elem * ranks))
    return count * ranks * elem, count


def _make_op(
    op: str, size: int, dtype: Any, group: Any, ranks: Sequence[int], device: Any
) -> tuple[Callable[[], None], int, int]:
    """The collective as a closure over its buffers, with its actual size and count."""
    import torch
    import torch.distributed as dist

    n = len(ranks)
    elem = torch.empty((), dtype=dtype).element_size()
    actual, count = actual_size(op, size, elem, n)

    def zeros(k: int) -> Any:
        return torch.zeros(k, dtype=dtype, device=device)

    if op in _WHOLE_BUFFER_OPS:
        buf = zeros(count)
        if op == "all_reduce":
            return (lambda: dist.all_reduce(buf, group=group)), actual, count
        if op == "broadcast":
            return (lambda: dist.broadcast(buf, src=ranks[0], group=group)), actual, count
        me = ranks.index(dist.get_rank())
        recv = zeros(count)
        nxt, prv = ranks[(me + 1) % n], ranks[(me - 1) % n]

        def send_recv() -> None:
            reqs = dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, buf, nxt, group), dist.P2POp(dist.irecv, recv, prv, group)]
            )
            for req in reqs:
                req.wait()

        return send_recv, actual, count
    inp, out = (
        zeros(count if op == "all_gather" else count * n),
        zeros(count * n if op != "reduce_scatter" else count),
    )
    if op == "all_gather":
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return (lambda: gather(out, inp, group=group)), actual, count
    if op == "reduce_scatter":
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return (lambda: scatter(out, inp, group=group)), actual, count
    return (lambda: dist.all_to_all_single(out, inp, group=group)), actual, count


def run_rank(
    cfg: CollectiveConfig,
    channel: Channel | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> CollectiveRun | None:
    """Run the sweep as this process's rank (``RANK``/``WORLD_SIZE`` in the environment, as
    the launcher and torchrun set them); rank 0 returns the run, the others ``None``."""
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = _resolve_backend(cfg.backend)
    device = torch.device("cuda", local_rank) if backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    dist.init_process_group(
        backend,
        init_method=cfg.init_method or "env://",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=cfg.timeout_s),
    )
    hosts: list[Any] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    layout = node_layout([str(h) for h in hosts], cfg.ranks_per_node)
    levels = plan_levels(layout, cfg.group_by_node)
    mine: list[LevelGroup] = []
    for level, groups, per_node in levels:
        for ranks in groups:
            # every rank creates every group, in the same order (torch.distributed.new_group)
            handle = dist.new_group(ranks) if len(ranks) < world else dist.group.WORLD
            if rank in ranks:
                mine.append(
                    LevelGroup(
                        level=level, ranks=tuple(ranks), ranks_per_node=per_node, handle=handle
                    )
                )
    dtype = getattr(torch, cfg.dtype)
    total = len(mine) * len(cfg.ops) * len(cfg.sizes)
    done = 0
    samples: list[CollectiveSample] = []
    elem = ELEMENT_BYTES[cfg.dtype]
    repeats: dict[str, int] = {}
    for grp in mine:
        for op in cfg.ops:
            measured: set[int] = set()
            for size in cfg.sizes:
                actual, _ = actual_size(op, size, elem, len(grp.ranks))
                if actual in measured:
                    # every rank skips the same sizes: the loop stays in step across ranks
                    repeats[op] = repeats.get(op, 0) + 1
                    done += 1
                    continue
                measured.add(actual)
                fn, actual, count = _make_op(op, size, dtype, grp.handle, grp.ranks, device)
                local = torch.tensor(
                    time_calls(fn, cfg.iters, device, cfg.warmup),
                    dtype=torch.float64,
                    device=device,
                )
                dist.all_reduce(local, op=dist.ReduceOp.MAX)
                done += 1
                if channel is not None:
                    channel.send("progress", done=done, total=total)
                if on_progress is not None and rank == 0:
                    on_progress(done, total)
                if rank == 0:
                    samples.append(_sample(op, grp, actual, count, cfg.dtype, local.tolist()))
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return None
    nodes = len(layout)
    notes = []
    if cfg.ranks_per_node:
        notes.append(
            f"nodes simulated: every {cfg.ranks_per_node} ranks on this host count as "
            "one node, so 'inter' is not a network measurement"
        )
    if device.type == "cpu":
        notes.append("gloo on CPU: host-memory and loopback numbers, not a GPU interconnect")
    if repeats:
        notes.append(
            "sizes below one element per rank run as the same buffer and were measured once: "
            + ", ".join(f"{op} ({k} repeats)" for op, k in repeats.items())
        )
    software = f"torch {torch.__version__}"
    if backend == "nccl":
        software += f", NCCL {'.'.join(str(v) for v in torch.cuda.nccl.version())}"
    return CollectiveRun(
        samples=tuple(samples),
        backend=backend,
        world_size=world,
        nodes=nodes,
        ranks_per_node=max(len(n) for n in layout),
        device=torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else (platform.processor() or platform.machine() or "cpu"),
        host=socket.gethostname(),
        started=started,
        software=software,
        command=cfg.command,
        notes=tuple(notes),
    )


def _sample(
    op: str, grp: LevelGroup, size: int, count: int, dtype: str, times_s: list[float]
) -> CollectiveSample:
    j = jitter(times_s)
    n = len(grp.ranks)
    algbw = size / j.mean_s / 1e9 if j.mean_s > 0 else 0.0
    return CollectiveSample(
        op=op,
        level=grp.level,
        ranks=n,
        ranks_per_node=min(grp.ranks_per_node, n),
        size_bytes=size,
        count=count,
        dtype=dtype,
        time_us=j.mean_s * 1e6,
        algbw_gb_per_s=algbw,
        busbw_gb_per_s=algbw * float(bus_factor(op, n)),
        p50_us=j.p50_s * 1e6,
        p99_us=j.p99_s * 1e6,
        cv=j.cv,
    )
