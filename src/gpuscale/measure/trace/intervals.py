"""Interval arithmetic on timelines: unions built online, then set algebra per step window.

A trace is reduced to a few *sets of time* per rank (device compute, communication, data loading,
optimizer). Each set is kept as sorted, disjoint ``[start, end)`` intervals, so nested CPU ops
and back-to-back kernels collapse as they arrive and memory follows the merged busy intervals,
not the event count. Overlap and exposure are then lengths of boolean combinations of the sets,
summed per step window (the same sweep as HTA's ``get_comm_comp_overlap``, vectorised).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

_FLUSH_AT = 1 << 15
"""Pending intervals merged into the union at once: large enough to amortise the sort, small
enough that the buffer stays a few hundred kB."""


@dataclass(frozen=True, slots=True)
class Intervals:
    """Sorted, disjoint, non-empty ``[start, end)`` intervals (seconds)."""

    starts: np.ndarray
    ends: np.ndarray

    @staticmethod
    def empty() -> Intervals:
        return Intervals(np.empty(0), np.empty(0))

    @staticmethod
    def of(pairs: Sequence[tuple[float, float]]) -> Intervals:
        """Union of arbitrary (possibly overlapping, unsorted) ``(start, end)`` pairs."""
        if not pairs:
            return Intervals.empty()
        arr = np.asarray(pairs, dtype=float)
        return merge(arr[:, 0], arr[:, 1])

    @property
    def total(self) -> float:
        return float(np.sum(self.ends - self.starts))

    def __len__(self) -> int:
        return len(self.starts)

    def covers(self, points: np.ndarray) -> np.ndarray:
        """Boolean mask: which ``points`` lie inside one of the intervals."""
        if len(self) == 0:
            return np.zeros(len(points), dtype=bool)
        idx = np.searchsorted(self.starts, points, side="right") - 1
        inside = idx >= 0
        inside[inside] = self.ends[idx[inside]] > points[inside]
        return inside


def merge(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Union of intervals given as two arrays; empty and inverted intervals are dropped."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if len(starts) == 0:
        return Intervals.empty()
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    # A new group starts where an interval begins after everything before it has ended.
    first = np.ones(len(starts), dtype=bool)
    first[1:] = starts[1:] > reach[:-1]
    group_starts = starts[first]
    last = np.roll(first, -1)
    last[-1] = True
    return Intervals(group_starts, reach[last])


class UnionBuilder:
    """Accumulates intervals one at a time; memory stays at the size of their union plus a
    buffer of at most a quarter of it (so merging costs O(n log n) over the whole stream)."""

    __slots__ = ("_ends", "_flush_at", "_merged", "_starts")

    def __init__(self) -> None:
        self._starts = array("d")
        self._ends = array("d")
        self._merged = Intervals.empty()
        self._flush_at = _FLUSH_AT

    def add(self, start: float, end: float) -> None:
        self._starts.append(start)
        self._ends.append(end)
        if len(self._starts) >= self._flush_at:
            self._flush()

    def _flush(self) -> None:
        if not self._starts:
            return
        self._merged = merge(
            np.concatenate([self._merged.starts, np.frombuffer(self._starts)]),
            np.concatenate([self._merged.ends, np.frombuffer(self._ends)]),
        )
        self._starts = array("d")
        self._ends = array("d")
        self._flush_at = max(_FLUSH_AT, len(self._merged) // 4)

    def build(self) -> Intervals:
        self._flush()
        return self._merged


@dataclass(frozen=True, slots=True)
class Segments:
    """The elementary pieces of a timeline cut at every boundary of a family of sets.

    ``member[k]`` says, per segment, whether set ``k`` covers it; ``window`` is the index of the
    window each segment falls in, or -1 outside all windows.
    """

    lengths: np.ndarray
    member: tuple[np.ndarray, ...]
    window: np.ndarray
    num_windows: int

    def per_window(self, predicate: Callable[..., np.ndarray]) -> np.ndarray:
        """Length of time, per window, where ``predicate(*member)`` holds."""
        mask = predicate(*self.member) & (self.window >= 0)
        return np.bincount(
            self.window[mask], weights=self.lengths[mask], minlength=self.num_windows
        )[: self.num_windows]


def segment(sets: Sequence[Intervals], windows: Intervals) -> Segments:
    """Cut the timeline at every boundary of ``sets`` and ``windows`` (sorted, disjoint)."""
    cuts = np.unique(
        np.concatenate(
            [windows.starts, windows.ends, *(s.starts for s in sets), *(s.ends for s in sets)]
        )
    )
    if len(cuts) < 2:
        return Segments(
            np.empty(0),
            tuple(np.empty(0, dtype=bool) for _ in sets),
            np.empty(0, dtype=np.intp),
            len(windows),
        )
    mids = (cuts[:-1] + cuts[1:]) / 2
    window = np.searchsorted(windows.starts, mids, side="right") - 1
    inside = window >= 0
    inside[inside] = windows.ends[window[inside]] > mids[inside]
    window[~inside] = -1
    return Segments(np.diff(cuts), tuple(s.covers(mids) for s in sets), window, len(windows))
