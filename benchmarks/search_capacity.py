"""The SLO search read off the grid, final where it can reach the shown places (the default), and
final for every candidate: CPU time, candidates priced by infer's own prediction
(``planner.serving.search.price``; 0 before branch search-agree), winner and runner-up.

PYTHONPATH=src python benchmarks/search_capacity.py
"""

from __future__ import annotations

import time
from typing import Any

from gpuscale.api.serving_search import RESOLVED_PLACES, SearchResult, search

CASES: list[tuple[str, int, dict[str, Any]]] = [
    # benchmarks/serving_speed.py's searches
    ("llama3.1-70b", 8, {"slo_ttft_ms": 2000, "slo_tpot_ms": 50}),
    ("llama3.1-70b", 32, {"slo_ttft_ms": 2000, "slo_tpot_ms": 50}),
    ("llama3.1-70b", 72, {"slo_ttft_ms": 2000, "slo_tpot_ms": 50}),
    ("deepseek-r1", 16, {"slo_ttft_ms": 2000, "slo_tpot_ms": 50}),
    ("deepseek-r1", 72, {"slo_ttft_ms": 2000, "slo_tpot_ms": 50}),
    # the README's tour
    ("llama3.1-70b", 16, {"slo_ttft_ms": 500, "slo_tpot_ms": 30}),
    # tight targets: the SLO, not the capacity, stops the winners (resolved since search-slo)
    ("llama3.1-70b", 8, {"slo_ttft_ms": 300, "slo_tpot_ms": 20}),
    ("llama3.1-70b", 72, {"slo_ttft_ms": 300, "slo_tpot_ms": 20}),
    ("deepseek-r1", 72, {"slo_ttft_ms": 1000, "slo_tpot_ms": 30}),
]


def _top(r: SearchResult, k: int) -> str:
    if len(r.ranked) <= k:
        return "-"
    s = r.ranked[k]
    return f"{s.cand.label} {s.goodput_tokens_per_s / s.cand.gpus:,.0f} [{s.limit}]"


def main() -> None:
    search("llama3.1-8b", gpu="h200-sxm", gpus=1)  # warm the catalog and profile caches
    for model, gpus, slo in CASES:
        for name, places in (("grid", 0), ("pruned", RESOLVED_PLACES), ("every", None)):
            t = time.process_time()
            r = search(
                model,
                gpu="h200-sxm",
                gpus=gpus,
                engine="vllm",
                weights="fp8",
                resolved_places=places,
                **slo,
            )
            dt = time.process_time() - t
            print(
                f"{model} {gpus:2d} GPUs {name:6s}: {r.evaluated:4d} deployments, "
                f"{getattr(r, 'priced', 0):4d} priced, CPU {dt:.2f} s; "
                f"winner {_top(r, 0)}; "
                f"runner-up {_top(r, 1)} tok/s/GPU"
            )


if __name__ == "__main__":
    main()
