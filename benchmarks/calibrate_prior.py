"""Empirical-Bayes prior spreads for one-run calibration, held out: do they beat the sourced ones?

    python benchmarks/calibrate_prior.py [--hold-out source|stack] [--evidence all|calibration]
                                         [--prior-weight W] [--robust] [--json]

``benchmarks/calibrate_run.py``'s protocol (each stack calibrated on its smallest run, its other
runs predicted) run twice: with ``calibrate run``'s posterior rule and the sourced spreads
(:data:`gpuscale.planner.calibrate_run.SIGMA`), and with the same rule and spreads estimated by
:func:`gpuscale.planner.calibrate_prior.empirical_spreads` from the published runs of the *other*
stacks only. ``--hold-out source`` (the default, the stricter): a stack's spreads are computed
without any row of its source (no stack of the same publication); ``--hold-out stack``: without
the stack's own rows. ``--evidence all`` (default) gives the estimator every run of the other
stacks (gap and elasticities under the uncalibrated profile); ``calibration`` only their
smallest runs (one gap per stack). Printed: MAPE per source and over all predicted rows for both,
the spreads held out for each source, and the spreads estimated from every stack (what would
ship) next to the sourced ones.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_run import cases, evaluate, mape, run_of, smallest, stack_of
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner.calibrate_prior import PRIOR_WEIGHT, Spreads, StackRuns, empirical_spreads
from gpuscale.planner.calibrate_run import QUANTITIES, SIGMA, predict, run_elasticities
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, with_overrides

Key = tuple[str, str, str, tuple[str, ...]]


def evidence(all_cases: list[Case], only_calibration: bool = False) -> dict[Key, StackRuns]:
    """Per stack, every run's gap and elasticities under its uncalibrated profile (with the
    row's stated settings), or only its smallest run's."""
    groups: dict[Key, list[Case]] = defaultdict(list)
    for case in all_cases:
        groups[stack_of(case)].append(case)
    out = {}
    for key, members in groups.items():
        picked = [smallest(members)] if only_calibration else members
        gaps, els = [], []
        for case in picked:
            run = run_of(case)
            profile = with_overrides(load_profile(case.framework), case.overrides)
            measured = run.tokens_per_step / (
                case.measured_tokens_per_s_per_gpu * run.cluster.num_gpus
            )
            gaps.append(math.log(measured / predict(run, profile)[0]))
            els.append(run_elasticities(run, profile))
        out[key] = StackRuns(gaps=tuple(gaps), elasticities=tuple(els))
    return out


def held_out(
    stacks: dict[Key, StackRuns],
    hold_out: str,
    prior_weight: float = PRIOR_WEIGHT,
    robust: bool = False,
) -> dict[Key, Spreads]:
    """Per stack, the spreads estimated without its source's rows (``source``) or without its
    own (``stack``): the protocol never reads the stack it predicts."""
    out: dict[Key, Spreads] = {}
    cache: dict[tuple[Key, ...], Spreads] = {}
    for key in stacks:
        left = tuple(k for k in stacks if (k[0] != key[0] if hold_out == "source" else k != key))
        if left not in cache:
            cache[left] = empirical_spreads(
                [stacks[k] for k in left], prior_weight=prior_weight, robust=robust
            )
        out[key] = cache[left]
    return out


def by_source(groups: list[dict[str, Any]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for g in groups:
        out[g["source"]].extend(r["error_after"] for r in g["rows"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold-out", choices=["source", "stack"], default="source")
    parser.add_argument("--evidence", choices=["all", "calibration"], default="all")
    parser.add_argument("--prior-weight", type=float, default=PRIOR_WEIGHT)
    parser.add_argument(
        "--robust",
        action="store_true",
        help="Student-t run-to-run residual (calibrate_prior.ROBUST_DOF) instead of Gaussian",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = sorted(DATA_DIR.glob("published_runs*.csv"))
    all_cases, _ = cases(paths)
    stacks = evidence(all_cases, args.evidence == "calibration")
    spreads = held_out(stacks, args.hold_out, args.prior_weight, args.robust)
    shipped = empirical_spreads(
        list(stacks.values()), prior_weight=args.prior_weight, robust=args.robust
    )
    with tempfile.TemporaryDirectory() as tmp:
        base, _ = evaluate(all_cases, Path(tmp), rule="posterior")
        emp, _ = evaluate(
            all_cases,
            Path(tmp),
            rule="empirical",
            spreads={k: s.sigma for k, s in spreads.items()},
        )
    rows_base = [r["error_after"] for g in base for r in g["rows"]]
    rows_emp = [r["error_after"] for g in emp for r in g["rows"]]
    rows_before = [r["error_before"] for g in base for r in g["rows"]]
    src_base, src_emp = by_source(base), by_source(emp)
    summary = {
        "hold_out": args.hold_out,
        "evidence": args.evidence,
        "prior_weight": args.prior_weight,
        "robust": args.robust,
        "rows": len(rows_base),
        "mape_before": mape(rows_before),
        "mape_posterior": mape(rows_base),
        "mape_empirical": mape(rows_emp),
        "per_source": {
            s: {
                "rows": len(src_base[s]),
                "posterior": mape(src_base[s]),
                "empirical": mape(src_emp[s]),
            }
            for s in src_base
        },
        "spreads_all_stacks": shipped.sigma,
        "noise_all_stacks": shipped.noise,
        "sourced": SIGMA,
        "held_out_spreads": {" ".join([k[0], k[1], k[2]]): s.sigma for k, s in spreads.items()},
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(
        f"hold out: {args.hold_out}; evidence: {args.evidence} runs of the other stacks; "
        f"prior worth {args.prior_weight:g} stacks; "
        f"{'Student-t' if args.robust else 'Gaussian'} run-to-run residual"
    )
    print(f"\n{'source':18s} {'rows':>4s} {'posterior':>9s} {'empirical':>9s}")
    for s, d in summary["per_source"].items():
        print(f"{s:18s} {d['rows']:4d} {d['posterior']:8.1f}% {d['empirical']:8.1f}%")
    print(
        f"{'all rows':18s} {len(rows_base):4d} {summary['mape_posterior']:8.1f}% "
        f"{summary['mape_empirical']:8.1f}%   (no calibration: {summary['mape_before']:.1f}%)"
    )
    print(f"\n{'spreads (log SD)':34s} " + " ".join(f"{q:>12s}" for q in QUANTITIES))
    print(f"{'sourced SIGMA':34s} " + " ".join(f"{SIGMA[q]:12.3f}" for q in QUANTITIES))
    print(
        f"{'estimated from all stacks':34s} "
        + " ".join(f"{shipped.sigma[q]:12.3f}" for q in QUANTITIES)
        + f"   (run-to-run residual {shipped.noise:.3f}; {shipped.stacks} stacks, "
        f"{shipped.runs} runs, {shipped.iterations} EM iterations)"
    )
    seen = set()
    for k, s in spreads.items():
        label = k[0] if args.hold_out == "source" else f"{k[0]} {k[1]} {k[2]}"
        if label in seen:
            continue
        seen.add(label)
        print(f"{'  without ' + label:34s} " + " ".join(f"{s.sigma[q]:12.3f}" for q in QUANTITIES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
