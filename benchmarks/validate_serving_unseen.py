"""The serving model on runs it was never built on: InferenceX's published DeepSeek-R1 results.

``data/validation/serving/inferencex_api_dsr1.csv`` (SOURCES.md there) holds InferenceX's
measured DeepSeek-R1 benchmarks on MI300X/MI325X/MI355X, H100/H200, B200/B300 and GB200/GB300,
aggregated and disaggregated. None of them was used to build or tune the model: this is a
held-out test. Each record is read into ``gpuscale.api.infer``'s arguments
(``gpuscale.validation.inferencex_api``) or counted as not expressible with its reason; every
expressible record is predicted once and compared with the record's measured MEAN TTFT/TPOT
and, as a diagnostic, its MEDIAN (the model's figure is a mean; if it tracks the median much
better, a tail pulls the measured mean) and the model's own p50 against the measured median;
and the model's output tokens/s of the deployment against the client's.

    PYTHONPATH=src python benchmarks/validate_serving_unseen.py [--json] [--by KEY[,KEY...]]
        [--rows-csv PATH]

Groups: hardware x engine x mode, each mode and all; ``--by`` adds a split of each
hardware x engine x mode by concurrency (bucketed), lengths, precision, spec, framework, tp or
date (month). H100/H200 records are also reported apart as ``seen`` (the same deployment,
lengths, concurrency and day is an InferenceX row of ``aiconfigurator_silicon_hopper.csv``,
which the model was built against) and ``unseen``; the records on every other GPU are grouped
as ``not-hopper``: hardware the model was never checked on.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    APP_COMMIT,
    APP_PATH,
    APP_REPO,
    ROW_SYSTEMS,
    ApiRow,
    distinct_measurements,
    load_records,
    read_records,
    seen,
    seen_index,
)
from gpuscale.validation.inferencex_tables import load_tables
from gpuscale.validation.serving_rows import load

SERVING = DATA_DIR / "serving"
RECORDS = SERVING / API_FILE
HOPPER = SERVING / "aiconfigurator_silicon_hopper.csv"
BY_KEYS = ("concurrency", "lengths", "precision", "spec", "framework", "tp", "month")
_CONC_EDGES = (4, 16, 64, 256, 1024)
COMPARISONS = {
    "ttft_vs_mean": ("ttft_ms", "ttft_ms"),
    "ttft_vs_median": ("ttft_ms", "ttft_ms_p50"),
    "ttft_p50_vs_median": ("ttft_ms_p50", "ttft_ms_p50"),
    "tpot_vs_mean": ("tpot_ms", "tpot_ms"),
    "tpot_vs_median": ("tpot_ms", "tpot_ms_p50"),
    "output_tps_vs_measured": ("output_tokens_per_s", "output_tokens_per_s"),
}
"""Name -> (the model's figure, the record's measured figure): the model's mean against the
measured mean and median, the model's p50 against the measured median, and the model's output
tokens/s against the client's (``inferencex_api.measured``; the records of 2025-10-06 have none,
so that comparison counts its own n). The client's figure is its output tokens over the whole
benchmark, the start burst and the drain of the last requests included; the model's is the
operating point's, so a run's ramp shows as the model being faster (bias > 0 here)."""


PREDICTED = ("ttft_ms", "ttft_ms_p50", "tpot_ms", "tpot_ms_p50", "output_tokens_per_s")
"""The figures of ``infer``'s first option that the comparisons read."""

NEW_HARDWARE = "not-hopper"
"""Group of the records on hardware other than H100/H200, which none of the project's serving
data covers."""
TAIL_RATIO = 10.0
"""A record whose measured p99 TTFT exceeds this many times its median has a few requests that
waited far longer than the rest (``ttft_tail``): a mean over them is set by those few."""


def _bucket(c: int) -> str:
    lo = 0
    for edge in _CONC_EDGES:
        if c <= edge:
            return f"c{lo + 1}-{edge}"
        lo = edge
    return f"c>{_CONC_EDGES[-1]}"


def breakdown(row: ApiRow, key: str) -> str:
    rec = row.record
    if key == "concurrency":
        return _bucket(row.concurrency)
    if key == "lengths":
        return f"{rec['isl']}/{rec['osl']}"
    if key == "precision":
        return rec["precision"]
    if key == "spec":
        return rec["spec_method"]
    if key == "framework":
        return rec["framework"]
    if key == "tp":
        return rec["decode_tp"] if row.mode == "agg" else f"{rec['prefill_tp']}/{rec['decode_tp']}"
    if key == "month":
        return rec["date"][:7]
    raise ValueError(key)


def _natural(key: str) -> tuple[Any, ...]:
    """Sort labels with their numbers as numbers (c5-16 before c17-64)."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", key))


def _by_keys(value: str) -> list[str]:
    keys = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in keys if k not in BY_KEYS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown --by key {', '.join(bad)}; accepted: {', '.join(BY_KEYS)}"
        )
    return keys


def reason_class(reason: str) -> str:
    """A reason with its numbers taken out: records refused for one cause count together."""
    return re.sub(r"(?<![\w/.-])\d+(\.\d+)?(?![\w/-])", "N", reason)


def refusal(exc: InputError) -> str:
    """The class of an ``infer`` refusal."""
    return "infer refused: " + reason_class(str(exc))


def stats(pairs: list[tuple[dict[str, float], dict[str, float]]]) -> dict[str, Any]:
    """n and, per comparison (:data:`COMPARISONS`), mean and median |relative error| and median
    signed relative error (bias: > 0 the model is slower than measured; for throughput, faster),
    in percent, over the pairs that have the measured figure (``n`` of its own)."""
    out: dict[str, Any] = {"n": len(pairs)}
    for name, (pk, mk) in COMPARISONS.items():
        rel = [(p[pk] - m[mk]) / m[mk] for p, m in pairs if mk in m]
        absd = [abs(e) for e in rel]
        out[name] = (
            {
                "mean_abs_pct": round(100 * statistics.fmean(absd), 1),
                "median_abs_pct": round(100 * statistics.median(absd), 1),
                "median_bias_pct": round(100 * statistics.median(rel), 1),
                "n": len(rel),
            }
            if rel
            else None
        )
    if pairs:
        out["ttft_tail"] = {
            "measured_mean_over_median": round(
                statistics.median(m["ttft_ms"] / m["ttft_ms_p50"] for _, m in pairs), 2
            ),
            "model_mean_over_p50": round(
                statistics.median(p["ttft_ms"] / p["ttft_ms_p50"] for p, _ in pairs), 2
            ),
            "p99_over_median_above_10": sum(
                m["ttft_ms_p99"] > TAIL_RATIO * m["ttft_ms_p50"] for _, m in pairs
            ),
        }
    return out


ROW_FIELDS = (
    "id",
    "hardware",
    "engine",
    "mode",
    "concurrency",
    "date",
    "kind",
    "reason",
    "seen",
    "ttft_ms",
    "ttft_ms_p50",
    "ttft_ms_p99",
    "tpot_ms",
    "tpot_ms_p50",
    "output_tokens_per_s",
    "model_ttft_ms",
    "model_ttft_ms_p50",
    "model_tpot_ms",
    "model_output_tokens_per_s",
)
"""Columns of ``--rows-csv``: one line per measurement, measured and modelled side by side."""


def _row_line(
    row: ApiRow, pred: dict[str, float] | None, why: str = "", tag: str = "", kind: str = ""
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "id": row.id,
        "hardware": row.hardware,
        "engine": row.engine,
        "mode": row.mode,
        "concurrency": row.concurrency,
        "date": row.record["date"],
        "kind": kind or row.kind,
        "reason": why,
        "seen": tag,
        **{k: round(row.measured[k], 3) for k in ROW_FIELDS if k in row.measured},
    }
    for k in ("ttft_ms", "ttft_ms_p50", "tpot_ms", "output_tokens_per_s"):
        line[f"model_{k}"] = round(pred[k], 3) if pred else ""
    return line


def run(by: list[str], limit: int = 0) -> dict[str, Any]:
    t0 = time.perf_counter()
    records = load_records(RECORDS)
    rows = read_records(records, load_tables(SERVING))
    distinct = distinct_measurements(rows)
    if limit:
        distinct = distinct[:: max(len(distinct) // limit, 1)]
    index = seen_index(load(HOPPER))
    not_expressible: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    groups: dict[str, list[tuple[dict[str, float], dict[str, float]]]] = defaultdict(list)
    cache: dict[str, dict[str, float] | InputError] = {}
    seen_counts: Counter[str] = Counter(seen=0, unseen=0, seen_identical_measurement=0)
    lines: list[dict[str, Any]] = []
    for row in distinct:
        if not row.expressible:
            not_expressible[reason_class(row.reason)] += 1
            lines.append(_row_line(row, None, row.reason))
            continue
        key = json.dumps([row.model, row.kwargs], sort_keys=True)
        if key not in cache:
            try:
                o = infer(row.model, **row.kwargs).to_dict()["options"][0]
                cache[key] = {k: float(o[k]) for k in PREDICTED}
            except InputError as exc:
                cache[key] = exc
        pred = cache[key]
        if isinstance(pred, InputError):
            refused[refusal(pred)] += 1
            lines.append(_row_line(row, None, f"{pred}", kind="refused by infer"))
            continue
        pair = (pred, row.measured)
        hem = f"{row.hardware}|{row.engine}|{row.mode}"
        names = [hem, f"all|all|{row.mode}", "all|all|all", f"{row.hardware}|all|all"]
        names.append(f"all|{row.engine}|{row.mode}")
        if by:
            names.append(hem + "|" + ",".join(f"{k}={breakdown(row, k)}" for k in by))
        tag = ""
        if row.hardware in ROW_SYSTEMS:  # the GPUs of the rows the model was built against
            same, exact = seen(row, index)
            tag = "seen" if same else "unseen"
            seen_counts[tag] += 1
            seen_counts["seen_identical_measurement"] += exact
            names += [f"hopper-{tag}|all|{row.mode}", f"hopper-{tag}|all|all"]
        else:
            # Hardware the model was never checked on (the project's data is H100/H200 only).
            names += [f"{NEW_HARDWARE}|all|{row.mode}", f"{NEW_HARDWARE}|all|all"]
        for name in names:
            groups[name].append(pair)
        lines.append(_row_line(row, pred, tag=tag))
    wall = time.perf_counter() - t0
    expressible = sum(r.expressible for r in distinct)
    return {
        "source": {
            "repo": APP_REPO,
            "path": APP_PATH,
            "commit": APP_COMMIT,
            "csv": str(RECORDS.name),
        },
        "records": len(records),
        "measurements": len(distinct),
        "expressible": expressible,
        "predicted": expressible - sum(refused.values()),
        "not_expressible": dict(not_expressible.most_common()),
        "refused_by_infer": dict(refused.most_common()),
        "hopper_seen": dict(seen_counts),
        "groups": {k: stats(groups[k]) for k in sorted(groups, key=_natural)},
        "predictions": len(cache),
        "wall_s": round(wall, 1),
        "rows": lines,
    }


def _line(name: str, s: dict[str, Any]) -> str:
    def cell(c: dict[str, float] | None) -> str:
        if c is None:
            return "      -      -      -"
        return f"{c['mean_abs_pct']:6.1f} {c['median_abs_pct']:6.1f} {c['median_bias_pct']:+6.1f}"

    tail = s["ttft_tail"]
    hw, eng, mode, *rest = name.split("|")
    label = f"{hw:>13} {eng:>7} {mode:>6}" + (f" {rest[0]}" if rest else "")
    return (
        f"{label:<40} n={s['n']:4d} | {cell(s['ttft_vs_mean'])} | {cell(s['ttft_vs_median'])} | "
        f"{cell(s['ttft_p50_vs_median'])} | {cell(s['tpot_vs_mean'])} | {cell(s['tpot_vs_median'])}"
        f" | {cell(s['output_tps_vs_measured'])}"
        f" | {tail['measured_mean_over_median']:5.2f} {tail['model_mean_over_p50']:5.2f} "
        f"{tail['p99_over_median_above_10']:4d}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument(
        "--by",
        type=_by_keys,
        default=[],
        help=f"also split each hardware x engine x mode by (comma-separated): {', '.join(BY_KEYS)}",
    )
    ap.add_argument("--limit", type=int, default=0, help="every k-th measurement, about N of them")
    ap.add_argument(
        "--rows-csv",
        type=Path,
        help="also write one line per measurement (measured and modelled, or why not) here",
    )
    args = ap.parse_args(argv)
    out = run(args.by, args.limit)
    lines = out.pop("rows")
    if args.rows_csv:
        with args.rows_csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=ROW_FIELDS, lineterminator="\n")
            w.writeheader()
            w.writerows(lines)
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return
    print(
        f"records: {out['records']}, measurements: {out['measurements']}, expressible: "
        f"{out['expressible']}, predicted: {out['predicted']} ({out['predictions']} distinct "
        f"deployments); {out['wall_s']} s"
    )
    print(
        f"{'hardware engine mode':<40}        | TTFT vs mean         | TTFT vs median       |"
        " TTFT p50 vs median  | TPOT vs mean         | TPOT vs median       | output tok/s"
        "         | TTFT tail"
    )
    print(
        f"{'':<40}        "
        + "| mean|e| med|e|  bias " * 6
        + f"| mean/med (measured, model), p99>{TAIL_RATIO:g}x med"
    )
    for name, s in out["groups"].items():
        print(_line(name, s))
    print("H100/H200 seen/unseen:", out["hopper_seen"])
    print("not expressible:")
    for reason, n in out["not_expressible"].items():
        print(f"  {n:4d}  {reason}")
    for reason, n in out["refused_by_infer"].items():
        print(f"  {n:4d}  {reason}")


if __name__ == "__main__":
    main()
