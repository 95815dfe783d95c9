"""Predict every row of the memory validation files with the memory model and report the error
per row, per source, per file and overall, against constant guesses.

    python benchmarks/validate_memory.py [--csv PATH ...] [--loso] [--rows] [--json]

By default both files are read: data/validation/published_memory.csv (fine-tuning peaks) and
published_memory_pretraining.csv (torchtitan pre-training peaks, ``max_memory_reserved``).
Each row is predicted in the counter it reports (allocated, reserved or whole-device).

``--loso`` adds leave-one-source-out: each source predicted without any value its own rows
supplied. The values taken from rows are listed in one place,
``gpuscale.validation.published_memory.FITTED_FROM_ROWS``, and printed here; sources that
supplied none have LOSO equal to in-sample. The constant-guess baselines are printed both ways
(median of all rows in hindsight; median of the other sources' rows).

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
from gpuscale.validation.published_memory import (
    FILES,
    FITTED_FROM_ROWS,
    Result,
    as_dict,
    evaluate,
    load_rows,
    summarize,
)


def _rows_table(results: list[Result], loso: dict[str, Result] | None) -> None:
    extra = f" {'LOSO':>7s}" if loso else ""
    print(f"{'row':44s} {'counter':9s} {'measured':>8s} {'predicted':>9s} {'error':>7s}{extra}")
    for r in results:
        if r.predicted_gib is None or r.error is None:
            print(f"{r.id:44s} {'':9s} {r.measured_gib:8.2f} {'skipped':>9s}  {r.skip_reason}")
            continue
        line = (
            f"{r.id:44s} {r.counter:9s} {r.measured_gib:8.2f} {r.predicted_gib:9.2f} "
            f"{100 * r.error:+6.1f}%"
        )
        held = loso[r.id].error if loso else None
        if held is not None:
            line += f" {100 * held:+6.1f}%"
        print(line)
    print()


def _report(name: str, results: list[Result], loso: list[Result] | None) -> dict[str, object]:
    summary = summarize(results)
    held = summarize(loso) if loso else None
    print(f"== {name}: {summary.rows} rows, {summary.predicted} predicted")
    header = f"{'source':12s} {'rows':>4s} {'in-sample':>9s}" + (f" {'LOSO':>7s}" if held else "")
    print(header)
    for source, value in summary.mape_by_source.items():
        count = sum(1 for r in results if r.source == source and r.predicted_gib is not None)
        line = f"{source:12s} {count:4d} {100 * value:8.1f}%"
        if held:
            line += f" {100 * held.mape_by_source[source]:6.1f}%"
        print(line)
    line = f"{'overall':12s} {summary.predicted:4d} {100 * summary.mape:8.1f}%"
    if held:
        line += f" {100 * held.mape:6.1f}%"
    print(line)
    others = (
        "n/a (one source)"
        if summary.constant_loso_mape != summary.constant_loso_mape
        else f"{100 * summary.constant_loso_mape:.1f}%"
    )
    print(
        f"baseline: constant {summary.constant_gib:.2f} GiB (median measured, in hindsight): "
        f"MAPE {100 * summary.constant_mape:.1f}%; median of the other sources: {others}"
    )
    print(f"baseline: 16 bytes/parameter over the GPUs: MAPE {100 * summary.naive_mape:.1f}%")
    print()
    out: dict[str, object] = {"in_sample": as_dict(summary)}
    if held:
        out["loso"] = as_dict(held)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--csv", type=Path, action="append", help="file(s); default: both")
    parser.add_argument("--loso", action="store_true", help="add leave-one-source-out")
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    paths = args.csv or [DATA_DIR / name for name in FILES]
    for path in paths:
        if not path.exists():
            print(f"validate_memory: no such file {path}", file=sys.stderr)
            return 2
    document: dict[str, object] = {"fitted_from_rows": FITTED_FROM_ROWS, "files": {}}
    pooled: list[Result] = []
    pooled_loso: list[Result] = []
    per_file: dict[str, tuple[list[Result], list[Result] | None]] = {}
    for path in paths:
        rows = load_rows(path)
        results = evaluate(rows)
        loso = evaluate(rows, loso=True) if args.loso else None
        per_file[path.name] = (results, loso)
        pooled += results
        pooled_loso += loso or []
    if args.json:
        files: dict[str, object] = {}
        for name, (results, loso) in per_file.items():
            held = {r.id: r for r in loso} if loso else {}
            files[name] = {
                "summary": {"in_sample": as_dict(summarize(results))}
                | ({"loso": as_dict(summarize(loso))} if loso else {}),
                "rows": [
                    {
                        "id": r.id,
                        "source": r.source,
                        "counter": r.counter,
                        "measured_gib": r.measured_gib,
                        "predicted_gib": r.predicted_gib,
                        "error": r.error,
                        "loso_error": held[r.id].error if held else None,
                        "skip_reason": r.skip_reason,
                    }
                    for r in results
                ],
            }
        document["files"] = files
        print(json.dumps(document, indent=2))
        return 0
    for name, (results, loso) in per_file.items():
        if args.rows:
            _rows_table(results, {r.id: r for r in loso} if loso else None)
        _report(name, results, loso)
    if len(per_file) > 1:
        _report("all memory rows", pooled, pooled_loso or None)
    if args.loso:
        print("values taken from validation rows (refit without their source under LOSO):")
        for source, what in FITTED_FROM_ROWS.items():
            print(f"  {source}: {what}")
        print("  nothing else: LOSO equals in-sample for every other source")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
