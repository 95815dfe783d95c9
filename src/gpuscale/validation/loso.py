"""Leave-one-source-out validation: each source predicted with every fitted value
(:data:`gpuscale.validation.fitted.FITTED`) refitted on the other sources' rows only.

In-sample figures use the values fitted on all rows; the LOSO figure of a source is what a new
user with a stack like that source's, and no row of it, would have been told. A source whose
rows are the only ones that inform a value gets that value's prior (no data, no fit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpuscale.validation.fitted import FITTED, FittedValue, apply, refit
from gpuscale.validation.published_runs import Case, Result, cases, predict, result_of

Fits = dict[str, tuple[float, int]]
"""Fitted value name -> (value, rows that informed it)."""


@dataclass(frozen=True, slots=True)
class Fold:
    source: str
    """The held-out source."""
    values: Fits
    """Every fitted value, refitted without the held-out source's rows."""


@dataclass(frozen=True, slots=True)
class LosoReport:
    in_sample: list[Result]
    """Every row predicted with the values fitted on all rows."""
    loso: list[Result]
    """Every row predicted with the values fitted without its source."""
    shipped: list[Result]
    """Every row predicted with the built-in profiles as shipped."""
    all_rows: Fits
    folds: list[Fold]
    skipped: list[Result]


class _FitCache:
    """Refits keyed by the rows that inform the value (and the values fitted before it): a
    held-out source without informing rows reuses the all-rows fit instead of refitting."""

    def __init__(self, registry: Sequence[FittedValue]) -> None:
        self.registry = registry
        self._done: dict[tuple[str, tuple[str, ...], tuple[tuple[str, float], ...]], Fits] = {}

    def fit(self, train: Sequence[Case]) -> Fits:
        out: Fits = {}
        for fv in self.registry:
            ids = tuple(c.id for c in train if fv.informs(c))
            others = tuple(sorted((k, v) for k, (v, _) in out.items()))
            key = (fv.name, ids, others)
            if key not in self._done:
                self._done[key] = {fv.name: refit(fv, train, dict(others), self.registry)}
            out.update(self._done[key])
        return out


def _predict(rows: Iterable[Case], values: Fits, registry: Sequence[FittedValue]) -> list[Result]:
    rows = list(rows)
    profiles = apply({k: v for k, (v, _) in values.items()}, {c.framework for c in rows}, registry)
    return [result_of(c, predict(c, profiles[c.framework])) for c in rows]


def run(rows: Iterable[dict[str, str]], registry: Sequence[FittedValue] = FITTED) -> LosoReport:
    """In-sample, leave-one-source-out and as-shipped predictions of every row."""
    mapped, skipped = cases(rows)
    return run_cases(mapped, registry, skipped)


def run_cases(
    mapped: Sequence[Case],
    registry: Sequence[FittedValue] = FITTED,
    skipped: Sequence[Result] = (),
) -> LosoReport:
    fits = _FitCache(registry)
    all_rows = fits.fit(mapped)
    shipped = {fv.name: (fv.shipped(), 0) for fv in registry}
    sources = list(dict.fromkeys(c.source for c in mapped))
    folds: list[Fold] = []
    loso_by_id: dict[str, Result] = {}
    for source in sources:
        train = [c for c in mapped if c.source != source]
        held = [c for c in mapped if c.source == source]
        values = fits.fit(train)
        folds.append(Fold(source, values))
        loso_by_id.update((r.id, r) for r in _predict(held, values, registry))
    return LosoReport(
        in_sample=_predict(mapped, all_rows, registry),
        loso=[loso_by_id[c.id] for c in mapped],
        shipped=_predict(mapped, shipped, registry),
        all_rows=all_rows,
        folds=folds,
        skipped=list(skipped),
    )
