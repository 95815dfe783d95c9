"""Typed measurement records shared by the benchmarks, the nccl-tests importer and calibration.

They serialise to plain JSON (``to_dict``/``from_dict``) with a ``kind`` tag, so ``gpuscale
calibrate --from FILE`` can read what ``gpuscale bench ... --json`` printed on another machine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from gpuscale.errors import InputError

COLLECTIVES_KIND = "gpuscale.bench.collectives"
MATMUL_KIND = "gpuscale.bench.matmul"

Level = str
"""``intra`` (ranks of one node) or ``inter`` (the group crosses nodes)."""

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveSample:
    """One row of a collective sweep, in nccl-tests' terms and units (doc/PERFORMANCE.md)."""

    op: str
    """``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``, ``all_to_all``,
    ``send_recv`` (``reduce``, ``gather``, ``scatter`` only from imported logs)."""
    level: Level
    ranks: int
    """Ranks in the group that ran the collective."""
    ranks_per_node: int
    """How many of those ranks share a node (``ranks`` for a single-node group)."""
    size_bytes: int
    """The whole buffer as nccl-tests sizes it (all ranks' data for gathers and scatters)."""
    count: int
    dtype: str
    time_us: float
    """Mean time of one collective (nccl-tests' ``time``)."""
    algbw_gb_per_s: float
    busbw_gb_per_s: float
    p50_us: float | None = None
    p99_us: float | None = None
    cv: float | None = None
    """Coefficient of variation over iterations; ``None`` where the source has no per-iteration
    times (nccl-tests without ``-I``)."""
    wrong: int | None = None
    """Elements with a wrong value (nccl-tests ``#wrong``); ``None`` where not checked."""
    in_place: bool = False

    @property
    def valid(self) -> bool:
        return not self.wrong


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveRun:
    """A collective sweep and where it ran."""

    samples: tuple[CollectiveSample, ...]
    backend: str
    world_size: int
    nodes: int
    ranks_per_node: int
    device: str
    """What the ranks ran on (``cpu``, or the GPU name)."""
    host: str
    started: str
    """ISO-8601 UTC start time."""
    software: str = ""
    """torch / NCCL / nccl-tests versions, as known."""
    command: str = ""
    notes: tuple[str, ...] = ()
    """Assumptions and caveats (simulated nodes, inferred levels...)."""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": COLLECTIVES_KIND, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> CollectiveRun:
        body = _fields_of(cls, data, where)
        body["samples"] = tuple(
            _build(CollectiveSample, s, where) for s in data.get("samples") or ()
        )
        body["notes"] = tuple(str(n) for n in data.get("notes") or ())
        return _construct(cls, body, where)


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmSample:
    """One GEMM shape: ``(m, k) @ (k, n)``."""

    m: int
    n: int
    k: int
    dtype: str
    time_us: float
    """Mean time of one matmul."""
    tflops: float
    """Achieved TFLOP/s, counting ``2*m*n*k`` FLOPs."""
    cv: float = 0.0

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmRun:
    samples: tuple[GemmSample, ...]
    device: str
    """``cpu`` or the GPU name as the driver reports it."""
    gpu_id: str | None
    """Catalog id of the GPU, when known (``--gpu`` or recognised from the name)."""
    host: str
    started: str
    software: str = ""
    command: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    device_type: str = ""
    """torch's device type, ``cpu`` or ``cuda`` (empty in files written before it existed)."""

    @property
    def on_cpu(self) -> bool:
        if self.device_type:
            return self.device_type == "cpu"
        return any(n.startswith("CPU run") for n in self.notes)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": MATMUL_KIND, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str) -> GemmRun:
        body = _fields_of(cls, data, where)
        body["samples"] = tuple(_build(GemmSample, s, where) for s in data.get("samples") or ())
        body["notes"] = tuple(str(n) for n in data.get("notes") or ())
        return _construct(cls, body, where)


def _construct(cls: type[T], body: dict[str, Any], where: str) -> T:
    try:
        return cls(**body)
    except TypeError as exc:
        raise InputError(f"{where}: malformed gpuscale benchmark file ({exc})") from None


def _fields_of(cls: type, data: Mapping[str, Any], where: str) -> dict[str, Any]:
    names = {f.name for f in fields(cls)} - {"samples", "notes"}
    return {k: v for k, v in data.items() if k in names}


def _build(cls: type[T], raw: Any, where: str) -> T:
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: each sample must be a JSON object")
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    sample = _construct(cls, {k: v for k, v in raw.items() if k in names}, where)
    # Python's json reads NaN and -Infinity; a time that is not a positive finite number is a
    # corrupted file (the fit divides by it), not a sample.
    t = getattr(sample, "time_us", None)
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
        raise InputError(
            f"{where}: a sample's time_us {t!r} is not a measurement; accepted: a finite "
            "time above zero"
        )
    return sample
