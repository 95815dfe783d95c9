"""Collective time distribution per operation and message size, across ranks.

A collective's duration on one rank includes waiting for the others to arrive. For each call,
matched across ranks by (op, size, step, order within the step), the shortest duration is the
transfer itself (the last rank to arrive waits for nobody) and the rest is arrival skew. Jitter
is judged on the transfer time, so a straggler does not pass for a noisy network.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpuscale.measure.trace.intervals import Intervals
from gpuscale.measure.trace.timeline import CollectiveCall

CallKey = tuple[str, int | None, int, int]
"""(op, bytes, step index or -1, order of this call among equal (op, bytes) in the step)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveStats:
    op: str
    bytes: int | None
    calls: int
    """Calls seen on every rank."""
    per_step: float
    """Calls per step (over the steps in which this collective ran)."""
    mean_s: float
    median_s: float
    p99_s: float
    cv: float
    """Coefficient of variation (std / mean) of the transfer time."""
    wait_mean_s: float
    """Mean time a rank spent waiting for the last one to arrive (0 with one rank)."""

    @property
    def algbw_gb_per_s(self) -> float | None:
        """Message bytes over mean transfer time (algorithm bandwidth, nccl-tests' ``algbw``)."""
        if self.bytes is None or self.mean_s <= 0:
            return None
        return self.bytes / self.mean_s / 1e9


def keyed(calls: Sequence[CollectiveCall], windows: Intervals) -> dict[CallKey, float]:
    """Each call of one rank under its cross-rank matching key, with its duration."""
    out: dict[CallKey, float] = {}
    seen: dict[tuple[str, int | None, int], int] = defaultdict(int)
    starts = np.array([c.start_s for c in calls])
    if len(windows) and len(calls):
        idx = np.searchsorted(windows.starts, starts, side="right") - 1
        inside = (idx >= 0) & (windows.ends[np.clip(idx, 0, None)] > starts)
        step = np.where(inside, idx, -1)
    else:
        step = np.full(len(calls), -1)
    for call, s in zip(calls, step, strict=True):
        group = (call.op, call.bytes, int(s))
        out[(call.op, call.bytes, int(s), seen[group])] = call.duration_s
        seen[group] += 1
    return out


def distribution(per_rank: Mapping[int, dict[CallKey, float]]) -> list[CollectiveStats]:
    """Statistics per (op, bytes) over the calls every rank recorded."""
    ranks = list(per_rank.values())
    if not ranks:
        return []
    common = set(ranks[0]).intersection(*ranks[1:])
    groups: dict[tuple[str, int | None], list[CallKey]] = defaultdict(list)
    for key in common:
        groups[(key[0], key[1])].append(key)
    out = []
    for (op, size), keys in groups.items():
        durations = np.array([[r[k] for r in ranks] for k in keys])
        transfer = durations.min(axis=1)
        wait = (durations - transfer[:, None]).mean(axis=1)
        mean = float(transfer.mean())
        out.append(
            CollectiveStats(
                op=op,
                bytes=size,
                calls=len(keys),
                per_step=len(keys) / max(1, len({k[2] for k in keys})),
                mean_s=mean,
                median_s=float(np.median(transfer)),
                p99_s=float(np.percentile(transfer, 99)),
                cv=float(transfer.std() / mean) if mean > 0 else 0.0,
                wait_mean_s=float(wait.mean()),
            )
        )
    out.sort(key=lambda s: (s.op, -1 if s.bytes is None else s.bytes))
    return out
