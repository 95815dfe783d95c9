"""One-run calibration on published runs: calibrate on each source's smallest run, predict the rest.

    python benchmarks/calibrate_run.py [--csv PATH ...] [--rows] [--json]

For every source of the published training runs (``data/validation/published_runs*.csv``, every
row the validation loader maps today), and within it every GPU type (a profile calibrated on an
A100 says nothing about an H100: it is keyed by the GPU's id), the run with the fewest GPUs (tie:
the first in the file) is handed to ``gpuscale calibrate run`` as the user's own measurement; the
written profile is then laid over each other row's framework, as ``--profile FILE`` does, and the
rows are predicted again. Printed: mean absolute percentage error (MAPE) of the other rows
before (no calibration) and after, per source and GPU, and over all predicted rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale.api.calibrate_run import profile_yaml
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.errors import InputError
from gpuscale.planner.calibrate_run import Measured, Run, calibrate_run, predict, profile_document
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, load_rows, to_case


def cases(paths: list[Path]) -> tuple[list[Case], int]:
    """Every row the validation loader maps, and how many it cannot."""
    out, skipped = [], 0
    for path in paths:
        for row in load_rows(path):
            try:
                out.append(to_case(row))
            except (LookupError, ValueError, InputError):
                skipped += 1
    return out, skipped


def run_of(case: Case) -> Run:
    return Run(model=case.model, cluster=case.cluster, training=case.training, plan=case.plan)


def per_gpu(run: Run, step_s: float) -> float:
    return run.tokens_per_step / step_s / run.cluster.num_gpus


def mape(errors: list[float]) -> float:
    return float(np.mean(np.abs(errors))) * 100 if errors else float("nan")


def evaluate(all_cases: list[Case], folder: Path) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[Case]] = defaultdict(list)
    for case in all_cases:
        groups[(case.source, case.cluster.device.id)].append(case)
    out = []
    for (source, gpu), members in groups.items():
        anchor = min(members, key=lambda c: c.plan.num_gpus)  # min() keeps the first on ties
        others = [c for c in members if c is not anchor]
        anchor_run = run_of(anchor)
        measured_step = anchor_run.tokens_per_step / (
            anchor.measured_tokens_per_s_per_gpu * anchor_run.cluster.num_gpus
        )
        group: dict[str, Any] = {
            "source": source,
            "gpu": gpu,
            "calibrated_on": anchor.id,
            "calibrated_gpus": anchor.plan.num_gpus,
            "rows": [],
        }
        try:
            cal = calibrate_run(
                anchor_run, Measured(step_s=measured_step), load_profile(anchor.framework)
            )
        except InputError as exc:
            cal = None
            group["refused"] = str(exc)
        path = folder / f"{source}-{gpu}.yaml"
        if cal is not None:
            doc = profile_document(cal, anchor_run, name=path.stem, framework=anchor.framework)
            path.write_text(profile_yaml(doc))
            f = cal.throughput
            group["fitted"] = f"{f.label} {f.before:.3g} -> {f.after:.3g} ({f.change:+.0%})"
            group["elasticity"] = {c.name: round(c.elasticity, 3) for c in cal.candidates}
        for case in others:
            run = run_of(case)
            before = per_gpu(run, predict(run, load_profile(case.framework))[0])
            if cal is None:
                after = before
            else:
                after = per_gpu(run, predict(run, load_profile_for(case.framework, str(path)))[0])
            measured = case.measured_tokens_per_s_per_gpu
            group["rows"].append(
                {
                    "id": case.id,
                    "gpus": case.plan.num_gpus,
                    "measured": measured,
                    "before": before,
                    "after": after,
                    "error_before": before / measured - 1.0,
                    "error_after": after / measured - 1.0,
                }
            )
        out.append(group)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--csv",
        type=Path,
        action="append",
        default=None,
        help="published runs CSV (repeatable) [default: data/validation/published_runs*.csv]",
    )
    parser.add_argument("--rows", action="store_true", help="print every predicted row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = args.csv or sorted(DATA_DIR.glob("published_runs*.csv"))
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"calibrate_run: no such file {missing[0]}", file=sys.stderr)
        return 2
    all_cases, skipped = cases(paths)
    with tempfile.TemporaryDirectory() as tmp:
        groups = evaluate(all_cases, Path(tmp))
    rows = [r for g in groups for r in g["rows"]]
    summary = {
        "files": [p.name for p in paths],
        "rows_loaded": len(all_cases),
        "rows_not_mapped": skipped,
        "calibrations": len(groups),
        "rows_predicted": len(rows),
        "mape_before": mape([r["error_before"] for r in rows]),
        "mape_after": mape([r["error_after"] for r in rows]),
        "mean_of_group_mape_after": float(
            np.mean([mape([r["error_after"] for r in g["rows"]]) for g in groups if g["rows"]])
        ),
    }
    if args.json:
        print(json.dumps({"groups": groups, **summary}, indent=2))
        return 0
    print(
        f"{'source':14s} {'gpu':14s} {'calibrated on':34s} {'GPUs':>5s} {'rows':>4s} "
        f"{'MAPE before':>11s} {'after':>7s}  fitted"
    )
    for g in groups:
        before = mape([r["error_before"] for r in g["rows"]])
        after = mape([r["error_after"] for r in g["rows"]])
        fitted = g.get("fitted") or f"refused: {g.get('refused', '')[:60]}"
        print(
            f"{g['source']:14s} {g['gpu']:14s} {g['calibrated_on']:34s} {g['calibrated_gpus']:5d} "
            f"{len(g['rows']):4d} {before:10.1f}% {after:6.1f}%  {fitted}"
        )
        if args.rows:
            for r in g["rows"]:
                print(
                    f"    {r['id']:40s} {r['gpus']:6d} GPUs  measured {r['measured']:9.0f}  "
                    f"{r['error_before']:+7.1%} -> {r['error_after']:+7.1%}"
                )
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        by_source[g["source"]].extend(g["rows"])
    print(f"\n{'source':14s} {'rows':>4s} {'MAPE before':>11s} {'after':>7s}")
    for source, source_rows in by_source.items():
        before = mape([r["error_before"] for r in source_rows])
        after = mape([r["error_after"] for r in source_rows])
        print(f"{source:14s} {len(source_rows):4d} {before:10.1f}% {after:6.1f}%")
    print(
        f"\n{summary['rows_predicted']} rows predicted from {summary['calibrations']} one-run "
        f"calibrations ({summary['rows_loaded']} rows loaded from {', '.join(summary['files'])}; "
        f"{summary['rows_not_mapped']} not mapped by the loader)"
    )
    print(
        f"MAPE over rows: before {summary['mape_before']:.1f}%, after {summary['mape_after']:.1f}%; "
        f"mean of per-group MAPE after: {summary['mean_of_group_mape_after']:.1f}%"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
