"""Serving model against measured engines under load (data/validation/serving, 1,884 rows).

For every row: the continuous-batching model (``gpuscale.api.infer``) and the static-batch
model it replaces (``estimate_inference`` with the client concurrency as the batch). Prints mean
and median absolute relative error of mean TTFT and mean TPOT per engine and per mode
(aggregated / disaggregated), the rows skipped (with why), and the time per prediction.

    PYTHONPATH=src python benchmarks/validate_serving.py [--limit N] [--by KEY[,KEY...]]

``--by`` breaks the errors down further (per engine and mode) by one or more of: concurrency
(bucketed), isl, osl, model, arch (dense / MoE), tp (GPUs per engine or per decode worker),
gpu, regime (how the model answered: closed-loop cohort simulation or steady state), workers
(disaggregated rows that name their worker counts or leave them empty).
"""

from __future__ import annotations

import argparse
import csv
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

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
STATIC_WEIGHTS = {"fp8": "fp8", "fp8_block": "fp8", "nvfp4": "int4", "int4_wo": "int4", "": "bf16"}


def _int(v: str, default: int = 1) -> int:
    return int(v) if v not in ("", None) and int(v) > 0 else default


def _par(r: dict[str, str], prefix: str = "") -> dict[str, int]:
    # aiconfigurator: GPUs per instance = tp * pp * attention_dp; moe_tp * moe_ep spans them.
    tp = _int(r[f"{prefix}tp_size"])
    dp = _int(r[f"{prefix}attention_dp_size"])
    ep = _int(r[f"{prefix}moe_ep_size"])
    moe = _int(r[f"{prefix}moe_tp_size"]) * ep
    launch = re.search(r"_tp(\d+)_ep(\d+)_", r["id"])
    if not prefix and launch and tp == moe and tp > int(launch.group(1)) and ep > 1:
        # Some rows record tp_size as TP x EP (64 for `--tp 8 --ep 8` on one node); the id
        # keeps the launch flags, which give the GPUs.
        tp, ep = int(launch.group(1)), int(launch.group(2))
        moe = tp
    if moe > tp * dp and moe % tp == 0:
        # vLLM rows leave attention_dp empty when --data-parallel-size runs attention DP under
        # an expert group wider than TP: the MoE group size gives the GPUs.
        dp = moe // tp
    return {"tp": tp * dp, "attention_dp": dp, "ep": ep}


def concurrency(r: dict[str, str]) -> int:
    """The client's concurrency: ``batch_size``, or for disaggregated rows the
    ``silicon_concurrency=`` of the source (as SOURCES.md says)."""
    if r["batch_size"]:
        return int(r["batch_size"])
    for part in r["silicon_data_source"].split(";"):
        key, _, value = part.strip().partition("=")
        if key == "silicon_concurrency":
            return int(value)
    # A few disaggregated rows name no client concurrency: their decode workers' total batch
    # (decode_batch_size per worker) is the requests in flight.
    if r["decode_batch_size"]:
        return int(r["decode_batch_size"]) * _int(r["decode_num_workers"])
    raise InputError(f"row {r['id']} names no concurrency")


def predict(r: dict[str, str]) -> dict[str, Any]:
    kw: dict[str, Any] = {
        "gpu": SYSTEMS[r["system"]],
        "engine": ENGINES[r["backend"]],
        "weights": r["gemm_quant_mode"] or "bf16",
        "input_len": int(r["isl"]),
        "output_len": int(r["osl"]),
        "concurrency": concurrency(r),
    }
    if r["mode"] == "disagg":
        p, d = _par(r, "prefill_"), _par(r, "decode_")
        kw.update(
            prefill_workers=_int(r["prefill_num_workers"]),
            prefill_tp=p["tp"],
            prefill_ep=p["ep"],
            prefill_attention_dp=p["attention_dp"],
            decode_workers=_int(r["decode_num_workers"]),
            decode_tp=d["tp"],
            decode_ep=d["ep"],
            decode_attention_dp=d["attention_dp"],
            prefill_batch=_int(r["prefill_batch_size"]) if r["prefill_batch_size"] else None,
            decode_batch=_int(r["decode_batch_size"]) if r["decode_batch_size"] else None,
        )
    else:
        kw.update(_par(r), pp=_int(r["pp_size"]))
    return infer(r["model_path"], **kw).to_dict()["options"][0]


def static(r: dict[str, str]) -> tuple[float, float] | None:
    """The static-batch model on the same row (aggregated parallelism; TP only)."""
    try:
        spec = catalog.model(r["model_path"])
        par = _par(r) if r["mode"] == "agg" else _par(r, "decode_")
        tp = par["tp"]
        inf = Inference(
            weight_dtype=STATIC_WEIGHTS[r["gemm_quant_mode"]],  # type: ignore[arg-type]
            kv_dtype="bf16",
            batch=concurrency(r),
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


def breakdown(r: dict[str, str], o: dict[str, Any], key: str) -> str:
    """The value of one ``--by`` key for row ``r`` predicted as ``o``."""
    if key == "concurrency":
        return _bucket(concurrency(r))
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
        return str(_par(r, "" if r["mode"] == "agg" else "decode_")["tp"])
    if key == "gpu":
        return r["system"]
    if key == "workers":
        # Disaggregated rows that leave the worker counts empty are read as one worker each.
        if r["mode"] != "disagg":
            return "-"
        named = r["prefill_num_workers"] and r["decode_num_workers"]
        return "named" if named else "unnamed"
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
    args = ap.parse_args()
    by = list(args.by) + (["model"] if args.by_model and "model" not in args.by else [])
    with ROWS.open() as f:
        rows = list(csv.DictReader(f))
    if args.limit:
        rows = rows[:: max(len(rows) // args.limit, 1)]
    err: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    skipped: list[str] = []
    static_refused = 0
    t0 = time.perf_counter()
    for r in rows:
        groups = [
            ("all", "all"),
            (r["backend"], "all"),
            ("all", r["mode"]),
            (r["backend"], r["mode"]),
        ]
        ttft, tpot = float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"])
        try:
            o = predict(r)
        except InputError as exc:
            skipped.append(f"{r['id']}: {exc}")
            continue
        if by:
            label = "|".join(f"{k}={breakdown(r, o, k)}" for k in by)
            groups.append((r["backend"], r["mode"] + ":" + label))
        s = static(r)
        for g in groups:
            err[(*g, "ttft")].append(abs(o["ttft_ms"] - ttft) / ttft)
            err[(*g, "tpot")].append(abs(o["tpot_ms"] - tpot) / tpot)
            err[(*g, "b_ttft")].append((o["ttft_ms"] - ttft) / ttft)
            err[(*g, "b_tpot")].append((o["tpot_ms"] - tpot) / tpot)
            if s is not None:
                err[(*g, "s_ttft")].append(abs(s[0] - ttft) / ttft)
                err[(*g, "s_tpot")].append(abs(s[1] - tpot) / tpot)
        if s is None:
            static_refused += 1
    dt = time.perf_counter() - t0
    n = len(rows) - len(skipped)
    print(
        f"rows: {len(rows)}, predicted: {n}, skipped: {len(skipped)}; "
        f"{1e3 * dt / max(len(rows), 1):.1f} ms per row (both models)"
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
