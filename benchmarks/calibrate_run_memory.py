"""One-run memory calibration on published peaks: fit the allocator reserve on each group's
smallest run, predict the group's other peaks.

    python benchmarks/calibrate_run_memory.py [--rows] [--json]

What ``calibrate run --measured-memory-gib`` fits is the caching allocator's reserve over live
tensors (``memory_allocator_fragmentation``, :func:`gpuscale.planner.calibrate_run.fit_memory`),
the one memory parameter that multiplies; this asks whether one run's value of it carries to
the other runs of the same stack. Rows: every row of ``data/validation/published_memory*.csv``
that :mod:`gpuscale.validation.published_memory` maps and does not skip (the same rows, counters
and per-row profiles as the memory validation). Groups: one source and one counter (a reserved
peak and a live-tensor peak are different numbers). The smallest run of a group, fixed before
any error is seen, is the measurement: fewest GPUs, fewest parameters, shortest sequence,
smallest micro-batch, then the id. A group whose counter is live tensors alone
(``max_memory_allocated``) holds no allocator reserve to fit and is listed, not calibrated; so is
a group with one run. Printed: mean absolute percentage error of the other rows before and after.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

import numpy as np

from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.planner.calibrate_run import fit_memory
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_memory import (
    FILES,
    FLOOR_NOISE,
    GIB,
    Case,
    Skip,
    floor_gib,
    load_rows,
    to_case,
)

RESERVE = "memory_allocator_fragmentation"
CALIBRATABLE = ("reserved", "total")
"""Counters that contain the allocator's reserve (``allocated`` is live tensors alone)."""


def cases() -> list[Case]:
    """Every row the memory validation predicts (not skipped, not below its floor)."""
    base = load_profile("generic")
    out = []
    for name in FILES:
        for row in load_rows(DATA_DIR / name):
            try:
                case = to_case(row, base)
            except Skip:
                continue
            if case.measured_gib >= floor_gib(case) * (1.0 - FLOOR_NOISE):
                out.append(case)
    return out


def peak_gib(case: Case, profile: Profile) -> float:
    return plan_memory(case.model, case.training, case.plan, profile)[case.counter] / GIB


def smallest(members: list[Case]) -> Case:
    """Fewest GPUs, fewest parameters, shortest sequence, smallest micro-batch, then the id."""
    return min(
        members,
        key=lambda c: (
            c.plan.num_gpus,
            total_params(c.model),
            c.training.seq_len,
            c.plan.micro_batch,
            c.id,
        ),
    )


def mape(errors: list[float]) -> float:
    return float(np.mean(np.abs(errors))) * 100 if errors else float("nan")


def evaluate(all_cases: list[Case]) -> tuple[list[dict[str, Any]], list[str]]:
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in all_cases:
        groups[(case.source, case.counter)].append(case)
    out, excluded = [], []
    for (source, counter), members in groups.items():
        if counter not in CALIBRATABLE:
            excluded.append(
                f"{source} ({len(members)} rows): the counter is live tensors "
                "(max_memory_allocated), which holds no allocator reserve to fit"
            )
            continue
        if len(members) < 2:
            excluded.append(f"{source} {counter}: one run ({members[0].id}), nothing to predict")
            continue
        anchor = smallest(members)
        fit = fit_memory(lambda p, a=anchor: peak_gib(a, p), anchor.measured_gib, anchor.profile)
        group: dict[str, Any] = {
            "source": source,
            "counter": counter,
            "calibrated_on": anchor.id,
            "anchor_error": peak_gib(anchor, anchor.profile) / anchor.measured_gib - 1.0,
            "anchor_error_after": peak_gib(anchor, fit.profile) / anchor.measured_gib - 1.0,
            "fitted": None
            if fit.fitted is None
            else f"{RESERVE} {fit.fitted.before:.3g} -> {fit.fitted.after:.3g}",
            "warnings": list(fit.warnings),
            "rows": [],
        }
        for case in members:
            if case is anchor:
                continue
            before = peak_gib(case, case.profile)
            after = before
            if fit.fitted is not None:
                moved = replace(
                    case.profile, constants={**case.profile.constants, RESERVE: fit.fitted.after}
                )
                after = peak_gib(case, moved)
            group["rows"].append(
                {
                    "id": case.id,
                    "measured_gib": case.measured_gib,
                    "before_gib": before,
                    "after_gib": after,
                    "error_before": before / case.measured_gib - 1.0,
                    "error_after": after / case.measured_gib - 1.0,
                }
            )
        out.append(group)
    return out, excluded


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", action="store_true", help="print every predicted row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    groups, excluded = evaluate(cases())
    rows = [r for g in groups for r in g["rows"]]
    summary = {
        "rows_predicted": len(rows),
        "mape_before": mape([r["error_before"] for r in rows]),
        "mape_after": mape([r["error_after"] for r in rows]),
        "excluded": excluded,
    }
    if args.json:
        print(json.dumps({"groups": groups, **summary}, indent=2))
        return 0
    print(
        f"{'source':12s} {'counter':9s} {'calibrated on':34s} {'its error':>9s} {'rows':>4s} "
        f"{'MAPE before':>11s} {'after':>7s}  fitted"
    )
    for g in groups:
        print(
            f"{g['source']:12s} {g['counter']:9s} {g['calibrated_on']:34s} "
            f"{g['anchor_error']:+8.1%} {len(g['rows']):4d} "
            f"{mape([r['error_before'] for r in g['rows']]):10.1f}% "
            f"{mape([r['error_after'] for r in g['rows']]):6.1f}%  "
            f"{g['fitted'] or 'not fitted: ' + g['warnings'][0][:70]}"
        )
        if args.rows:
            for r in g["rows"]:
                print(
                    f"    {r['id']:44s} measured {r['measured_gib']:6.1f} GiB  "
                    f"{r['error_before']:+7.1%} -> {r['error_after']:+7.1%}"
                )
    for line in excluded:
        print(f"excluded: {line}")
    print(
        f"\n{summary['rows_predicted']} peaks predicted: MAPE before {summary['mape_before']:.1f}%, "
        f"after {summary['mape_after']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
