"""How well the public serving measurements repeat: the error no model can go below.

Reads only ``data/validation/serving`` (``gpuscale.validation.serving_rows``) and prints, for
mean TTFT and mean TPOT separately, per engine and aggregated / disaggregated:

1. **Repeats**: the same deployment (everything the model is told: engine and version, GPU,
   model, formats, parallelism, launch settings, lengths, concurrency, MTP) measured in more than
   one run. Rows of one deployment that record the same TTFT and TPOT to the last digit are one
   run recorded twice and counted once (``serving_noise.runs``, the rule of
   ``serving_runs.distinct``). Per group: the mean ``|y / geometric mean - 1|``,
   the mean ``|ln(y_i / y_j)|`` over pairs, and the floor: the least mean ``|v - y| / y`` any
   single answer ``v`` makes on the group (what a perfect deterministic model still misses).
2. **Order**: closed-loop sweeps of one deployment in one campaign (source and measured day):
   adjacent concurrencies where the latency falls by more than 10% / 25% as the load rises, and
   the least mean relative error of any prediction that does not fall with concurrency (L1
   isotonic fit, ``serving_noise.monotone_fit``).
3. **Table**: per engine, mode and dense / MoE: runs, the serving model's mean error
   (``validate_serving.predict``; skipped with ``--no-model``), the repeat floor and the bound for
   a deterministic model monotone in concurrency (repeats and every campaign of a sweep
   together), both spread over all the runs of the cell, as they weigh in its mean error.

    PYTHONPATH=src python benchmarks/serving_noise_floor.py [--no-model] [--json] [--worst N]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from gpuscale.errors import InputError
from gpuscale.validation.serving_noise import (
    METRICS,
    Run,
    falls,
    order_floor,
    repeat_groups,
    runs,
    spread,
    sweeps,
)
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct, distinct_columns, served_model
from validate_serving import ROWS, predict

THRESHOLDS = (0.10, 0.25)


def _pct(v: float) -> str:
    return f"{100 * v:6.1f}%"


def repeats(found: Sequence[Run], worst: int) -> dict[str, Any]:
    groups = repeat_groups(found)
    out: dict[str, Any] = {}
    print("1. repeats: one deployment measured in more than one run")
    cross = sum(len({r.campaign for r in g}) > 1 for g in groups)
    print(
        f"   {len(groups)} groups, {sum(map(len, groups))} runs ({cross} groups span campaigns, "
        f"{len(groups) - cross} hold runs of one campaign); of {len(found)} runs"
    )
    for metric in METRICS:
        cells: dict[tuple[str, str], list[list[Run]]] = defaultdict(list)
        for g in groups:
            cells[(g[0].engine, g[0].mode)].append(g)
            cells[("all", g[0].mode)].append(g)
        print(
            f"   {metric.upper()}: engine   mode  groups runs | from geomean  pair |ln|"
            "  floor (runs in groups)          max pair ratio"
        )
        block = {}
        for (eng, mode), gs in sorted(cells.items()):
            sp = [spread([r.value(metric) for r in g]) for g in gs]
            n = sum(s.n for s in sp)
            dev = sum(s.from_geomean * s.n for s in sp) / n
            pairs = sum(s.n * (s.n - 1) / 2 for s in sp)
            pair = sum(s.pair_log * s.n * (s.n - 1) / 2 for s in sp) / pairs
            floor = sum(s.floor * s.n for s in sp) / n
            ratio = max(
                max(r.value(metric) for r in g) / min(r.value(metric) for r in g) for g in gs
            )
            median = statistics.median(s.floor for s in sp)
            print(
                f"   {eng:>13} {mode:>6} {len(gs):6d} {n:4d} | {_pct(dev)}     {pair:6.3f}"
                f"  {_pct(floor)} (median group {_pct(median).strip()}) {ratio:6.2f}x"
            )
            block[f"{eng}/{mode}"] = {
                "groups": len(gs),
                "runs": n,
                "from_geomean": dev,
                "pair_log": pair,
                "floor": floor,
                "median_group_floor": median,
                "max_ratio": ratio,
            }
        out[metric] = block
        ranked = sorted(
            groups,
            key=lambda g, m=metric: -max(r.value(m) for r in g) / min(r.value(m) for r in g),
        )
        for g in ranked[:worst]:
            vals = ", ".join(f"{r.value(metric):.1f} ({r.campaign})" for r in g)
            print(f"      widest: {g[0].row.id} C={g[0].concurrency}: {vals}")
    return out


def order(found: Sequence[Run]) -> dict[str, Any]:
    seqs = sweeps(found, lambda r: (r.sweep, r.campaign))
    print(
        "2. order: adjacent concurrencies of one sweep (one deployment, one campaign) where the "
        "latency falls as the load rises"
    )
    print(f"   {len(seqs)} sweeps of >= 2 concurrencies, {sum(map(len, seqs))} runs")
    out: dict[str, Any] = {}
    for metric in METRICS:
        print(
            f"   {metric.upper()}: engine   mode  source          sweeps pairs  >10%  >25% | "
            "bound on sweeps with a >10% fall (runs)  on all sweeps"
        )
        cells: dict[tuple[str, str, str], list[list[Run]]] = defaultdict(list)
        for s in seqs:
            cells[(s[0].engine, s[0].mode, s[0].source)].append(s)
            cells[("all", s[0].mode, "all")].append(s)
        block = {}
        for (eng, mode, src), ss in sorted(cells.items()):
            fs = [falls(s, metric, THRESHOLDS) for s in ss]
            errs = [order_floor(s, metric) for s in ss]
            pairs = sum(f.pairs for f in fs)
            n10 = sum(f.falls[0.10] for f in fs)
            n25 = sum(f.falls[0.25] for f in fs)
            bad = [e for f, e in zip(fs, errs, strict=True) if f.falls[0.10]]
            bad_runs = sum(map(len, bad))
            on_bad = sum(map(sum, bad)) / bad_runs if bad_runs else 0.0
            every = sum(map(sum, errs)) / sum(map(len, errs))
            print(
                f"   {eng:>13} {mode:>6} {src:<15} {len(ss):6d} {pairs:5d} {n10:5d} {n25:5d} | "
                f"{_pct(on_bad)} ({bad_runs:4d})                        {_pct(every)}"
            )
            block[f"{eng}/{mode}/{src}"] = {
                "sweeps": len(ss),
                "pairs": pairs,
                "falls_10": n10,
                "falls_25": n25,
                "runs_in_falling_sweeps": bad_runs,
                "bound_on_falling_sweeps": on_bad,
                "bound_on_all_sweeps": every,
            }
        out[metric] = block
        where: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for s in seqs:
            f = falls(s, metric, THRESHOLDS)
            name = f"{served_model(s[0].row).split('/')[-1]} {s[0].row.raw['system']} {s[0].engine}"
            where[name][0] += f.falls[0.10]
            where[name][1] += f.pairs
        named = sorted(((v, k) for k, v in where.items() if v[0]), reverse=True)
        if named:
            print(
                "      >10% falls by model: "
                + "; ".join(f"{k} {v[0]}/{v[1]}" for v, k in named[:6])
                + ("; ..." if len(named) > 6 else "")
            )
    return out


def table(found: Sequence[Run], model: bool) -> dict[str, Any]:
    """Per engine x mode x arch: runs, model error, repeat floor and monotone bound (means over
    every run of the cell; a run with no repeat / no sweep adds 0 to the floors)."""
    floor: dict[tuple[str, int], float] = {}
    for g in repeat_groups(found):
        for metric in METRICS:
            sp = spread([r.value(metric) for r in g])
            for r, e in zip(g, sp.floor_errors, strict=True):
                floor[(metric, id(r))] = e
    # One fit per sweep over every campaign: repeats are ties at their concurrency, so a model
    # that is both deterministic and monotone in concurrency pays for both at once.
    bound: dict[tuple[str, int], float] = {}
    for s in sweeps(found, lambda r: r.sweep, levels=1):
        for metric in METRICS:
            for r, e in zip(s, order_floor(s, metric), strict=True):
                bound[(metric, id(r))] = e
    errs: dict[tuple[str, int], float] = {}
    if model:
        for r in found:
            try:
                o = predict(r.row)
            except InputError:
                continue
            errs[("ttft", id(r))] = abs(o["ttft_ms"] - r.row.ttft_ms) / r.row.ttft_ms
            errs[("tpot", id(r))] = abs(o["tpot_ms"] - r.row.tpot_ms) / r.row.tpot_ms
    cells: dict[tuple[str, str, str], list[Run]] = defaultdict(list)
    for r in found:
        for key in ((r.engine, r.mode, r.arch), ("all", r.mode, "all")):
            cells[key].append(r)
    print(
        "3. table (means over every run of the cell; a run with no repeat (rept.: runs with one) "
        "or sweep counts 0 in the floors: 0 there means no evidence, not no noise)"
    )
    print(
        "   engine   mode  arch  runs rept. | TTFT model  repeat floor  monotone bound | "
        "TPOT model  repeat floor  monotone bound"
    )
    out: dict[str, Any] = {}
    for (eng, mode, arch), rs in sorted(cells.items()):
        repeated = sum(("ttft", id(r)) in floor for r in rs)
        line = f"   {eng:>6} {mode:>6} {arch:>5} {len(rs):5d} {repeated:5d} |"
        cell: dict[str, Any] = {"runs": len(rs), "runs_repeated": repeated}
        for metric in METRICS:
            m = [errs[(metric, id(r))] for r in rs if (metric, id(r)) in errs]
            fl = statistics.fmean(floor.get((metric, id(r)), 0.0) for r in rs)
            bd = statistics.fmean(bound.get((metric, id(r)), 0.0) for r in rs)
            me = statistics.fmean(m) if m else None
            line += (
                f" {_pct(me) if me is not None else '      -'}      {_pct(fl)}         {_pct(bd)} |"
            )
            cell[metric] = {"model": me, "repeat_floor": fl, "monotone_bound": bd}
        print(line.rstrip("|"))
        out[f"{eng}/{mode}/{arch}"] = cell
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--no-model", action="store_true", help="skip the serving model's error column (fast)"
    )
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ap.add_argument("--worst", type=int, default=3, help="widest repeat groups listed per metric")
    args = ap.parse_args()
    if args.worst < 0:
        ap.error(f"--worst {args.worst}: the number of groups listed must be 0 or more")
    copies = load(ROWS)
    rows = distinct(copies)
    # The rows before the run-level fold, so that the fold is counted here; ``runs`` folds them
    # by the rule ``distinct`` does (``serving_runs.same_run``) and keeps the same record.
    found = runs(distinct_columns(copies))
    folded = sum(len(r.rows) - 1 for r in found)
    print(
        f"rows: {len(copies)}, distinct (validate_serving): {len(rows)}, expressible: "
        f"{sum(r.expressible for r in rows)}, runs: {len(found)} ({folded} more rows record a "
        "run of the same deployment to the last digit in other words and are folded into it)"
    )
    doc = {
        "rows": len(copies),
        "runs": len(found),
        "repeats": repeats(found, args.worst),
        "order": order(found),
        "table": table(found, not args.no_model),
    }
    if args.json:
        print(json.dumps(doc))


if __name__ == "__main__":
    main()
