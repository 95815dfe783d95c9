"""Output tokens/s on the held-out InferenceX records: the model's rate against the client's, by
engine, mode and whether the run queued.

Each held-out record on hardware the model was never checked on (not H100/H200; records read
by ``gpuscale.validation.inferencex_api``) states the client's output tokens/s
(``inferencex_api.measured``: InferenceX's per-GPU figure multiplied back). A closed-loop client
whose requests queue runs the engine at its capacity, so the ratio model / measured there is the
model's error on the engine's capacity under load; below that, on the rate the clients' think
time allows. A run counts as queued when its measured median TTFT exceeds :data:`QUEUED_S`
(light-load prefills of these 1k-8k prompts take 0.1-0.5 s). Diagnostic only.

    PYTHONPATH=src python benchmarks/heldout_throughput.py [--limit N]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable

from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    ApiRow,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables

SERVING = DATA_DIR / "serving"
QUEUED_S = 2.0
"""Measured median TTFT above which a run's requests queued (seconds)."""
SEEN = ("h100", "h200")


def rows(limit: int = 0) -> list[ApiRow]:
    """The distinct expressible measurements on GPUs other than H100/H200 that state the
    client's output rate (every ``limit``-th, about ``limit`` of them, when ``limit``)."""
    out = read_records(load_records(SERVING / API_FILE), load_tables(SERVING))
    keep = [
        r
        for r in distinct_measurements(out)
        if r.expressible and r.hardware not in SEEN and "output_tokens_per_s" in r.measured
    ]
    return keep[:: max(len(keep) // limit, 1)] if limit else keep


def queued(row: ApiRow) -> bool:
    return row.measured["ttft_ms_p50"] > QUEUED_S * 1e3


def ratios(pairs: Iterable[tuple[str, float]]) -> dict[str, dict[str, float]]:
    """Per group key: n and the quartiles of the model / measured ratios."""
    groups: dict[str, list[float]] = defaultdict(list)
    for key, ratio in pairs:
        groups[key].append(ratio)
    out = {}
    for key in sorted(groups):
        v = sorted(groups[key])
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
        out[key] = {"n": len(v), "p25": q[0], "median": q[1], "p75": q[2]}
    return out


def run(limit: int = 0) -> dict[str, dict[str, dict[str, float]]]:
    by_engine: list[tuple[str, float]] = []
    sglang_queued: list[tuple[str, float]] = []
    cache: dict[str, float | None] = {}
    for row in rows(limit):
        key = json.dumps([row.model, row.kwargs], sort_keys=True)
        if key not in cache:
            try:
                o = infer(row.model, **row.kwargs).to_dict()["options"][0]
                cache[key] = float(o["output_tokens_per_s"])
            except InputError:
                cache[key] = None
        model = cache[key]
        if model is None:
            continue
        ratio = model / row.measured["output_tokens_per_s"]
        regime = "queued" if queued(row) else "not queued"
        by_engine.append((f"{row.engine} {row.mode} {regime}", ratio))
        if row.engine == "sglang" and queued(row):
            sglang_queued.append((f"{row.hardware} {row.record['precision']} {row.mode}", ratio))
    return {"by_engine": ratios(by_engine), "sglang_queued": ratios(sglang_queued)}


def _print(title: str, table: dict[str, dict[str, float]]) -> None:
    print(title)
    for key, s in table.items():
        print(
            f"  {key:<28} n={s['n']:4d}  model/measured median {s['median']:.2f} "
            f"(quartiles {s['p25']:.2f}-{s['p75']:.2f})"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=0, help="every k-th record, about N of them")
    args = ap.parse_args(argv)
    out = run(args.limit)
    _print(
        f"output tokens/s, model / client, held-out records off H100/H200 (queued: measured "
        f"median TTFT > {QUEUED_S:g} s)",
        out["by_engine"],
    )
    _print("SGLang runs that queued, by GPU, precision and mode", out["sglang_queued"])


if __name__ == "__main__":
    main()
