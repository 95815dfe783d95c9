"""The serving model against TensorRT-LLM's published maximum-throughput runs (held out).

Every throughput cell of data/validation/serving/trtllm_perf_overview.csv (TensorRT-LLM's
perf-overview, versions 0.10-1.2), read as the run trtllm-bench made
(gpuscale.validation.trtllm_bench: all requests at once, the benchmark's own batch-size and
token-budget heuristic, the version's KV share and CUDA-graph padding) and predicted with
``gpuscale.api.serving.infer``; rows it cannot read are counted with the reason. Error =
predicted / measured - 1 of the deployment's total output tokens/s.

    python benchmarks/validate_trtllm_throughput.py [--by version,model,gpu,precision,lengths,
        arch,parallel] [--rows] [--json] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

from rich.progress import track

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation.error_summary import Summary, error_summary
from gpuscale.validation.trtllm_bench import BenchRow, infer_arguments, read_rows

BY_KEYS = ("version", "model", "gpu", "precision", "lengths", "arch", "parallel")


@dataclass(frozen=True, slots=True)
class BenchResult:
    row: BenchRow
    predicted: float | None
    reason: str = ""

    @property
    def error(self) -> float:
        if self.predicted is None:
            raise ValueError(f"{self.row.label} was not predicted: {self.reason}")
        return self.predicted / self.row.measured - 1.0


def predict(row: BenchRow) -> BenchResult:
    """The model's total output tokens/s for ``row``'s run, or why it has none."""
    if reason := row.not_read():
        return BenchResult(row, None, reason)
    args = infer_arguments(row)
    if args is None:
        return BenchResult(row, None, "trtllm-bench's heuristic finds no room for one request")
    try:
        result = infer(args.pop("model"), **args).to_dict()["options"][0]
    except InputError as exc:
        return BenchResult(row, None, f"infer refused: {exc}")
    if not result["fits"]:
        return BenchResult(row, None, "does not fit")
    return BenchResult(row, float(result["output_tokens_per_s"]))


def _key(r: BenchResult, key: str) -> str:
    row = r.row
    if key == "lengths":
        return f"{row.input_len}/{row.output_len}"
    if key == "arch":
        return "moe" if row.model and catalog.model(row.model).is_moe else "dense"
    if key == "parallel":
        return row.parallel
    return str({"version": row.version, "model": row.model, "gpu": row.gpu,
                "precision": row.precision}[key])  # fmt: skip


def _summary(results: list[BenchResult]) -> Summary:
    return error_summary(r.error for r in results if r.predicted is not None)


def _line(name: str, s: Summary) -> str:
    return (
        f"{name:34s} n={s.n:4d}  mean|e| {s.mape:6.1%}  median|e| "
        f"{s.median_abs:6.1%}  bias {s.median_bias:+6.1%}  within 20% {s.within_20:4.0%}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--by", default="", help=f"group by (comma-separated): {', '.join(BY_KEYS)}"
    )
    parser.add_argument("--rows", action="store_true", help="one line per predicted row")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--limit", type=int, default=0, help="every k-th row, about N of them")
    args = parser.parse_args()
    keys = [k for k in args.by.split(",") if k]
    if bad := [k for k in keys if k not in BY_KEYS]:
        print(f"unknown --by key {', '.join(bad)}; accepted: {', '.join(BY_KEYS)}", file=sys.stderr)
        return 2
    if args.limit < 0:
        print(f"--limit must be 0 (all) or a positive count, got {args.limit}", file=sys.stderr)
        return 2
    rows = read_rows()
    if args.limit:
        rows = rows[:: max(len(rows) // args.limit, 1)]
    start = time.perf_counter()
    quiet = args.json or not sys.stderr.isatty()
    results = [predict(r) for r in track(rows, description="predicting", disable=quiet)]
    elapsed = time.perf_counter() - start
    done = [r for r in results if r.predicted is not None]
    if args.json:
        print(json.dumps({
            "rows": [{"row": r.row.label, "measured": r.row.measured, "predicted": r.predicted,
                      "reason": r.reason} for r in results],
            "summary": _summary(results).__dict__,
        }, indent=2))  # fmt: skip
        return 0
    if args.rows:
        for r in done:
            print(f"{r.row.label}  {r.row.measured:9.0f} {r.predicted:9.0f} {r.error:+7.1%}")
    print(
        f"cells: {len(rows)}, predicted: {len(done)}, not read: {len(rows) - len(done)}; "
        f"{elapsed / max(len(done), 1) * 1e3:.0f} ms per prediction"
    )
    print(_line("all", _summary(results)))
    for key in keys:
        groups: dict[str, list[BenchResult]] = defaultdict(list)
        for r in results:
            groups[_key(r, key)].append(r)
        for name in sorted(groups):
            # Groups whose every cell is not read are counted with the reasons below.
            if (s := _summary(groups[name])).n:
                print(_line(f"{key}={name}", s))
    reasons = Counter(r.reason.split(":")[0] if "catalog" in r.reason else r.reason
                      for r in results if r.predicted is None)  # fmt: skip
    for reason, n in reasons.most_common():
        print(f"not read {n:5d}: {reason}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
