"""Error bands from leave-one-source-out residuals, and how often they hold.

The band of a regime is the 80th percentile of ``|measured / predicted - 1|`` over its rows'
LOSO predictions (each predicted without its source), so a band says how far off the model was
on runs like this one that it had never seen. A regime needs :data:`MIN_ROWS_PER_REGIME` rows for
a band of its own; below that the lookup falls back to its parent (``hopper/fsdp/>512`` ->
``hopper/fsdp`` -> ``hopper`` -> ``overall``), whose population is wider.

Coverage is the share of rows whose measured value lies inside the band the row would be
given. ``coverage`` uses the bands from all LOSO residuals (the shipped bands);
``coverage_held_out`` rebuilds the bands without the row's source first, which is what a user
with an unseen stack gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gpuscale.costmodel.uncertainty import band_for
from gpuscale.validation.published_runs import Case, Result

MIN_ROWS_PER_REGIME = 8
"""Fewer rows than this and the 80th percentile is one or two residuals: use the parent's."""

QUANTILE = 80


def residual(r: Result) -> float:
    """How far the measured value lies from the prediction, relative to the prediction (the
    quantity a band around a prediction must cover)."""
    assert r.predicted is not None
    return r.measured / r.predicted - 1.0


def bands(results: Sequence[Result]) -> dict[str, Any]:
    """Bands per regime (and coarser fallbacks) plus the validated ground, for
    ``catalog/data/validation_bands.yaml``."""
    done = [r for r in results if r.predicted is not None]
    groups: dict[str, list[float]] = {"overall": [residual(r) for r in done]}
    for r in done:
        generation, mix, _ = r.regime.split("/")
        for key in (r.regime, f"{generation}/{mix}", generation):
            groups.setdefault(key, []).append(residual(r))
    regimes = {
        key: {
            "rows": len(res),
            "mape": round(float(np.mean(np.abs(res))), 4),
            "p80_abs_error": round(float(np.percentile(np.abs(res), QUANTILE)), 4),
        }
        for key, res in sorted(groups.items())
        if len(res) >= MIN_ROWS_PER_REGIME or key == "overall"
    }
    return {
        "regimes": regimes,
        "validated": {
            "generations": sorted({r.gpu_generation for r in done}),
            "frameworks": sorted({r.framework for r in done}),
            "fabrics": sorted({r.fabric for r in done}),
            "params_b": [
                round(min(r.params_b for r in done), 2),
                round(max(r.params_b for r in done), 1),
            ],
            "gpus": [min(r.num_gpus for r in done), max(r.num_gpus for r in done)],
        },
    }


def inside(case: Case, result: Result, data: dict[str, Any]) -> bool:
    """Whether the measured value lies in the band ``data`` gives this row's prediction."""
    band = band_for(case.model, case.cluster, case.plan, case.framework, data)
    return abs(residual(result)) <= band.relative


def _shares(flags: dict[str, list[bool]]) -> dict[str, Any]:
    every = [f for fs in flags.values() for f in fs]
    return {
        "overall": {"rows": len(every), "coverage": float(np.mean(every)) if every else 0.0},
        "per_source": {
            s: {"rows": len(fs), "coverage": float(np.mean(fs))} for s, fs in flags.items()
        },
    }


def coverage(
    cases: Sequence[Case], results: Sequence[Result], data: dict[str, Any]
) -> dict[str, Any]:
    """Share of rows inside the band ``data`` gives them, overall and per source."""
    by_id = {r.id: r for r in results if r.predicted is not None}
    flags: dict[str, list[bool]] = {}
    for c in cases:
        if c.id in by_id:
            flags.setdefault(c.source, []).append(inside(c, by_id[c.id], data))
    return _shares(flags)


def coverage_held_out(cases: Sequence[Case], results: Sequence[Result]) -> dict[str, Any]:
    """As :func:`coverage`, each source judged with bands built without its own rows."""
    done = [r for r in results if r.predicted is not None]
    by_id = {r.id: r for r in done}
    flags: dict[str, list[bool]] = {}
    for source in dict.fromkeys(c.source for c in cases):
        data = bands([r for r in done if r.source != source])
        for c in cases:
            if c.source == source and c.id in by_id:
                flags.setdefault(source, []).append(inside(c, by_id[c.id], data))
    return _shares(flags)
