"""Predict every row of data/validation/published_runs.csv and report the error.

    python benchmarks/validate.py [--csv PATH] [--json] [--rows]

Thin wrapper: the row mapping (with every assumption for missing fields) lives in
``gpuscale.validation.published_runs`` so tests can pin rows through the same code.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import yaml

from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import bands, evaluate, load_rows, summarize

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = DATA_DIR / "published_runs.csv"
BANDS = ROOT / "src" / "gpuscale" / "catalog" / "data" / "validation_bands.yaml"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rows", action="store_true", help="print every row's error")
    parser.add_argument(
        "--write-bands",
        action="store_true",
        help=f"rewrite {BANDS.relative_to(ROOT)} from these residuals",
    )
    args = parser.parse_args()
    if not args.csv.exists():
        print(f"validate: no such file {args.csv}", file=sys.stderr)
        return 2
    results = evaluate(load_rows(args.csv))
    summary = summarize(results)
    if args.write_bands:
        document = {
            "schema_version": 1,
            "source": f"benchmarks/validate.py --write-bands on {args.csv.name}, "
            f"{datetime.date.today().isoformat()}: 80th percentile of |error| per regime",
            **bands(results),
        }
        BANDS.write_text(yaml.safe_dump(document, sort_keys=False))
    if args.json:
        print(json.dumps({"rows": [r.as_dict() for r in results], **summary}, indent=2))
        return 0
    if args.rows:
        print(f"{'row':44s} {'measured':>10s} {'predicted':>10s} {'error':>8s} {'40%MFU':>8s}")
        for r in results:
            if r.predicted is None:
                print(f"{r.id:44s} skipped: {r.skip_reason}")
                continue
            print(
                f"{r.id:44s} {r.measured:10.1f} {r.predicted:10.1f} {r.error:+8.1%} {r.baseline_error:+8.1%}"
            )
    print(f"\n{'source':16s} {'rows':>5s} {'MAPE':>7s} {'40%MFU MAPE':>12s}")
    for source, s in summary["per_source"].items():
        print(f"{source:16s} {s['rows']:5d} {s['mape']:7.1%} {s['baseline_mape']:12.1%}")
    o = summary["overall"]
    print(f"{'overall':16s} {o['rows']:5d} {o['mape']:7.1%} {o['baseline_mape']:12.1%}")
    print(f"skipped rows: {summary['skipped']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
