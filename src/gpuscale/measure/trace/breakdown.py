"""Per-step time breakdown of one rank: where the device's wall time went.

Each step window is split into parts that add up to the step time, with C = device compute,
M = communication, D = data loading (host), O = optimizer (host)::

    optimizer     C and O          device work while the host runs Optimizer.step
    compute       C and not O      (communication overlapped with it is hidden, so counted here)
    exposed_comm  M and not C      communication nothing overlaps: the step waits for it
    data_wait     D, not C, not M  the device idles while the data loader runs
    idle          none of them     launch gaps, host overhead, pipeline bubbles

``overlapped_comm`` (M and C) is reported beside the split. The overlap ratio
``overlapped / (overlapped + exposed)`` is HTA's ``comp_comm_overlap`` on GPU traces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscale.measure.trace.intervals import segment
from gpuscale.measure.trace.timeline import RankTimeline

PARTS = ("compute", "optimizer", "exposed_comm", "data_wait", "idle")
"""The components that add up to the step time, in display order."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StepBreakdown:
    """Arrays over the steps of one rank (seconds)."""

    steps: tuple[int, ...]
    step_s: np.ndarray
    compute_s: np.ndarray
    optimizer_s: np.ndarray
    exposed_comm_s: np.ndarray
    data_wait_s: np.ndarray
    idle_s: np.ndarray
    overlapped_comm_s: np.ndarray

    def part(self, name: str) -> np.ndarray:
        value: np.ndarray = getattr(self, f"{name}_s")
        return value

    @property
    def busy_s(self) -> np.ndarray:
        """Device work per step (compute and optimizer): what a straggler has more of."""
        return self.compute_s + self.optimizer_s

    def share(self, name: str) -> float:
        """Fraction of all step time spent in ``name`` (time-weighted over steps)."""
        total = float(self.step_s.sum())
        return float(self.part(name).sum()) / total if total > 0 else 0.0

    def median_share(self, name: str) -> float:
        """Share of ``name`` in the median step: what a typical step looks like, unmoved by a
        one-off stall (a page fault, a checkpoint, a preempted host thread)."""
        keep = self.step_s > 0
        if not keep.any():
            return 0.0
        return float(np.median(self.part(name)[keep] / self.step_s[keep]))

    @property
    def overlap_ratio(self) -> float | None:
        """Fraction of communication time hidden under compute (None without communication)."""
        comm = float(self.overlapped_comm_s.sum() + self.exposed_comm_s.sum())
        return float(self.overlapped_comm_s.sum()) / comm if comm > 0 else None


def breakdown(timeline: RankTimeline) -> StepBreakdown:
    segs = segment(
        (timeline.compute, timeline.comm, timeline.data, timeline.optimizer), timeline.windows
    )
    return StepBreakdown(
        steps=timeline.steps or (0,) * len(timeline.windows),
        step_s=timeline.windows.ends - timeline.windows.starts,
        compute_s=segs.per_window(lambda c, m, d, o: c & ~o),
        optimizer_s=segs.per_window(lambda c, m, d, o: c & o),
        exposed_comm_s=segs.per_window(lambda c, m, d, o: m & ~c),
        data_wait_s=segs.per_window(lambda c, m, d, o: d & ~c & ~m),
        idle_s=segs.per_window(lambda c, m, d, o: ~c & ~m & ~d),
        overlapped_comm_s=segs.per_window(lambda c, m, d, o: m & c),
    )


def median_kernel_s(hist: np.ndarray, edges: np.ndarray) -> float | None:
    """Median kernel duration from a log-binned histogram (geometric bin centre)."""
    total = int(hist.sum())
    if total == 0:
        return None
    k = int(np.searchsorted(np.cumsum(hist), total / 2))
    lo = edges[k - 1] if k >= 1 else edges[0] / 10
    hi = edges[k] if k < len(edges) else edges[-1] * 10
    return float(np.sqrt(lo * hi))
