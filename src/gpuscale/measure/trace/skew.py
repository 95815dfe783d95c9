"""Rank skew: is one rank's device work consistently slower than the others'?

Synchronous data parallelism runs at the pace of the slowest rank; the others show the gap as
communication wait. So the comparison is on busy device time per step (compute and optimizer),
which waiting does not inflate, step by step over the steps every rank recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gpuscale.measure.trace.breakdown import StepBreakdown


@dataclass(frozen=True, kw_only=True, slots=True)
class Skew:
    steps: int
    """Steps recorded by every rank."""
    busy_median_s: dict[int, float]
    """Median busy time per step, per rank."""
    slowest_rank: int
    slowest_share: float
    """Fraction of the steps in which ``slowest_rank`` had the most device work."""
    excess: float
    """Median over steps of ``slowest_rank``'s busy time over the median of the other ranks,
    minus one (0.25: a quarter more work per step)."""
    excess_s: float
    """Median extra busy seconds per step of ``slowest_rank`` over the others' median."""


def skew(per_rank: Mapping[int, StepBreakdown]) -> Skew | None:
    """None with fewer than two ranks or no step in common."""
    if len(per_rank) < 2:
        return None
    ranks = sorted(per_rank)
    common = sorted(
        set(per_rank[ranks[0]].steps).intersection(*(per_rank[r].steps for r in ranks[1:]))
    )
    if not common:
        return None
    position = {r: {s: i for i, s in enumerate(per_rank[r].steps)} for r in ranks}
    busy = np.array([[per_rank[r].busy_s[position[r][s]] for s in common] for r in ranks])
    slowest_each = busy.argmax(axis=0)
    counts = np.bincount(slowest_each, minlength=len(ranks))
    worst = int(counts.argmax())
    others = np.delete(busy, worst, axis=0)
    reference = np.median(others, axis=0)
    ratio = np.divide(busy[worst], reference, out=np.ones_like(reference), where=reference > 0)
    return Skew(
        steps=len(common),
        busy_median_s={r: float(np.median(busy[i])) for i, r in enumerate(ranks)},
        slowest_rank=ranks[worst],
        slowest_share=float(counts[worst] / len(common)),
        excess=float(np.median(ratio) - 1),
        excess_s=float(np.median(busy[worst] - reference)),
    )
