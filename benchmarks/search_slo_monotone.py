"""Whether the SLO search's p99 TTFT and p99 TPOT grow with the load, as the bisection that
resolves an SLO crossing (``steady_state.refine_edge``) assumes: every candidate's walk of the
problems below, on the grid and on the resolved curve (grid plus the loads refined near its
edge), up to its top feasible load. Prints, per problem, the candidates and the ones where a
p99 falls somewhere as the load rises (with the largest relative fall), and along how many
walks "feasible and meets the SLO" changes more than once (where the bisection's bracket, the
last grid load that meets it and the next, would not hold the only crossing).

Then the same of ``infer``'s own open-loop p99s, which the search's exact pricing scans and
bisects (``search.price``): for each place the search prices, 120 rates from 1% of its
capacity to the capacity. A DeepSeek-R1 TensorRT-LLM split (the last problem) had its TTFT p99
fall 305 -> 295 ms as the rate rose (the decode admission's ``ceil`` of mean times, fixed in
branch search-polish).

PYTHONPATH=src python benchmarks/search_slo_monotone.py
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving_search import search, search_context
from gpuscale.planner.serving.search import candidates, open_loop_reader, walk

PROBLEMS: list[tuple[str, str, int, dict[str, Any]]] = [
    ("llama3.1-70b", "h200-sxm", 8, {"engine": "vllm", "weights": "fp8", "slo": (2000, 50)}),
    ("llama3.1-70b", "h200-sxm", 16, {"engine": "vllm", "weights": "fp8", "slo": (500, 30)}),
    ("llama3.1-70b", "h200-sxm", 8, {"engine": "vllm", "weights": "fp8", "slo": (300, 20)}),
    ("llama3.1-8b", "h100-sxm", 8, {"engine": "tensorrt-llm", "weights": "auto", "slo": (200, 8)}),
    ("qwen3-32b", "h100-sxm", 8, {"engine": "sglang", "weights": "auto", "slo": (1000, 30)}),
    ("deepseek-r1", "h200-sxm", 16, {"engine": "sglang", "weights": "auto", "slo": (2000, 50)}),
    ("deepseek-r1", "h200-sxm", 16, {"engine": "vllm", "weights": "fp8", "slo": (1000, 30)}),
    (
        "deepseek-r1",
        "h200-sxm",
        16,
        {"engine": "tensorrt-llm", "weights": "auto", "slo": (297, 1e6)},
    ),
]
OPEN_LOOP_RATES = 120


def _falls(v: np.ndarray) -> float:
    """Largest relative fall between neighbouring points (0 when non-decreasing)."""
    if v.size < 2:
        return 0.0
    return float(np.max(np.maximum(v[:-1] - v[1:], 0.0) / np.maximum(v[:-1], 1e-30)))


def main() -> None:
    for model, gpu, gpus, kw in PROBLEMS:
        spec = catalog.model(model)
        ctx = search_context(
            spec,
            model=model,
            gpu=gpu,
            gpus=gpus,
            engine=kw["engine"],
            weights=kw["weights"],
            slo_ttft_ms=kw["slo"][0],
            slo_tpot_ms=kw["slo"][1],
        )
        ttft, tpot = ctx.slo_ttft_s, ctx.slo_tpot_s
        cands = candidates(spec, gpus, ctx.cluster.gpus_per_node)
        n = bad = 0
        multi = [0, 0]
        worst = 0.0
        for c in cands:
            for resolve in (False, True):
                w = walk(c, ctx, resolve)
                if w is None or not w.feasible.any():
                    continue
                n += 1
                top = int(np.flatnonzero(w.feasible)[-1]) + 1
                fall = max(_falls(w.ttft99[:top]), _falls(w.tpot99[:top]))
                bad += fall > 0.0
                worst = max(worst, fall)
                meets = w.feasible & (w.ttft99 <= ttft) & (w.tpot99 <= tpot)
                multi[resolve] += int(np.count_nonzero(np.diff(meets.astype(int)))) > 1
        print(
            f"{model} {gpus} x {gpu} {kw['engine']} SLO {kw['slo'][0]}/{kw['slo'][1]} ms: "
            f"{n} walks (grid and resolved), {bad} with a p99 falling somewhere "
            f"(largest fall {worst:.2e}); meeting the SLO changes more than once along "
            f"{multi[0]} grid and {multi[1]} resolved walks"
        )
    for model, gpu, gpus, kw in PROBLEMS:
        slo = {"slo_ttft_ms": kw["slo"][0], "slo_tpot_ms": kw["slo"][1]}
        r = search(model, gpu=gpu, gpus=gpus, engine=kw["engine"], weights=kw["weights"], **slo)
        ctx = search_context(
            catalog.model(model), model=model, gpu=gpu, gpus=gpus, engine=kw["engine"],
            weights=kw["weights"], **slo,
        )  # fmt: skip
        n = bad = multi_ = 0
        worst = 0.0
        for s in (s for s in r.ranked if s.exact):
            read = open_loop_reader(s.cand, ctx)
            if read is None:
                continue
            cap = read(1e9).requests_per_s
            ps = [read(x) for x in np.geomspace(0.01 * cap, cap, OPEN_LOOP_RATES)]
            ttft99 = np.array([p.pct["ttft_p99"] for p in ps])
            tpot99 = np.array([p.pct["tpot_p99"] for p in ps])
            fall = max(_falls(ttft99), _falls(tpot99))
            n += 1
            bad += fall > 0.0
            worst = max(worst, fall)
            meets = (ttft99 <= ctx.slo_ttft_s) & (tpot99 <= ctx.slo_tpot_s)
            multi_ += int(np.count_nonzero(np.diff(meets.astype(int)))) > 1
        print(
            f"infer open loop, {model} {gpus} x {gpu} {kw['engine']}: {n} priced places, {bad} "
            f"with a p99 falling somewhere (largest fall {worst:.2e}); meeting the SLO changes "
            f"more than once along {multi_}"
        )


if __name__ == "__main__":
    main()
