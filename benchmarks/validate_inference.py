"""Predict every row of data/validation/published_inference.csv and report the error.

python benchmarks/validate_inference.py [--csv PATH] [--rows] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_inference import evaluate_inference, summarize_inference

DEFAULT_CSV = DATA_DIR / "published_inference.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--rows", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.csv.exists():
        print(f"validate_inference: no such file {args.csv}", file=sys.stderr)
        return 2
    results = evaluate_inference(args.csv)
    summary = summarize_inference(results)
    if args.json:
        print(json.dumps({"rows": [r.as_dict() for r in results], **summary}, indent=2))
        return 0
    if args.rows:
        for r in results:
            if r.predicted is None:
                print(f"{r.id:28s} {r.metric:28s} skipped: {r.skip_reason}")
            else:
                print(
                    f"{r.id:28s} {r.metric:28s} {r.measured:10.1f} {r.predicted:10.1f} {r.error:+8.1%}"
                )
    print(f"\n{'source/metric':44s} {'rows':>5s} {'MAPE':>7s}")
    for key, s in summary["per_group"].items():
        print(f"{key:44s} {s['rows']:5d} {s['mape']:7.1%}")
    print(f"{'overall':44s} {summary['overall']['rows']:5d} {summary['overall']['mape']:7.1%}")
    print(f"skipped: {len(summary['skipped'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
