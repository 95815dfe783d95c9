"""Run-to-run variation of repeated timings.

The article's rule of thumb (and nccl-tests' per-iteration report, ``-I``): look at the spread of
iteration times, not only their mean. A coefficient of variation above 20% means the fabric (or a
noisy neighbour) will make synchronous training steps wait for the slowest rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

JITTER_CV_LIMIT = 0.20
"""Coefficient of variation above which a size is flagged ("network jitter: expect slow
training"); the threshold the issue and the article prescribe."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Jitter:
    """Summary of ``n`` timings of one measurement, in seconds."""

    n: int
    mean_s: float
    p50_s: float
    p99_s: float
    min_s: float
    max_s: float
    cv: float
    """Coefficient of variation: population standard deviation / mean (nccl-tests' ``i_cv%``/100)."""

    @property
    def jittery(self) -> bool:
        return self.cv > JITTER_CV_LIMIT


def _percentile(sorted_s: np.ndarray, q: int) -> float:
    # nccl-tests util.cu percentileIndex: the smallest sample with at least q% of samples at or
    # below it (nearest-rank), so p99 of 20 iterations is the slowest one, not an interpolation.
    n = sorted_s.size
    return float(sorted_s[min(n - 1, (n * q + 99) // 100 - 1)])


def jitter(times_s: Sequence[float] | np.ndarray) -> Jitter:
    """Mean, median, p99, extremes and coefficient of variation of ``times_s`` (non-empty)."""
    t = np.sort(np.asarray(times_s, dtype=float))
    if t.size == 0:
        raise ValueError("jitter of no samples")
    mean = float(t.mean())
    return Jitter(
        n=int(t.size),
        mean_s=mean,
        p50_s=float(np.median(t)),
        p99_s=_percentile(t, 99),
        min_s=float(t[0]),
        max_s=float(t[-1]),
        cv=float(t.std() / mean) if mean > 0 else 0.0,
    )
