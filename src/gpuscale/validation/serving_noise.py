"""How far the measured serving rows repeat themselves: the error no model can remove.

Two limits on the mean absolute relative error ``|predicted - measured| / measured`` that
``benchmarks/validate_serving.py`` reports, computed from the measurements alone:

- **repeats**: the same deployment (engine and version, GPU, model, formats, every parallelism
  and launch setting the row is read with, lengths, concurrency, MTP or not: the keyword
  arguments :mod:`gpuscale.validation.serving_rows` reads, which are everything a model is told)
  measured in different runs. One deterministic model gives one answer for all of them, so on a
  group it errs by at least ``min_v sum_i |v - y_i| / y_i``, a weighted median
  (:func:`monotone_fit` with one concurrency).
- **order**: in a closed loop at a fixed deployment and lengths, more requests in flight should
  not make the mean TTFT or TPOT shorter (more load on the same engine). A model that respects
  that errs on a concurrency sweep by at least the best non-decreasing fit (:func:`monotone_fit`); repeats are ties at one concurrency.

The same run recorded twice is one measurement, not a repeat: rows of one deployment that
record the same TTFT and TPOT to the last digit (:data:`serving_rows.TWIN_RTOL`) are one
:class:`Run` (:func:`serving_runs.same_run`, the rule :func:`serving_runs.distinct` counts by).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from gpuscale import catalog
from gpuscale.errors import InputError
from gpuscale.validation.serving_fields import measured_day, source_fields
from gpuscale.validation.serving_rows import ServingRow
from gpuscale.validation.serving_runs import deployment_key, same_run

METRICS = ("ttft", "tpot")
CLIENT_ONLY = ("num_requests",)
"""Keyword arguments that describe the benchmark client's length of run, not the deployment:
InferenceX measures ``10 x C`` requests (``serving_clients.INFERENCEX_ROUNDS``), so it changes with
the concurrency of a sweep while the engine stays the same."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One measurement: the rows that record it, the best attested first and standing for it."""

    rows: tuple[ServingRow, ...]
    deployment: str
    """Everything a model is told about the row, concurrency included (JSON)."""
    sweep: str
    """:attr:`deployment` without the concurrency and the client's run length: the key of a
    concurrency sweep."""
    campaign: str
    """Where and when it was measured: source family, and the measured day (or, where the row
    has none, its source file)."""
    source: str
    """``InferenceX`` (its exports, AIConfigurator's dump of them and the gap-analysis copies)
    or ``AIConfigurator`` (its own genai-perf/aiperf runs)."""
    arch: str
    """``dense`` or ``moe`` (catalog), ``?`` when the catalog does not know the model."""

    @property
    def row(self) -> ServingRow:
        return self.rows[0]

    @property
    def engine(self) -> str:
        return self.row.engine

    @property
    def mode(self) -> str:
        return self.row.mode

    @property
    def concurrency(self) -> int:
        return self.row.concurrency

    def value(self, metric: str) -> float:
        return self.row.ttft_ms if metric == "ttft" else self.row.tpot_ms


def campaign(row: ServingRow) -> tuple[str, str]:
    """(source family, campaign) of ``row``: the measured day where the row states one, else its
    source file (AIConfigurator's undated genai-perf/aiperf files, the gap-analysis copies)."""
    path = source_fields(row.raw).get("source_file", "")
    family = "AIConfigurator" if "aic-auto-gap-analysis" in path else "InferenceX"
    day = measured_day(row.raw)
    return family, f"{family}:{day or path}"


def _arch(row: ServingRow) -> str:
    try:
        return "moe" if catalog.model(row.raw["model_path"]).is_moe else "dense"
    except InputError:
        return "?"


def runs(rows: Sequence[ServingRow]) -> list[Run]:
    """The expressible ``rows`` as measurements: the records of one run (``serving_runs.same_run``,
    the rule ``serving_runs.distinct`` keeps one record of each run by) are one :class:`Run`, its
    best attested record first. A row that is not expressible has no known deployment and is left
    out."""
    out = []
    for same in same_run(rows):
        family, where = campaign(same[0])
        out.append(
            Run(
                rows=tuple(same),
                deployment=deployment_key(same[0]),
                sweep=deployment_key(same[0], ("concurrency", *CLIENT_ONLY)),
                campaign=where,
                source=family,
                arch=_arch(same[0]),
            )
        )
    return out


def monotone_fit(x: ArrayLike, y: ArrayLike, w: ArrayLike) -> tuple[np.ndarray, float]:
    """The non-decreasing step function of ``x`` (points at one ``x`` share a value) minimising
    ``sum w_i |f(x_i) - y_i|``: its values at the points and the minimum.

    L1 isotonic regression. An optimal ``f`` is constant on blocks of consecutive ``x`` and on
    each block minimises a weighted sum of ``|v - y_i|``, which a weighted median does, and a
    weighted median can be taken among the block's ``y_i`` (the sum is convex and piecewise
    linear with its kinks at the ``y_i``; e.g. Stout, "Isotonic median regression via
    partitioning", Algorithmica 2013): so the values are searched among the ``y`` exactly, by
    dynamic programming over the distinct ``x`` in order (cost of value ``v`` at this ``x`` plus
    the best cost of any value ``<= v`` before)."""
    xs, ys, ws = (np.asarray(a, dtype=float) for a in (x, y, w))
    values = np.unique(ys)
    levels = np.unique(xs)
    best = np.zeros(len(values))
    back: list[np.ndarray] = []
    for level in levels:
        here = xs == level
        cost = (ws[here][:, None] * np.abs(values[None, :] - ys[here][:, None])).sum(axis=0)
        # best[k] over u <= k: running minimum and where it is reached
        arg = np.zeros(len(values), dtype=int)
        for k in range(1, len(values)):
            arg[k] = k if best[k] < best[arg[k - 1]] else arg[k - 1]
        back.append(arg)
        best = cost + best[arg]
    k = int(np.argmin(best))
    total = float(best[k])
    chosen = np.empty(len(levels))
    for i in range(len(levels) - 1, -1, -1):
        chosen[i] = values[k]
        k = int(back[i][k])
    fitted = chosen[np.searchsorted(levels, xs)]
    return fitted, total


def relative_floor(x: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Per point: the fitted value and ``|f - y| / y`` of the best non-decreasing ``f`` under the
    mean relative error (weights ``1 / y``)."""
    ys = np.asarray(y, dtype=float)
    fitted, _ = monotone_fit(x, ys, 1.0 / ys)
    return fitted, np.abs(fitted - ys) / ys


@dataclass(frozen=True, slots=True, kw_only=True)
class Spread:
    """How one group of repeats of a deployment disagrees with itself."""

    n: int
    from_geomean: float
    """Mean ``|y / geometric mean - 1|``."""
    pair_log: float
    """Mean ``|ln(y_i / y_j)|`` over the pairs."""
    floor: float
    """Mean ``|v - y| / y`` at the best single answer ``v`` (a weighted median)."""
    floor_errors: tuple[float, ...]


def spread(values: Sequence[float]) -> Spread:
    y = np.asarray(values, dtype=float)
    logs = np.log(y)
    gm = math.exp(float(logs.mean()))
    pairs = [abs(a - b) for i, a in enumerate(logs) for b in logs[i + 1 :]]
    _, errs = relative_floor([0.0] * len(y), y)
    return Spread(
        n=len(y),
        from_geomean=float(np.mean(np.abs(y / gm - 1))),
        pair_log=float(np.mean(pairs)) if pairs else 0.0,
        floor=float(errs.mean()),
        floor_errors=tuple(float(e) for e in errs),
    )


def repeat_groups(found: Sequence[Run]) -> list[list[Run]]:
    """Deployments measured in more than one run."""
    by: dict[str, list[Run]] = defaultdict(list)
    for run in found:
        by[run.deployment].append(run)
    return [g for g in by.values() if len(g) > 1]


def sweeps(found: Sequence[Run], key: Callable[[Run], Any], levels: int = 2) -> list[list[Run]]:
    """Runs grouped by ``key`` (e.g. sweep and campaign), kept where at least ``levels``
    concurrencies were measured, each sorted by concurrency."""
    by: dict[Any, list[Run]] = defaultdict(list)
    for run in found:
        by[key(run)].append(run)
    return [
        sorted(g, key=lambda r: r.concurrency)
        for g in by.values()
        if len({r.concurrency for r in g}) >= levels
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class Falls:
    """Adjacent concurrencies of one sweep where a latency falls as the load rises."""

    pairs: int
    falls: dict[float, int]
    """Threshold (0.10 = more than 10% lower) -> pairs that fall by more."""


def falls(sweep: Sequence[Run], metric: str, thresholds: Sequence[float]) -> Falls:
    """Pairs of adjacent concurrencies of ``sweep`` (one campaign); several runs at one
    concurrency are taken at their geometric mean."""
    at: dict[int, list[float]] = defaultdict(list)
    for run in sweep:
        at[run.concurrency].append(math.log(run.value(metric)))
    level = [math.exp(sum(v) / len(v)) for _, v in sorted(at.items())]
    out = dict.fromkeys(thresholds, 0)
    for a, b in itertools.pairwise(level):
        for t in thresholds:
            if b < (1 - t) * a:
                out[t] += 1
    return Falls(pairs=len(level) - 1, falls=out)


def order_floor(sweep: Sequence[Run], metric: str) -> tuple[float, ...]:
    """Per run of ``sweep``, in order: the relative error of the best fit that does not fall as
    the concurrency rises (:func:`relative_floor`)."""
    x = [r.concurrency for r in sweep]
    y = [r.value(metric) for r in sweep]
    _, errs = relative_floor(x, y)
    return tuple(float(e) for e in errs)
