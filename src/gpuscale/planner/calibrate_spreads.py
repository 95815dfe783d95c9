"""The prior spreads of ``calibrate run``, computed from published per-stack figures.

``catalog/data/calibration_priors.yaml`` holds, for each fitted quantity, groups of published
figures: one group is one thing (an op, a GEMM shape, a collective) measured on one GPU under one
protocol by several software stacks. A quantity's spread is the pooled within-group sample
standard deviation of the figures' logs (the one-way ANOVA error mean square, e.g. Montgomery,
*Design and Analysis of Experiments*, Ch. 3): differences between groups (GPUs, shapes, ops),
which the profile's own curves describe, do not count; differences between stacks do.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from gpuscale.catalog import calibration_priors


def pooled_log_sd(groups: Iterable[Mapping[str, float]]) -> float:
    """Pooled sample standard deviation of ``ln(figure)`` within groups (each a mapping of stack
    to a positive figure): ``sqrt(sum of squared deviations from each group's mean log / sum of
    (n_g - 1))``. A group of one figure adds nothing; with none of two or more it is undefined."""
    squares, freedom = 0.0, 0
    for group in groups:
        values = list(group.values())
        if any(isinstance(v, bool) or not isinstance(v, int | float) for v in values):
            raise ValueError(f"a spread needs each figure as a number, got {values}")
        if any(not (v > 0 and math.isfinite(v)) for v in values):
            raise ValueError(f"a spread needs positive finite figures, got {values}")
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        squares += sum((x - mean) ** 2 for x in logs)
        freedom += len(logs) - 1
    if freedom == 0:
        raise ValueError("a spread needs a group of at least two stacks' figures")
    return math.sqrt(squares / freedom)


def sourced_spreads(document: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Each quantity's prior spread (log scale, one SD) from its published groups, in the
    document's order; ``document`` defaults to the shipped ``calibration_priors.yaml``."""
    data = calibration_priors() if document is None else document
    return {
        name: pooled_log_sd(group["figures"] for group in entry["groups"])
        for name, entry in data["quantities"].items()
    }
