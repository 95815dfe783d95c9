"""Predict every row of data/validation/published_memory.csv with the memory model and
report the error per row, per source and overall, against a constant guess.

    python benchmarks/validate_memory.py [--csv PATH] [--json]

Thin wrapper: the row mapping (every assumption for a missing field, the counter each row
reports) lives in ``gpuscale.validation.published_memory`` so tests pin rows through the same
code.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_memory import as_dict, evaluate, load_rows, summarize

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CSV = DATA_DIR / "published_memory.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not args.csv.exists():
        print(f"validate_memory: no such file {args.csv}", file=sys.stderr)
        return 2
    results = evaluate(load_rows(args.csv))
    summary = summarize(results)
    if args.json:
        print(
            json.dumps(
                {
                    "summary": as_dict(summary),
                    "rows": [
                        {
                            "id": r.id,
                            "source": r.source,
                            "counter": r.counter,
                            "measured_gib": r.measured_gib,
                            "predicted_gib": r.predicted_gib,
                            "error": r.error,
                            "skip_reason": r.skip_reason,
                        }
                        for r in results
                    ],
                },
                indent=2,
            )
        )
        return 0
    print(f"{'row':44s} {'counter':9s} {'measured':>8s} {'predicted':>9s} {'error':>7s}")
    for r in results:
        if r.predicted_gib is None:
            print(f"{r.id:44s} {'':9s} {r.measured_gib:8.2f} {'skipped':>9s}  {r.skip_reason}")
        else:
            print(
                f"{r.id:44s} {r.counter:9s} {r.measured_gib:8.2f} {r.predicted_gib:9.2f} "
                f"{100 * r.error:+6.1f}%"
            )  # type: ignore[operator]
    print()
    print(f"rows: {summary.rows}, predicted: {summary.predicted}")
    for source, value in summary.mape_by_source.items():
        count = sum(1 for r in results if r.source == source and r.predicted_gib is not None)
        print(f"MAPE {source:10s} {100 * value:5.1f}%  ({count} rows)")
    print(f"MAPE overall    {100 * summary.mape:5.1f}%")
    print(
        f"baseline: constant {summary.constant_gib:.2f} GiB (median measured, chosen in "
        f"hindsight): MAPE {100 * summary.constant_mape:.1f}%"
    )
    print(f"baseline: 16 bytes/parameter over the GPUs: MAPE {100 * summary.naive_mape:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
