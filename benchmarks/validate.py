"""Predict every published measured training run (data/validation) and report the error.

    python benchmarks/validate.py [--csv PATH] [--rows] [--json]
    python benchmarks/validate.py --loso [--rows] [--json]      # leave-one-source-out
    python benchmarks/validate.py --write-bands                 # bands from LOSO residuals

Rows come from published_runs.csv and published_runs_more.csv (or one --csv file). Thin
wrapper: the row mapping (with every assumption for missing fields) lives in
``gpuscale.validation.published_runs``, the fitted values in ``gpuscale.validation.fitted``,
leave-one-source-out in ``gpuscale.validation.loso`` and the bands in
``gpuscale.validation.bands``, so tests pin the same code.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from gpuscale.validation import DATA_DIR, loso
from gpuscale.validation import bands as band_lib
from gpuscale.validation.fitted import FITTED
from gpuscale.validation.published_runs import (
    RUN_FILES,
    Result,
    cases,
    evaluate,
    load_all,
    load_rows,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1]
BANDS = ROOT / "src" / "gpuscale" / "catalog" / "data" / "validation_bands.yaml"


def _rows(csv: Path | None) -> list[dict[str, str]]:
    return load_rows(csv) if csv is not None else load_all(DATA_DIR)


def _print_rows(results: list[Result], loso_results: list[Result] | None) -> None:
    extra = f" {'LOSO':>8s}" if loso_results else ""
    label = "in-sample" if loso_results else "error"
    print(f"{'row':44s} {'measured':>10s} {'predicted':>10s} {label:>9s}{extra} {'40%MFU':>8s}")
    by_id = {r.id: r for r in loso_results or []}
    for r in results:
        if r.predicted is None:
            print(f"{r.id:44s} skipped: {r.skip_reason}")
            continue
        cell = f" {by_id[r.id].error:+8.1%}" if loso_results else ""
        mark = "  (limited)" if r.limitations else ""
        print(
            f"{r.id:44s} {r.measured:10.1f} {r.predicted:10.1f} {r.error:+9.1%}{cell} "
            f"{r.baseline_error:+8.1%}{mark}"
        )


def _plain(results: list[Result], csv: Path | None, args: argparse.Namespace) -> int:
    summary = summarize(results)
    if args.json:
        print(json.dumps({"rows": [r.as_dict() for r in results], **summary}, indent=2))
        return 0
    if args.rows:
        _print_rows(results, None)
    print(f"\n{'source':18s} {'rows':>5s} {'MAPE':>7s} {'40%MFU MAPE':>12s}")
    for source, s in summary["per_source"].items():
        print(f"{source:18s} {s['rows']:5d} {s['mape']:7.1%} {s['baseline_mape']:12.1%}")
    for label in ("overall", "expressible"):
        o = summary[label]
        print(f"{label:18s} {o['rows']:5d} {o['mape']:7.1%} {o['baseline_mape']:12.1%}")
    _print_skipped(summary)
    return 0


def _print_skipped(summary: dict[str, Any]) -> None:
    print(f"skipped rows ({len(summary['skipped'])}):")
    for line in summary["skipped"]:
        print(f"  {line}")


def _loso(rows: list[dict[str, str]], args: argparse.Namespace) -> int:
    report = loso.run(rows)
    mapped, _ = cases(rows)
    ins, out, shipped = (
        summarize(report.in_sample + report.skipped),
        summarize(report.loso + report.skipped),
        summarize(report.shipped + report.skipped),
    )
    document = band_lib.bands(report.loso)
    cover = band_lib.coverage(mapped, report.loso, document)
    held = band_lib.coverage_held_out(mapped, report.loso)
    if args.write_bands:
        BANDS.write_text(
            yaml.safe_dump(
                {
                    "schema_version": 1,
                    "source": "benchmarks/validate.py --write-bands on "
                    f"{', '.join(RUN_FILES)}, {datetime.date.today().isoformat()}: "
                    f"{band_lib.QUANTILE}th percentile of |measured/predicted - 1| of the "
                    "leave-one-source-out predictions per regime; regimes with fewer than "
                    f"{band_lib.MIN_ROWS_PER_REGIME} rows use their parent's band",
                    **document,
                },
                sort_keys=False,
            )
        )
    if args.json:
        print(
            json.dumps(
                {
                    "in_sample": ins,
                    "loso": out,
                    "shipped": shipped,
                    "fitted_all_rows": report.all_rows,
                    "folds": {f.source: f.values for f in report.folds},
                    "band_coverage": cover,
                    "band_coverage_held_out": held,
                    "rows": [
                        {**a.as_dict(), "loso_predicted": b.predicted, "loso_error": b.error}
                        for a, b in zip(report.in_sample, report.loso, strict=True)
                    ],
                },
                indent=2,
            )
        )
        return 0
    if args.rows:
        _print_rows(report.in_sample, report.loso)
    if not FITTED:
        print("\nFitted values: none remain (every profile factor cites a count or a source)")
    else:
        print("\nFitted values (refitted on the rows each informs; prior when none is allowed):")
    for fv in FITTED:
        value, n = report.all_rows[fv.name]
        print(f"  {fv.name}: shipped {fv.shipped():g}, all rows {value:g} ({n} rows)")
        for fold in report.folds:
            v, k = fold.values[fv.name]
            if (v, k) != (value, n):
                print(f"    without {fold.source}: {v:g} ({k} rows)")
    print(
        f"\n{'source':18s} {'rows':>5s} {'shipped':>8s} {'in-sample':>10s} {'LOSO':>7s} "
        f"{'40%MFU':>7s} {'band cov.':>10s} {'held-out cov.':>14s}"
    )
    for source, s in out["per_source"].items():
        print(
            f"{source:18s} {s['rows']:5d} {shipped['per_source'][source]['mape']:8.1%} "
            f"{ins['per_source'][source]['mape']:10.1%} {s['mape']:7.1%} "
            f"{s['baseline_mape']:7.1%} {cover['per_source'][source]['coverage']:10.0%} "
            f"{held['per_source'][source]['coverage']:14.0%}"
        )
    for label in ("overall", "expressible"):
        o = out[label]
        cov = (
            f" {cover['overall']['coverage']:10.0%} {held['overall']['coverage']:14.0%}"
            if label == "overall"
            else ""
        )
        print(
            f"{label:18s} {o['rows']:5d} {shipped[label]['mape']:8.1%} "
            f"{ins[label]['mape']:10.1%} {o['mape']:7.1%} {o['baseline_mape']:7.1%}{cov}"
        )
    print(
        "(expressible: rows without a recorded limitation; band cov.: share of rows inside "
        f"the band they are given; held-out cov.: bands rebuilt without the row's source; "
        f"bands are the {band_lib.QUANTILE}th percentile, so ~{band_lib.QUANTILE}% is honest)"
    )
    _print_skipped(out)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=None, help="one CSV instead of both tables")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rows", action="store_true", help="print every row's error")
    parser.add_argument(
        "--loso",
        action="store_true",
        help="leave-one-source-out: every fitted value refitted without each source",
    )
    parser.add_argument(
        "--write-bands",
        action="store_true",
        help=f"rewrite {BANDS.relative_to(ROOT)} from the LOSO residuals (implies --loso)",
    )
    args = parser.parse_args()
    if args.csv is not None and not args.csv.exists():
        print(f"validate: no such file {args.csv}", file=sys.stderr)
        return 2
    rows = _rows(args.csv)
    if args.loso or args.write_bands:
        return _loso(rows, args)
    return _plain(evaluate(rows), args.csv, args)


if __name__ == "__main__":
    raise SystemExit(main())
