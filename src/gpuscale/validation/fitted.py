"""Every profile value that was fitted, or chosen by looking at validation rows, in one place,
each with the function that refits it from a set of rows.

A value belongs here when its only justification is agreement with rows of
``data/validation``: its YAML says it was fitted, or, unlike its neighbours, it cites no
measurement or count. Values set from a microbenchmark, a datasheet, a count of kernels or a
paper's stated mechanism are physics and stay out (they are checked by the rows, not tuned on
them). Leave-one-source-out validation (:mod:`gpuscale.validation.loso`) refits every value
listed here without the held-out source, so no source is predicted with a value it shaped.

Read for this list: every ``catalog/data/profiles/*.yaml`` (2026-12-01). None is fitted now:
every factor cites a measurement, a count or a paper. The last two fitted values are gone:
DeepSpeed's ZeRO-3 gather efficiency (0.18, once fitted on Narayanan et al. 2021 Table 2), now
the collectives that release issued (``deepspeed-2021``, docs/cost-model.md, 'ZeRO-3 as DeepSpeed
0.3-0.5 ran it'), and llm-foundry's element-wise pass count (20, refit to its bound 40), now the
passes of the MPT block counted from llm-foundry's code with its Triton flash attention priced
from the FlashAttention-2 paper (``llm-foundry.yaml``). The registry and the refit machinery
stay, so a value that must be fitted again is declared here and LOSO refits it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Literal

import numpy as np

from gpuscale import shipped_yaml
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.validation.published_runs import Case, predict

Section = Literal["constants", "overlap"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FittedValue:
    """One value of one built-in profile that rows chose, and how to choose it again."""

    profile: str
    """Built-in profile that sets it (profiles based on it inherit the refitted value)."""
    section: Section
    key: str
    lower: float
    upper: float
    step: float
    """Resolution of the bounded 1-D search (the original fit's resolution)."""
    prior: float
    """The value without any row: what the base profile gives. Used when no row that informs
    the value is allowed (e.g. its only source is held out)."""
    informs: Callable[[Case], bool]
    """Rows that carry information about the value (the rows it was fitted on, and their kind)."""
    how: str
    """How it was chosen originally."""

    @property
    def name(self) -> str:
        return f"{self.profile}.{self.section}.{self.key}"

    def shipped(self) -> float:
        """The value in the built-in YAML today."""
        return float(getattr(load_profile(self.profile), self.section)[self.key])


FITTED: tuple[FittedValue, ...] = ()
"""The registry. Append a value here when one is fitted; tests and ``validate.py --loso`` pick
it up."""


def mape(predicted: Sequence[float], measured: Sequence[float]) -> float:
    p, m = np.asarray(predicted, dtype=float), np.asarray(measured, dtype=float)
    return float(np.mean(np.abs(p / m - 1.0))) if len(m) else float("nan")


@cache
def _raw_bases() -> dict[str, tuple[str | None, dict[str, dict[str, float]]]]:
    """Built-in profile name -> (its base, the sections it sets itself)."""
    folder = resources.files("gpuscale.catalog").joinpath("data").joinpath("profiles")
    out: dict[str, tuple[str | None, dict[str, dict[str, float]]]] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".yaml"):
            continue
        data = shipped_yaml.load(entry.read_text()) or {}
        sections = {s: dict(data.get(s) or {}) for s in ("constants", "overlap")}
        out[entry.name.removesuffix(".yaml")] = (data.get("base"), sections)
    return out


def _inherits(name: str, value: FittedValue) -> bool:
    """``name`` takes ``value`` from its base chain (it is, or is based on, the value's profile
    and nobody in between sets the key)."""
    raw = _raw_bases()
    while name in raw:
        if name == value.profile:
            return True
        base, sections = raw[name]
        if value.key in sections[value.section]:
            return False
        if base is None:
            return False
        name = base
    return False


def apply(
    values: Mapping[str, float],
    frameworks: Iterable[str],
    registry: Sequence[FittedValue] = FITTED,
) -> dict[str, Profile]:
    """Built-in profiles of ``frameworks`` with the fitted ``values`` (by :attr:`FittedValue.name`)
    set, for ``published_runs.evaluate(..., profiles=...)``. No global state is touched."""
    by_name = {v.name: v for v in registry}
    out: dict[str, Profile] = {}
    for framework in frameworks:
        profile = load_profile(framework)
        for name, number in values.items():
            fv = by_name[name]
            if framework != fv.profile and not _inherits(framework, fv):
                continue
            section = dict(getattr(profile, fv.section))
            section[fv.key] = float(number)
            if fv.section == "constants":
                profile = replace(profile, constants=section)
            else:
                profile = replace(profile, overlap=section)
        out[framework] = profile
    return out


def refit(
    value: FittedValue,
    cases: Sequence[Case],
    others: Mapping[str, float] | None = None,
    registry: Sequence[FittedValue] = FITTED,
) -> tuple[float, int]:
    """Refit ``value`` on the rows of ``cases`` it informs: the bounded value at ``step``
    resolution that minimizes their mean |error| (coarse grid, then a fine grid around the best
    coarse point). ``others``: values already fitted, applied meanwhile. Returns (value, rows);
    with no informing row, the prior and 0."""
    rows = [c for c in cases if value.informs(c)]
    if not rows:
        return value.prior, 0
    measured = [c.measured_tokens_per_s_per_gpu for c in rows]
    frameworks = sorted({c.framework for c in rows})
    fixed = dict(others or {})

    def loss(x: float) -> float:
        profiles = apply({**fixed, value.name: x}, frameworks, (*registry, value))
        return mape([predict(c, profiles[c.framework]) for c in rows], measured)

    # The lattice lower + k*step; first every stride-th point, then every point within one
    # stride of the best of those.
    n = round((value.upper - value.lower) / value.step)
    stride = max(1, n // 10)
    at = {k: float(round(value.lower + k * value.step, 10)) for k in range(n + 1)}
    losses: dict[int, float] = {}

    def cost(k: int) -> float:
        if k not in losses:
            losses[k] = loss(at[k])
        return losses[k]

    best = min(sorted({*range(0, n + 1, stride), n}), key=cost)
    best = min(range(max(0, best - stride), min(n, best + stride) + 1), key=cost)
    return at[best], len(rows)


def fit_all(
    cases: Sequence[Case], registry: Sequence[FittedValue] = FITTED
) -> dict[str, tuple[float, int]]:
    """Refit every value of ``registry`` on ``cases``, in registry order (each with the ones
    before it applied). Name -> (value, informing rows)."""
    out: dict[str, tuple[float, int]] = {}
    for fv in registry:
        out[fv.name] = refit(fv, cases, {k: v for k, (v, _) in out.items()}, registry)
    return out
