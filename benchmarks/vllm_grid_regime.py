"""The vLLM 0.12 Qwen3-32B gap-analysis grid: which regime its TTFT error lives in.

The largest vLLM dense group of the aggregated rows is AIConfigurator's gap-analysis grid of
vLLM 0.12.0 Qwen3-32B (BF16) on H100 (``source_file=.../aic-auto-gap-analysis/...``: TP 2/4/8 x
ISL 1024/4096 x OSL 128/512/1024 x concurrency 8-128, fixed lengths, no launch or client
recorded). The model reads it as a closed loop of lockstep cohorts (``cohort_sim``). This prints,
per prompt length and concurrency (medians over TP and OSL):

1. measured TTFT against the lockstep reading (the model as it stands) and the staggered steady
   state (lengths that differ at all), and measured TTFT in units of the model's TTFT of one
   request alone on the same deployment ("prompt-times");
2. TPOT error of both readings at OSL 128, where other requests' prompts are the largest share
   of a request's decode time and the two readings differ most (lockstep: a round's prompts run
   before its decodes; staggered: every decode is interrupted by the other C - 1 prompts);
3. the same grid points measured on SGLang 0.5.1.post1 (same source, same model and GPUs):
   measured TTFT and TPOT of SGLang over vLLM;
4. the lockstep reading with three token budgets (vLLM's OpenAI-server default 8192 on >= 70 GiB
   GPUs, its small-GPU 2048 and its ``LLM``-class 16384; ``EngineArgs.get_batch_defaults``,
   v0.12.0), mean |TTFT error| per prompt length. Only 8192 is what a ``vllm serve`` or Dynamo
   worker (``UsageContext.OPENAI_API_SERVER``, ``components/src/dynamo/vllm/main.py``) runs.

Diagnostic only: nothing here changes the model. ::

    PYTHONPATH=src python benchmarks/vllm_grid_regime.py
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuscale.api.serving import MAX_NUM_REQUESTS, infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gap_rows import STAGGER_CV

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
GAP = "aic-auto-gap-analysis"
BUDGETS = (2048, 8192, 16384)


def _grid(rows: list[ServingRow], backend: str, version: str) -> list[ServingRow]:
    return [
        r
        for r in rows
        if r.mode == "agg"
        and r.expressible
        and r.raw["backend"] == backend
        and r.raw["backend_version"] == version
        and r.raw["model_path"] == "Qwen/Qwen3-32B"
        and r.raw["gemm_quant_mode"] == ""
        and GAP in r.raw["silicon_data_source"]
        and "input_cv" not in r.kwargs
    ]


def _predict(r: ServingRow, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = infer(r.raw["model_path"], **{**r.kwargs, **extra}).to_dict()["options"][
        0
    ]
    return out


def _point(r: ServingRow) -> tuple[int, int, int, int]:
    return (int(r.raw["isl"]), r.concurrency, int(r.raw["tp_size"]), int(r.raw["osl"]))


def main() -> None:
    rows = distinct(load(ROWS))
    vllm = _grid(rows, "vllm", "0.12.0")
    sglang = {_point(r): r for r in _grid(rows, "sglang", "0.5.1.post1")}
    table: dict[tuple[int, int], list[dict[str, float]]] = defaultdict(list)
    budget_err: dict[tuple[int, int], list[float]] = defaultdict(list)
    times_by_tp: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    alone: dict[tuple[int, int], float] = {}
    for r in vllm:
        isl, conc, tp, osl = _point(r)
        if (isl, tp) not in alone:
            alone[(isl, tp)] = _predict(r, concurrency=1)["ttft_ms"]
        lock = _predict(r)
        stag = _predict(r, input_cv=STAGGER_CV, num_requests=MAX_NUM_REQUESTS)
        got = {
            "lock": r.ttft_ms / lock["ttft_ms"],
            "stag": r.ttft_ms / stag["ttft_ms"],
            "times": r.ttft_ms / alone[(isl, tp)],
        }
        if osl == 128:
            got["tpot_lock"] = lock["tpot_ms"] / r.tpot_ms - 1
            got["tpot_stag"] = stag["tpot_ms"] / r.tpot_ms - 1
        if (twin := sglang.get((isl, conc, tp, osl))) is not None:
            got["sg_ttft"] = twin.ttft_ms / r.ttft_ms
            got["sg_tpot"] = twin.tpot_ms / r.tpot_ms
        table[(isl, conc)].append(got)
        times_by_tp[(isl, tp, conc)].append(got["times"])
        for b in BUDGETS:
            opts = {**r.kwargs.get("engine_options", {}), "max_num_batched_tokens": b}
            pred = _predict(r, engine_options=opts)["ttft_ms"]
            budget_err[(isl, b)].append(abs(pred / r.ttft_ms - 1))

    def med(v: list[dict[str, float]], key: str, fmt: str) -> str:
        xs = [g[key] for g in v if key in g]
        return format(statistics.median(xs), fmt) if xs else "-"

    print(f"vLLM 0.12.0 Qwen3-32B H100 gap-analysis grid: {len(vllm)} rows (medians over TP, OSL)")
    print("measured TTFT / model: lockstep reading, staggered; measured TTFT in prompt-times;")
    print("TPOT error at OSL 128 (lockstep / staggered); SGLang 0.5.1.post1 / vLLM measured")
    print(
        f"{'ISL':>5s} {'C':>4s} {'n':>3s}  {'/lock':>6s} {'/stag':>6s} {'p-times':>7s}  "
        f"{'TPOT lock':>9s} {'TPOT stag':>9s}  {'SGL TTFT':>8s} {'SGL TPOT':>8s}"
    )
    for (isl, conc), v in sorted(table.items()):
        print(
            f"{isl:5d} {conc:4d} {len(v):3d}  {med(v, 'lock', '6.2f')} {med(v, 'stag', '6.2f')} "
            f"{med(v, 'times', '7.1f')}  {med(v, 'tpot_lock', '+9.0%')} "
            f"{med(v, 'tpot_stag', '+9.0%')}  {med(v, 'sg_ttft', '8.2f')} "
            f"{med(v, 'sg_tpot', '8.2f')}"
        )
    print("\nmeasured TTFT in prompt-times by TP (median over OSL; alone = one request, ms)")
    concs = sorted({k[2] for k in times_by_tp})
    for isl, tp in sorted(alone):
        cols = " ".join(
            f"c{c}: {statistics.median(times_by_tp[(isl, tp, c)]):5.1f}"
            for c in concs
            if (isl, tp, c) in times_by_tp
        )
        print(f"ISL {isl:5d} TP{tp}  alone {alone[(isl, tp)]:6.1f}  {cols}")
    print("\nlockstep reading by token budget: mean |TTFT error| per prompt length")
    for isl in sorted({k[0] for k in budget_err}):
        cols = "  ".join(f"{b}: {statistics.mean(budget_err[(isl, b)]):5.0%}" for b in BUDGETS)
        print(f"ISL {isl:5d}  {cols}")


if __name__ == "__main__":
    main()
