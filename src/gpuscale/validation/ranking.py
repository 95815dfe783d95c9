"""Does the model rank layouts like reality? Per group of measured runs of one model on one
cluster at one GPU count with several layouts: the regret of the model's top pick, the rank
correlation, and how optimistic the model is on the layouts that measured worst.

A planner must know a bad plan is bad: optimism concentrated on the worst layouts (compared with
the group's typical error) means the model misses what makes them bad.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpuscale.validation.published_runs import Case, Result

MIN_FOR_CORRELATION = 3
"""Rank correlation over two layouts is +-1 by construction: not reported."""


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties; Pearson on the ranks)."""
    rx, ry = _ranks(np.asarray(x, dtype=float)), _ranks(np.asarray(y, dtype=float))
    if np.std(rx) == 0 or np.std(ry) == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(len(values), dtype=float)
    for v in np.unique(values):  # ties share their average rank
        tied = values == v
        ranks[tied] = ranks[tied].mean()
    return ranks


@dataclass(frozen=True, slots=True)
class GroupRanking:
    key: str
    layouts: int
    spearman: float
    """Between predicted and measured throughput (nan below three layouts)."""
    regret: float
    """Throughput lost by running the model's top pick instead of the measured best:
    1 - measured(pick) / measured(best)."""
    pick: str
    best: str
    worst_optimism: float
    """Median predicted/measured - 1 over the worst quarter of the layouts (at least one)."""
    typical_error: float
    """Median predicted/measured - 1 over all the group's layouts."""


def group_key(case: Case) -> str:
    """Runs that differ only in their layout: one source, model, stack, device, GPU count,
    sequence length and precision, and the same unexpressed features."""
    t = case.training
    return (
        f"{case.source}/{case.model.name}/{case.framework}/{case.cluster.device.id}/"
        f"{case.plan.num_gpus} GPUs/seq {t.seq_len}/{t.precision}"
        + ("/limited" if case.limitations else "")
    )


def rank(cases: Sequence[Case], results: Sequence[Result]) -> list[GroupRanking]:
    """One :class:`GroupRanking` per group with at least two distinct measured layouts."""
    by_id = {r.id: r for r in results if r.predicted is not None}
    groups: dict[str, list[tuple[Case, Result]]] = {}
    for c in cases:
        if c.id not in by_id:
            continue
        members = groups.setdefault(group_key(c), [])
        if all(other.plan != c.plan for other, _ in members):  # a layout once
            members.append((c, by_id[c.id]))
    out: list[GroupRanking] = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        measured = np.array([r.measured for _, r in members])
        predicted = np.array([r.predicted for _, r in members], dtype=float)
        ids = [c.id for c, _ in members]
        pick, best = int(np.argmax(predicted)), int(np.argmax(measured))
        errors = predicted / measured - 1.0
        worst = np.argsort(measured)[: max(1, len(members) // 4)]
        out.append(
            GroupRanking(
                key=key,
                layouts=len(members),
                spearman=spearman(predicted, measured)
                if len(members) >= MIN_FOR_CORRELATION
                else float("nan"),
                regret=float(1.0 - measured[pick] / measured[best]),
                pick=ids[pick],
                best=ids[best],
                worst_optimism=float(np.median(errors[worst])),
                typical_error=float(np.median(errors)),
            )
        )
    return out
