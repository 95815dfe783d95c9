"""Where the held-out disaggregated TensorRT-LLM medians go: a fixed per-request cost, or a queue
for a decode slot?

InferenceX's held-out DeepSeek-R1 records (``data/validation/serving/inferencex_api_dsr1.csv``)
carry the measured median TTFT beside the mean. For every plain (non-speculative) disaggregated
Dynamo-TensorRT-LLM record the model can express, this prints the measured median and the
model's p50, and splits them by what the launch says about the decode slots (the recipe's decode
``max_batch_size`` x attention ranks x workers: ``inferencex_decode_caps``; H100/H200 from
``inferencex_disagg_recipes.csv``):

1. Light load, clients at most :data:`LIGHT` and no slot queue: measured median minus the
   model's p50 bounds what a fixed per-request cost of the disaggregated path (frontend and
   router hops, the KV hand-off's handshake, decode admission) could be beyond what the model
   already prices (the hand-off and decode admission, ``deployment.decode_admission_s``).
2. Clients past the slots (C > slots, InferenceX runs many recipes at 1.05-1.5x them): the
   model's p50 with the recipe's cap and, for comparison, without it (the reading before the
   caps were on file): the median there is the wait for a slot.
3. The spread: model / measured p99, p50 and mean TTFT (medians of the ratios) over every
   record: whether the modelled start burst (the p99 of a closed loop's first round) is wider
   or narrower than measured.

    PYTHONPATH=src python benchmarks/disagg_heldout_medians.py [--limit N]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    ApiRow,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import InferenceXTables
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes

SERVING = DATA_DIR / "serving"
LIGHT = 16
"""Clients at most this many, below the decode slots: light load."""


def rows() -> list[ApiRow]:
    recs = load_records(SERVING / "inferencex_api_dsr1.csv")
    out = read_records(recs, InferenceXTables(recipes=load_recipes(SERVING / RECIPES_FILE)))
    return [
        r
        for r in distinct_measurements(out)
        if r.expressible
        and r.mode == "disagg"
        and r.engine == "trtllm"
        and r.record["spec_method"] == "none"
    ]


def slots(row: ApiRow) -> int | None:
    """The decode slots the launch states: cap per attention rank x ranks x workers."""
    kw = row.kwargs
    if "decode_batch" not in kw:
        return None
    return int(kw["decode_batch"]) * int(kw["decode_attention_dp"]) * int(kw["decode_workers"])


def ttft(model: str, kw: dict[str, Any]) -> dict[str, float]:
    """The model's mean, p50 and p99 TTFT (ms)."""
    o = infer(model, **kw).to_dict()["options"][0]
    return {k: float(o[k]) for k in ("ttft_ms", "ttft_ms_p50", "ttft_ms_p99")}


def _bias(pairs: list[tuple[float, float]]) -> str:
    errs = [abs(m - x) / x for m, x in pairs]
    bias = [(m - x) / x for m, x in pairs]
    return (
        f"|e| mean {100 * statistics.mean(errs):5.1f}% median {100 * statistics.median(errs):5.1f}%"
        f"  bias {100 * statistics.median(bias):+6.1f}%"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="every k-th record, about N of them")
    args = ap.parse_args(argv)
    todo = rows()
    if args.limit:
        todo = todo[:: max(len(todo) // args.limit, 1)]
    light: list[tuple[ApiRow, float]] = []
    past: list[tuple[ApiRow, int, float, float]] = []
    ratios: list[tuple[float, float, float]] = []
    for row in todo:
        s = slots(row)
        pred = ttft(row.model, row.kwargs)
        m = row.measured
        if m.get("ttft_ms_p99"):
            ratios.append(
                (
                    pred["ttft_ms_p99"] / m["ttft_ms_p99"],
                    pred["ttft_ms_p50"] / m["ttft_ms_p50"],
                    pred["ttft_ms"] / m["ttft_ms"],
                )
            )
        if row.concurrency <= LIGHT and (s is None or row.concurrency <= s):
            light.append((row, pred["ttft_ms_p50"]))
        elif s is not None and row.concurrency > s:
            free = {k: v for k, v in row.kwargs.items() if k != "decode_batch"}
            past.append((row, s, pred["ttft_ms_p50"], ttft(row.model, free)["ttft_ms_p50"]))
    print(f"1. light load (C <= {LIGHT}, no slot queue): measured median - model p50, ms")
    print(f"{'gpu':6} {'C':>4} {'isl':>5} {'meas p50':>8} {'model p50':>9} {'diff':>7}  record")
    diffs = []
    for row, m in sorted(light, key=lambda t: (t[0].hardware, t[0].concurrency)):
        x = row.measured["ttft_ms_p50"]
        diffs.append(x - m)
        print(
            f"{row.hardware:6} {row.concurrency:4d} {row.record['isl']:>5} {x:8.0f} {m:9.0f} "
            f"{x - m:+7.0f}  {row.id.split('_disagg_')[1].split('_run')[0]}"
        )
    if diffs:
        q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
        print(
            f"   {len(diffs)} records: difference median {statistics.median(diffs):+.0f} ms, "
            f"quartiles {q[0]:+.0f} / {q[2]:+.0f} ms"
        )
    print()
    print("2. clients past the decode slots (C > slots): model p50 with the recipe's cap / without")
    print(f"{'gpu':6} {'C':>5} {'slots':>5} {'C/S':>5} {'meas p50':>8} {'capped':>7} {'free':>7}")
    for row, s, capped, free in sorted(past, key=lambda t: (t[0].hardware, t[0].concurrency)):
        print(
            f"{row.hardware:6} {row.concurrency:5d} {s:5d} {row.concurrency / s:5.2f} "
            f"{row.measured['ttft_ms_p50']:8.0f} {capped:7.0f} {free:7.0f}"
        )
    if past:
        capped_pairs = [(c, row.measured["ttft_ms_p50"]) for row, _, c, _ in past]
        free_pairs = [(f, row.measured["ttft_ms_p50"]) for row, _, _, f in past]
        print(f"   {len(past)} records, model p50 vs measured median:")
        print(f"   with the cap    {_bias(capped_pairs)}")
        print(f"   without the cap {_bias(free_pairs)}")
    print()
    print("3. spread: model / measured TTFT, median over the records")
    if ratios:
        p99, mid, mean = (statistics.median(r[i] for r in ratios) for i in range(3))
        print(f"   {len(ratios)} records: p99 {p99:.2f}  p50 {mid:.2f}  mean {mean:.2f}")


if __name__ == "__main__":
    main()
