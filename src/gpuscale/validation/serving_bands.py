"""Serving error bands from measured runs: how far the serving model's mean TTFT, TPOT and
output tokens/s fell from the measured ones, per engine, mode, speculative decoding and GPU
generation, on runs
it was never built on (InferenceX's held-out DeepSeek-R1 records) and on the rows it was built
against.

A band is the 10th, 50th and 90th percentiles of ``measured / predicted`` over a regime's runs,
per metric: 80% of the runs' measurements of that metric lay between ``p10 x prediction`` and
``p90 x prediction``. Not the symmetric ``+-`` of the training bands
(``costmodel.uncertainty``): serving errors are lopsided (the mean TTFT of a run is often twice
the prediction, seldom half), and a symmetric band of +-130% would say nothing below the
prediction. Each regime also lists the GPU generations, models, modes and speculative settings
of its runs, so that a lookup can say when a deployment is none of them.
``benchmarks/serving_bands.py --write`` computes them and writes
``catalog/data/serving_validation_bands.yaml``; ``costmodel.serving.uncertainty`` reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscale.costmodel.serving.uncertainty import METRICS, regime_keys

HELD_OUT, IN_SAMPLE = "held_out", "in_sample"

MIN_ROWS = 20
"""Fewest runs a regime needs for a band of its own (fewer: the regime above it answers)."""

QUANTILES = (0.1, 0.5, 0.9)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunError:
    """One measured run set against the model's prediction of it."""

    kind: str
    """:data:`HELD_OUT` or :data:`IN_SAMPLE`."""
    engine: str
    """The API's engine name (``tensorrt-llm``, ``sglang``, ...)."""
    mode: str
    """``agg`` or ``disagg``."""
    speculative: bool
    """The run decoded with speculative decoding (MTP)."""
    generation: str
    """The GPU generation of the run (``hopper``, ``blackwell``, ``cdna4``, ...)."""
    model: str
    """The catalog model the run served."""
    measured: dict[str, float]
    predicted: dict[str, float]


def _ratios(runs: Iterable[RunError], metric: str) -> list[float]:
    out = []
    for r in runs:
        m, p = r.measured.get(metric), r.predicted.get(metric)
        if m and p and m > 0 and p > 0:
            out.append(m / p)
    return out


def regimes(runs: Iterable[RunError]) -> dict[str, dict[str, Any]]:
    """Bands per regime (``costmodel.serving.uncertainty.regime_keys``: kind / engine / mode /
    speculative / GPU generation, then coarser), each with its run count, the generations,
    models, modes and speculative settings of its runs, and, per metric measured in at least
    :data:`MIN_ROWS` runs, the 10th, 50th and 90th percentiles of ``measured / predicted``
    (rounded to 0.01). Regimes under :data:`MIN_ROWS` runs are left out."""
    groups: dict[str, list[RunError]] = defaultdict(list)
    for r in runs:
        for key in regime_keys(r.kind, r.engine, r.mode, r.speculative, r.generation):
            groups[key].append(r)
    out: dict[str, dict[str, Any]] = {}
    for key in sorted(groups):
        members = groups[key]
        if len(members) < MIN_ROWS:
            continue
        entry: dict[str, Any] = {
            "rows": len(members),
            "generations": sorted({r.generation for r in members}),
            "models": sorted({r.model for r in members}),
            "modes": sorted({r.mode for r in members}),
            "speculative": sorted({r.speculative for r in members}),
        }
        for metric in METRICS:
            ratios = _ratios(members, metric)
            if len(ratios) >= MIN_ROWS:
                entry[metric] = [round(float(q), 2) for q in np.quantile(ratios, QUANTILES)]
        out[key] = entry
    return out


def document(runs: list[RunError], source: str, left_out: dict[str, int]) -> dict[str, Any]:
    """The bands file: its source, the runs left out and why (``left_out``), the regimes."""
    return {
        "schema_version": 2,
        "source": source,
        "left_out": left_out,
        "regimes": regimes(runs),
    }
