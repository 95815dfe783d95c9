"""Serving model against measured engines under load (data/validation/serving, 1,884 rows).

For every row: the continuous-batching model (``gpuscale.api.infer``) and the static-batch
model it replaces (``estimate_inference`` with the client concurrency as the batch). Prints mean
and median absolute relative error of mean TTFT and mean TPOT per engine and per mode
(aggregated / disaggregated), the rows skipped (with why), and the time per prediction.

    PYTHONPATH=src python benchmarks/validate_serving.py [--limit N] [--by KEY[,KEY...]]

``--by`` breaks the errors down further (per engine and mode) by one or more of: concurrency
(bucketed), isl, osl, model, arch (dense / MoE), tp (GPUs per engine or per decode worker),
gpu, regime (how the model answered: closed-loop cohort simulation or steady state), workers
(how a disaggregated row's deployment is known: stated, twin, or guess for the rows that are not
expressible; ``gpuscale.validation.serving_rows``).

Each measurement counts once: 134 rows repeat an earlier row's deployment, load and measured
TTFT/TPOT to the last digit (the InferenceX exports of 2026-03-25 and 2026-04-06 and
AIConfigurator's db-dump carry the same runs), and 30 rows of two gap-analysis files repeat the
2026-04-06 export to 0.01 ms (``serving_rows.rounded_copies``; read as those runs)
(``serving_runs.distinct``); ``--every-copy`` counts each copy.

Disaggregated rows whose worker counts are not stated (and that have no twin row naming them,
nor a single entry of the InferenceX configuration they ran from)
are not expressible: they are counted apart, never in the ``disagg`` figures; the ``disagg-guess``
lines show them predicted with one worker of each kind, for comparison only. Aggregated rows whose
recorded concurrency is the client's cap, not the engine's load
(``serving_clients.client_cap_only``), are counted apart the same way, on ``agg-guess`` lines
predicted as recorded.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
from collections import defaultdict
from typing import Any

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.costmodel.inference import estimate_inference
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.specs.training import Inference
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_fields import ENGINES, SYSTEMS, parallelism
from gpuscale.validation.serving_rows import NOT_EXPRESSIBLE, ServingRow, load
from gpuscale.validation.serving_runs import distinct

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
STATIC_WEIGHTS = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "int4", "int4_wo": "int4", "": "bf16"}
GUESS = "guess"
"""Not-expressible rows are also predicted with the reading used before the rows were classed
(``ServingRow.guess``), shown on lines of their own and never counted with the expressible rows."""


def predict(row: ServingRow) -> dict[str, Any]:
    return infer(row.raw["model_path"], **row.kwargs).to_dict()["options"][0]


def guess(row: ServingRow) -> dict[str, Any]:
    """The comparison reading of a row that is not expressible (``ServingRow.guess``)."""
    return infer(row.raw["model_path"], **row.guess).to_dict()["options"][0]


def static(row: ServingRow) -> tuple[float, float] | None:
    """The static-batch model on the same row (aggregated parallelism; TP only)."""
    r = row.raw
    try:
        spec = catalog.model(r["model_path"])
        par = parallelism(r) if r["mode"] == "agg" else parallelism(r, "decode_")
        tp = par["tp"]
        inf = Inference(
            weight_dtype=STATIC_WEIGHTS[r["gemm_quant_mode"]],  # type: ignore[arg-type]
            kv_dtype="bf16",
            batch=row.concurrency,
            context_len=int(r["isl"]) + int(r["osl"]),
        )
        cl = catalog.cluster(SYSTEMS[r["system"]], tp)
        est = estimate_inference(
            spec,
            cl,
            inf,
            tp=tp,
            input_len=int(r["isl"]),
            output_len=int(r["osl"]),
            profile=load_profile(ENGINES[r["backend"]] if r["backend"] == "trtllm" else "generic"),
        )
        return est.ttft_s * 1e3, est.tpot_s * 1e3
    except (InputError, ValueError, KeyError):
        return None


BY_KEYS = ("concurrency", "isl", "osl", "model", "arch", "tp", "gpu", "regime", "workers")
_CONC_EDGES = (1, 4, 16, 64, 256)


def _bucket(c: int) -> str:
    lo = 0
    for edge in _CONC_EDGES:
        if c <= edge:
            return f"c{lo + 1}-{edge}" if edge > lo + 1 else f"c{edge}"
        lo = edge
    return f"c>{_CONC_EDGES[-1]}"


def breakdown(row: ServingRow, o: dict[str, Any], key: str) -> str:
    """The value of one ``--by`` key for ``row`` predicted as ``o``."""
    r = row.raw
    if key == "concurrency":
        return _bucket(row.concurrency)
    if key in ("isl", "osl"):
        return r[key]
    if key == "model":
        return r["model_path"].split("/")[-1][:16]
    if key == "arch":
        try:
            return "moe" if catalog.model(r["model_path"]).is_moe else "dense"
        except InputError:
            return "?"
    if key == "tp":
        return str(parallelism(r, "" if r["mode"] == "agg" else "decode_")["tp"])
    if key == "gpu":
        return r["system"]
    if key == "workers":
        # How a disaggregated row's deployment is known (gpuscale.validation.serving_rows).
        return "-" if r["mode"] != "disagg" else row.kind.replace("not expressible", GUESS)
    if key == "regime":
        notes = " ".join(o.get("notes", []))
        return "cohorts" if "cohorts" in notes else "steady"
    raise ValueError(key)


def _by_keys(value: str) -> list[str]:
    keys = [k.strip() for k in value.split(",") if k.strip()]
    bad = [k for k in keys if k not in BY_KEYS]
    if bad:
        raise argparse.ArgumentTypeError(
            f"unknown --by key {', '.join(bad)}; accepted: {', '.join(BY_KEYS)}"
        )
    return keys


def _natural(key: tuple[str, str]) -> tuple[Any, ...]:
    """Sort labels with their numbers as numbers (c5-16 before c17-64)."""
    parts = re.split(r"(\d+)", "|".join(key))
    return tuple(int(p) if p.isdigit() else p for p in parts)


def _summary(errs: list[float]) -> str:
    if not errs:
        return "      -        -"
    return f"{100 * statistics.fmean(errs):7.1f}% {100 * statistics.median(errs):7.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--by-model", action="store_true", help="also group by model")
    ap.add_argument(
        "--by",
        type=_by_keys,
        default=[],
        help=f"also group by these keys (comma-separated): {', '.join(BY_KEYS)}",
    )
    ap.add_argument(
        "--every-copy",
        action="store_true",
        help="count a measurement once per row that repeats it (by default each measurement once: "
        "gpuscale.validation.serving_runs.distinct)",
    )
    ap.add_argument(
        "--classes",
        action="store_true",
        help="list every disaggregated or not expressible row with its class and the assumption "
        "or reason, and stop",
    )
    args = ap.parse_args()
    if args.classes:
        for row in load(ROWS):
            if row.mode == "disagg" or not row.expressible:
                why = row.reason or "; ".join(row.assumptions) or "workers and concurrency stated"
                print(f"{row.id}\t{row.kind}\t{why}")
        return
    by = list(args.by) + (["model"] if args.by_model and "model" not in args.by else [])
    copies = load(ROWS)
    rows = copies if args.every_copy else distinct(copies)
    if args.limit:
        rows = rows[:: max(len(rows) // args.limit, 1)]
    err: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    skipped: list[str] = []
    kinds: dict[str, int] = defaultdict(int)
    static_refused = 0
    t0 = time.perf_counter()
    for row in rows:
        kinds[f"{row.mode} {row.kind}"] += 1
        mode = row.mode if row.expressible else f"{row.mode}-{GUESS}"
        groups = [(row.engine, mode), ("all", mode)]
        if row.expressible:
            groups += [("all", "all"), (row.engine, "all")]
        try:
            o = predict(row) if row.expressible else guess(row)
        except InputError as exc:
            skipped.append(f"{row.id}: {exc}")
            continue
        if by:
            label = "|".join(f"{k}={breakdown(row, o, k)}" for k in by)
            groups.append((row.engine, mode + ":" + label))
        st = static(row)
        ttft, tpot = row.ttft_ms, row.tpot_ms
        for g in groups:
            err[(*g, "ttft")].append(abs(o["ttft_ms"] - ttft) / ttft)
            err[(*g, "tpot")].append(abs(o["tpot_ms"] - tpot) / tpot)
            err[(*g, "b_ttft")].append((o["ttft_ms"] - ttft) / ttft)
            err[(*g, "b_tpot")].append((o["tpot_ms"] - tpot) / tpot)
            if st is not None:
                err[(*g, "s_ttft")].append(abs(st[0] - ttft) / ttft)
                err[(*g, "s_tpot")].append(abs(st[1] - tpot) / tpot)
        if st is None:
            static_refused += 1
    dt = time.perf_counter() - t0
    n = len(rows) - len(skipped)
    print(
        f"rows: {len(copies)}, measurements: {len(rows)} "
        f"({'every copy counted' if args.every_copy else 'repeated exports counted once'}), "
        f"predicted: {n}, skipped: {len(skipped)}; "
        f"{1e3 * dt / max(len(rows), 1):.1f} ms per row (both models)"
    )
    print(
        "row classes: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items()))
        + f" (the {NOT_EXPRESSIBLE} rows are the -{GUESS} lines, not in all/agg/disagg)"
    )
    print(
        "                         serving model: TTFT mean/median   TPOT mean/median"
        "   | static batch: TTFT mean/median   TPOT mean/median   | serving bias TTFT TPOT"
    )
    keys = sorted({(k[0], k[1]) for k in err}, key=_natural)
    for eng, mode in keys:
        cnt = len(err[(eng, mode, "ttft")])
        print(
            f"{eng:>7} {mode:>7} n={cnt:5d}   {_summary(err[(eng, mode, 'ttft')])}  "
            f"{_summary(err[(eng, mode, 'tpot')])}   | {_summary(err[(eng, mode, 's_ttft')])}  "
            f"{_summary(err[(eng, mode, 's_tpot')])}   | median bias "
            f"{100 * statistics.median(err[(eng, mode, 'b_ttft')]):+5.0f}% "
            f"{100 * statistics.median(err[(eng, mode, 'b_tpot')]):+5.0f}%"
        )
    print(f"static-batch model refused {static_refused} rows (does not fit / unknown format)")
    for s in skipped[:20]:
        print("skipped", s)


if __name__ == "__main__":
    main()
