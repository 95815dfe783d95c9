"""One summary of a validation's relative errors (predicted / measured - 1), shared by every
held-out comparison that reports mean, median, bias and the share within 20%."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    mape: float
    """Mean absolute error."""
    median_abs: float
    median_bias: float
    """Median signed error (positive: the model predicts more than measured)."""
    within_20: float
    """Share of the rows within 20%."""


def error_summary(errors: Iterable[float]) -> Summary:
    """The summary of relative errors (NaN figures when there are none)."""
    errs = list(errors)
    if not errs:
        return Summary(0, float("nan"), float("nan"), float("nan"), float("nan"))
    absolute = [abs(e) for e in errs]
    return Summary(
        n=len(errs),
        mape=statistics.fmean(absolute),
        median_abs=statistics.median(absolute),
        median_bias=statistics.median(errs),
        within_20=sum(a <= 0.20 for a in absolute) / len(absolute),
    )
