"""Wide-EP decode on NVL72: the decode step of InferenceX's GB200/GB300 Dynamo-SGLang records,
term by term, with the MoE communication the recipes launch and with the engine's default.

The held-out records (``data/validation/serving/inferencex_api_dsr1.csv``) of GB200/GB300
Dynamo-SGLang DeepSeek-R1 decode on 8-48 attention-DP ranks with expert parallelism. SGLang's
default ``--moe-a2a-backend none`` gathers every DP rank's hidden states before the MoE and
reduce-scatters after (``serving_engines.yaml``, SGLang source): a ring over the whole DP group
twice per MoE layer, whose ``n - 1`` latency steps over 32-48 ranks cost 15-21 ms per step. The
recipes the records ran (srt-slurm ``sa-submission-q1-2026``,
``inferencex_api.NVL72_SGLANG_DEEPEP``) launch the decode workers with ``moe-a2a-backend:
deepep``, ``deepep-mode: low_latency``: each token's top-k copies dispatched and combined
all-to-all. Per record this prints the measured TPOT, the model's TPOT as the record is read
(the recipe's DeepEP) and with the engine's default (gather/scatter), the decode worker's
running requests per attention rank, and the model's decode step at that load term by term
(``IterationModel.parts_s``: MoE communication both ways, the expert GEMMs, attention, the rest).

    PYTHONPATH=src python benchmarks/nvl72_wide_ep.py [--id REGEX] [--limit N]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
from collections import defaultdict
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import infer, served_format, served_kv_dtype
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    ApiRow,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables

SERVING = DATA_DIR / "serving"
DEEPEP_OPTIONS = ("moe_a2a_deepep", "decode_moe_a2a_deepep")
"""The engine options a record's reading sets for the recipes' DeepEP all-to-all."""


def nvl72_rows(pattern: str = "") -> list[ApiRow]:
    """The expressible GB200/GB300 SGLang disaggregated records whose id matches ``pattern``."""
    records = load_records(SERVING / "inferencex_api_dsr1.csv")
    # Every table the held-out validation reads (validate_serving_unseen.py): without the
    # launches' stated memory fractions SGLang's default rule refuses these workers.
    rows = read_records(records, load_tables(SERVING))
    return [
        r
        for r in distinct_measurements(rows)
        if r.expressible
        and r.hardware in ("gb200", "gb300")
        and r.engine == "sglang"
        and r.mode == "disagg"
        and re.search(pattern, r.id)
    ]


def without_deepep(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the engine's default MoE communication (no DeepEP option)."""
    opts = {
        k: v for k, v in (kwargs.get("engine_options") or {}).items() if k not in DEEPEP_OPTIONS
    }
    out = {k: v for k, v in kwargs.items() if k != "engine_options"}
    if opts:
        out["engine_options"] = opts
    return out


def decode_iteration(row: ApiRow, deepep: bool) -> IterationModel:
    """The decode worker's per-iteration model, with the recipe's DeepEP all-to-all or the
    engine's default gather/scatter (as ``predict_disaggregated`` builds it)."""
    kw = row.kwargs
    spec = catalog.model(row.model)
    gpu = catalog.gpu(kw["gpu"])
    eng = engine_profile(kw["engine"]).for_device(gpu)
    if deepep:
        eng = dataclasses.replace(eng, moe_dp_communication="all_to_all")
    fmt = served_format(row.model, kw.get("weights", "auto"), spec)
    kv = served_kv_dtype(row.model, kw.get("weights", "auto"), fmt, eng, "auto", spec)
    par = Parallelism(
        tp=kw["decode_tp"], pp=1, ep=kw["decode_ep"], attention_dp=kw["decode_attention_dp"]
    )
    cluster = catalog.cluster(kw["gpu"], par.gpus)
    return _iteration_model(spec, cluster, par, fmt, kv, load_profile(eng.cost_profile), eng)


def step_parts_ms(it: IterationModel, running: float, context: float) -> dict[str, float]:
    """The decode step of ``running`` requests per attention rank at mean context ``context``,
    term by term in ms: ``communication``, ``experts``, ``attention``, ``rest``, ``total``."""
    parts = it.parts_s(np.array([running]), np.array([context]), np.zeros(1), np.zeros(1))
    ms = {k: float(v[0]) * 1e3 for k, v in parts.items()}
    shown = ("communication", "experts", "attention")
    rest = ms["total"] - sum(ms[k] for k in shown)
    return {**{k: ms[k] for k in shown}, "rest": rest, "total": ms["total"]}


def run(pattern: str = "", limit: int = 0) -> list[dict[str, Any]]:
    rows = nvl72_rows(pattern)
    if limit:
        rows = rows[:limit]
    out: list[dict[str, Any]] = []
    for row in rows:
        shipped = infer(row.model, **row.kwargs).to_dict()["options"][0]
        default = infer(row.model, **without_deepep(row.kwargs)).to_dict()["options"][0]
        running = float(shipped["running_requests_per_rank"])
        context = row.kwargs["input_len"] + row.kwargs["output_len"] / 2.0
        read_deepep = any((row.kwargs.get("engine_options") or {}).get(k) for k in DEEPEP_OPTIONS)
        out.append(
            {
                "id": row.id,
                "hardware": row.hardware,
                "decode": f"tp{row.kwargs['decode_tp']}dp{row.kwargs['decode_attention_dp']}",
                "wide": row.kwargs["decode_attention_dp"] > 1,
                "deepep": read_deepep,
                "measured_tpot_ms": row.measured["tpot_ms"],
                "model_tpot_ms": float(shipped["tpot_ms"]),
                "default_tpot_ms": float(default["tpot_ms"]),
                "running_per_rank": running,
                "step_deepep": step_parts_ms(decode_iteration(row, True), running, context),
                "step_default": step_parts_ms(decode_iteration(row, False), running, context),
            }
        )
    return out


def _err(model: float, measured: float) -> float:
    return 100.0 * (model / measured - 1.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--id", default="", help="regex on the record id")
    ap.add_argument("--limit", type=int, default=0, help="first N records only (0: all)")
    args = ap.parse_args(argv)
    lines = run(args.id, args.limit)
    print(
        f"{'record':70s} {'meas':>5s} {'model':>6s} {'err':>5s} {'dflt':>6s} {'err':>5s} "
        f"{'run/rk':>6s} | step ms (DeepEP / default): comm  experts attn  rest"
    )
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for x in lines:
        m, s, d = x["measured_tpot_ms"], x["model_tpot_ms"], x["default_tpot_ms"]
        a, b = x["step_deepep"], x["step_default"]
        name = re.sub(r"^dsr1_|_run\d+/\d+$", "", x["id"])
        print(
            f"{name[:70]:70s} {m:5.1f} {s:6.1f} {_err(s, m):+5.0f} {d:6.1f} {_err(d, m):+5.0f} "
            f"{x['running_per_rank']:6.1f} | {a['communication']:5.2f}/{b['communication']:5.2f} "
            f"{a['experts']:5.2f} {a['attention']:5.2f} {a['rest']:5.2f}"
        )
        key = f"{x['hardware']} {'attention-DP decode' if x['wide'] else 'TP decode'}"
        groups[key].append((_err(s, m), _err(d, m)))
        groups["all"].append((_err(s, m), _err(d, m)))
    print("\nTPOT error, model as read (recipe's MoE communication) vs engine default:")
    print(f"{'group':28s} {'n':>3s}  mean|e| median bias  | default mean|e| median bias")
    for key in sorted(groups):
        e = groups[key]
        shipped = [x for x, _ in e]
        default = [y for _, y in e]
        print(
            f"{key:28s} {len(e):3d}  {statistics.fmean(map(abs, shipped)):6.1f} "
            f"{statistics.median(shipped):+6.1f}       | {statistics.fmean(map(abs, default)):6.1f}"
            f"  {statistics.median(default):+6.1f}"
        )


if __name__ == "__main__":
    main()
