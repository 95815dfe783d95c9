"""One-run calibration on published runs: calibrate on each source's smallest run, predict the rest.

    python benchmarks/calibrate_run.py [--csv PATH ...] [--rows] [--json] [--rule R] [--fit Q]

The published training runs (``data/validation/published_runs*.csv``, every row the validation
loader maps today) are split into *stacks*: one source (publication), one GPU type (a profile
calibrated on an A100 says nothing about an H100: it is keyed by the GPU's id), one framework
profile run eager or under torch.compile (``Training.compile``: Inductor's kernels are another
stack's), and one set of what the row ran that the model cannot express (the loader's
``limitations``: MegaScale's own system vs its Megatron-LM baseline). A
user calibrates on a run of the stack they will run; predicting another stack from it is not
what one-run calibration claims.

In each stack the *smallest* run, fixed before any error is seen, is handed to ``gpuscale
calibrate run`` as the user's own measurement: fewest GPUs, then fewest parameters, then the
shortest sequence, then the fewest tokens per step, then the row id (so the choice never depends
on file order). The written profile is laid over each other row's framework, as ``--profile
FILE`` does, with the row's own stated settings (the loader's overrides) on top, and the rows are
predicted again. A row that is the calibration run published again in another metric (same
model, plan and GPUs) is not another plan and is left out; a stack with a single run has nothing
to predict and is listed as excluded, with the reason.
The calibration is ``calibrate run``'s own rule (the posterior split, ``--rule posterior``);
``--rule smallest_move`` and ``--fit QUANTITY`` give the alternatives for comparison. Nothing
here is chosen from the predicted rows.
Printed: per stack, the model's error on the calibration run itself, what moved (and its share
of the gap), and the mean absolute percentage error (MAPE) of the predicted rows before (no
calibration) and after; per source and over all predicted rows; ``--rows`` adds each row's
error.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale.api.calibrate_run import profile_yaml
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.errors import InputError
from gpuscale.planner.calibrate_run import (
    QUANTITIES,
    RULES,
    Measured,
    Run,
    calibrate_run,
    predict,
    profile_document,
)
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, load_rows, to_case, with_overrides


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


def stack_of(case: Case) -> tuple[str, str, str, tuple[str, ...]]:
    """Source, GPU, framework profile (eager or compiled), and what the row ran that the model
    cannot express."""
    framework = case.framework + ("+compile" if case.training.compile else "")
    return (case.source, case.cluster.device.id, framework, case.limitations)


def smallest(members: list[Case]) -> Case:
    """The run a user would measure first: fewest GPUs, fewest parameters, shortest sequence,
    fewest tokens per step, then the id (never the file order, never the error)."""
    return min(
        members,
        key=lambda c: (
            c.plan.num_gpus,
            total_params(c.model),
            c.training.seq_len,
            c.plan.global_batch * c.training.seq_len,
            c.id,
        ),
    )


def same_run(a: Case, b: Case) -> bool:
    """``b`` is ``a``'s run published a second time (another metric of the same job: the row is
    not another plan, and predicting it from ``a`` would test nothing)."""

    def key(c: Case) -> tuple[Any, ...]:
        return (
            total_params(c.model),
            c.model.num_layers,
            c.model.hidden_size,
            c.plan,
            c.training,
            c.cluster.device.id,
            c.cluster.num_gpus,
        )

    return key(a) == key(b)


DIFFERENCES: dict[str, str] = {
    "model": "model size (GEMM shapes, non-GEMM share)",
    "gpus": "GPU count (communication share)",
    "seq": "sequence length (attention share)",
    "pp": "pipeline depth (bubble, P2P)",
    "tp": "tensor parallel size (TP communication, GEMM shapes)",
    "precision": "precision (GEMM curve)",
}
"""What can differ between the calibration run and a predicted row, and the terms it moves."""


def differences(anchor: Case, case: Case) -> list[str]:
    """The :data:`DIFFERENCES` between the calibration run and ``case``."""
    out = []
    if total_params(case.model) != total_params(anchor.model):
        out.append("model")
    if case.plan.num_gpus != anchor.plan.num_gpus:
        out.append("gpus")
    if case.training.seq_len != anchor.training.seq_len:
        out.append("seq")
    if case.plan.pp != anchor.plan.pp:
        out.append("pp")
    if case.plan.tp != anchor.plan.tp:
        out.append("tp")
    if case.training.precision != anchor.training.precision:
        out.append("precision")
    return out


def _row_step(case: Case, profile: Any) -> float:
    return predict(run_of(case), with_overrides(profile, case.overrides))[0]


def source_and_gpu(case: Case) -> tuple[str, str, str, tuple[str, ...]]:
    """The coarser grouping (``--by source``): every stack of a source on one GPU type together,
    calibrated on the smallest run among them (to compare with the stack protocol)."""
    return (case.source, case.cluster.device.id, "*", ())


def evaluate(
    all_cases: list[Case],
    folder: Path,
    by: str = "stack",
    only: str | None = None,
    rule: str = "posterior",
    spreads: Mapping[tuple[str, str, str, tuple[str, ...]], Mapping[str, float]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per stack: the calibration and each other row before and after; and the stacks left out
    with the reason. ``spreads``: per stack key, the prior spreads ``rule="empirical"`` uses
    (``benchmarks/calibrate_prior.py`` computes them without the stack's own source)."""
    groups: dict[tuple[str, str, str, tuple[str, ...]], list[Case]] = defaultdict(list)
    for case in all_cases:
        groups[(stack_of if by == "stack" else source_and_gpu)(case)].append(case)
    out, excluded = [], []
    for n, (key, members) in enumerate(groups.items()):
        source, gpu, _framework, limits = key
        anchor = smallest(members)
        others = [c for c in members if c is not anchor and not same_run(anchor, c)]
        if not others:
            twins = [c.id for c in members if c is not anchor]
            excluded.append(
                f"{source} {gpu} {anchor.framework}: one run ({anchor.id}"
                + (f"; {', '.join(twins)} is the same run in another metric" if twins else "")
                + "), nothing to predict"
            )
            continue
        anchor_run = run_of(anchor)
        measured_step = anchor_run.tokens_per_step / (
            anchor.measured_tokens_per_s_per_gpu * anchor_run.cluster.num_gpus
        )
        group: dict[str, Any] = {
            "source": source,
            "gpu": gpu,
            "framework": anchor.framework,
            "not_expressible": list(limits),
            "calibrated_on": anchor.id,
            "calibrated_gpus": anchor.plan.num_gpus,
            "rows": [],
        }
        start = with_overrides(load_profile(anchor.framework), anchor.overrides)
        try:
            cal = calibrate_run(
                anchor_run,
                Measured(step_s=measured_step),
                start,
                only=only,
                rule=rule,
                spreads=None if spreads is None else spreads[key],
            )
        except InputError as exc:
            cal = None
            group["refused"] = str(exc)
        path = folder / f"stack-{n}.yaml"
        if cal is not None:
            doc = profile_document(cal, anchor_run, name=path.stem, framework=anchor.framework)
            path.write_text(profile_yaml(doc))
            group["anchor_error"] = cal.predicted_step_s_before and (
                measured_step / cal.predicted_step_s_before - 1.0
            )
            group["fitted"] = "; ".join(
                f"{f.name} {f.before:.3g} -> {f.after:.3g} ({f.change:+.0%}"
                + (f", {f.share:.0%} of the gap)" if len(cal.throughput) > 1 else ")")
                for f in cal.throughput
                if f.share is None or abs(f.share) >= 0.05 or len(cal.throughput) == 1
            )
            group["why"] = [f.why for f in cal.throughput]
            group["identifiable"] = cal.identifiable
            group["also_consistent"] = [c.name for c in cal.also_consistent]
            group["elasticity"] = {c.name: round(c.elasticity, 3) for c in cal.candidates}
        for case in others:
            run = run_of(case)
            before = per_gpu(run, _row_step(case, load_profile(case.framework)))
            if cal is None:
                after = before
            else:
                after = per_gpu(run, _row_step(case, load_profile_for(case.framework, str(path))))
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
                    "differs_in": differences(anchor, case),
                }
            )
        out.append(group)
    return out, excluded


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
    parser.add_argument(
        "--by",
        choices=["stack", "source"],
        default="stack",
        help="calibrate once per stack (the protocol) or once per source and GPU type, "
        "across its stacks [default: stack]",
    )
    parser.add_argument(
        "--rule",
        choices=[r for r in RULES if r != "empirical"],
        default="posterior",
        help="how the calibration run's gap is attributed: split by prior uncertainty "
        "(posterior, what calibrate run does) or all on the quantity with the smallest move in "
        "prior spreads (smallest_move, the rule before) [default: posterior]",
    )
    parser.add_argument(
        "--fit",
        choices=list(QUANTITIES),
        default=None,
        help="fit this quantity on every run instead of the rule's choice (for comparison; "
        "'compute' is what calibrate run fitted before the rule)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = args.csv or sorted(DATA_DIR.glob("published_runs*.csv"))
    missing = [p for p in paths if not p.exists()]
    if missing:
        print(f"calibrate_run: no such file {missing[0]}", file=sys.stderr)
        return 2
    all_cases, skipped = cases(paths)
    with tempfile.TemporaryDirectory() as tmp:
        groups, excluded = evaluate(all_cases, Path(tmp), args.by, args.fit, args.rule)
    rows = [r for g in groups for r in g["rows"]]
    summary = {
        "files": [p.name for p in paths],
        "rows_loaded": len(all_cases),
        "rows_not_mapped": skipped,
        "grouping": args.by,
        "fit": args.fit or args.rule,
        "calibrations": len(groups),
        "excluded": excluded,
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
        f"{'source':16s} {'gpu':14s} {'framework':16s} {'calibrated on':34s} {'GPUs':>5s} "
        f"{'its error':>9s} {'rows':>4s} {'MAPE before':>11s} {'after':>7s}"
    )
    for g in groups:
        before = mape([r["error_before"] for r in g["rows"]])
        after = mape([r["error_after"] for r in g["rows"]])
        fitted = g.get("fitted") or f"refused: {g.get('refused', '')[:60]}"
        if "fitted" in g and not g["identifiable"]:
            fitted += f" (not identifiable: {', '.join(g['also_consistent'])} also consistent)"
        error = f"{g['anchor_error']:+8.1%}" if "anchor_error" in g else f"{'-':>8s}"
        print(
            f"{g['source']:16s} {g['gpu']:14s} {g['framework']:16s} {g['calibrated_on']:34s} "
            f"{g['calibrated_gpus']:5d} {error} {len(g['rows']):4d} {before:10.1f}% {after:6.1f}%"
        )
        print(f"    fitted: {fitted}")
        if "anchor_error" in g and g["rows"]:
            # A one-run calibration moves every row by about the calibration run's own error:
            # it helps only where that error is the stack's (same sign and size as the rest).
            rest = float(np.mean([r["error_before"] for r in g["rows"]]))
            worst = sorted(g["rows"], key=lambda r: -abs(r["error_after"]))[:2]
            print(
                f"    the other rows before: mean {rest:+.1%} "
                f"({'same sign as' if rest * g['anchor_error'] > 0 else 'opposite sign to'} the "
                "calibration run); largest after: "
                + ", ".join(f"{r['id']} {r['error_after']:+.1%}" for r in worst)
            )
        if g["not_expressible"]:
            print(f"    stack runs what the model cannot express: {g['not_expressible'][0][:90]}")
        if args.rows:
            for r in g["rows"]:
                print(
                    f"    {r['id']:40s} {r['gpus']:6d} GPUs  measured {r['measured']:9.0f}  "
                    f"{r['error_before']:+7.1%} -> {r['error_after']:+7.1%}  "
                    f"differs in: {', '.join(r['differs_in']) or '-'}"
                )
    by_source: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for g in groups:
        by_source[g["source"]].extend(g["rows"])
    print(f"\n{'source':16s} {'rows':>4s} {'MAPE before':>11s} {'after':>7s}")
    for source, source_rows in by_source.items():
        before = mape([r["error_before"] for r in source_rows])
        after = mape([r["error_after"] for r in source_rows])
        print(f"{source:16s} {len(source_rows):4d} {before:10.1f}% {after:6.1f}%")
    for line in excluded:
        print(f"excluded: {line}")
    # What differs from the calibration run, and how well the calibration carries across it.
    print(
        f"\n{'differs from the calibration run in':52s} {'rows':>4s} {'MAPE before':>11s} {'after':>7s}"
    )
    for key, words in DIFFERENCES.items():
        for label, sel in ((words, True), ("  same " + key, False)):
            picked = [r for r in rows if (key in r["differs_in"]) == sel]
            if picked:
                print(
                    f"{label:52s} {len(picked):4d} "
                    f"{mape([r['error_before'] for r in picked]):10.1f}% "
                    f"{mape([r['error_after'] for r in picked]):6.1f}%"
                )
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
