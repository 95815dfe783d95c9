"""Speed of the serving model: one prediction, and the SLO search on 8-72 GPUs (wall and
process CPU seconds: on a shared machine the CPU time is the steadier figure), with the
search's winner and runner-up.

PYTHONPATH=src python benchmarks/serving_speed.py
"""

from __future__ import annotations

import statistics
import time

from gpuscale.api.serving import infer
from gpuscale.api.serving_search import search

CASES = [
    ("llama3.1-70b", {"tp": 4, "weights": "fp8", "engine": "vllm"}),
    ("llama3.1-8b", {"tp": 1, "weights": "bf16", "engine": "tensorrt-llm"}),
    ("deepseek-r1", {"tp": 8, "ep": 8, "attention_dp": 8, "weights": "fp8", "engine": "sglang"}),
    ("gpt-oss-120b", {"tp": 2, "weights": "nvfp4", "engine": "vllm"}),
]


def main() -> None:
    infer("llama3.1-8b", gpu="h100-sxm", concurrency=1)  # warm the catalog and profile caches
    times: list[float] = []
    cpu: list[float] = []
    for model, kw in CASES:
        for conc in (1, 8, 64, 512):
            for isl, osl in ((1024, 1024), (8192, 1024), (1024, 8192)):
                t, c = time.perf_counter(), time.process_time()
                infer(model, gpu="h200-sxm", concurrency=conc, input_len=isl, output_len=osl, **kw)
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
    for name, ts in (("wall", sorted(times)), ("CPU", sorted(cpu))):
        print(
            f"one prediction ({len(ts)} cases, {name}): median {1e3 * statistics.median(ts):.1f} "
            f"ms, p90 {1e3 * ts[int(0.9 * len(ts))]:.1f} ms, max {1e3 * ts[-1]:.1f} ms"
        )
    for model, weights, gpus in (
        ("llama3.1-70b", "fp8", 8),
        ("llama3.1-70b", "fp8", 32),
        ("llama3.1-70b", "fp8", 72),
        ("deepseek-r1", "fp8", 16),
        ("deepseek-r1", "fp8", 72),
    ):
        t, c = time.perf_counter(), time.process_time()
        r = search(
            model,
            gpu="h200-sxm",
            gpus=gpus,
            engine="vllm",
            weights=weights,
            slo_ttft_ms=2000,
            slo_tpot_ms=50,
        )
        dt, dc = time.perf_counter() - t, time.process_time() - c
        top = [f"{s.cand.label} {s.per_gpu:,.0f}" for s in r.ranked[:2]] + ["none"] * 2
        print(
            f"search {model} on {gpus:3d} GPUs: {r.evaluated:4d} deployments, {r.priced} priced, "
            f"{dt:.2f} s ({dc:.2f} s CPU); winner {top[0]}, runner-up {top[1]} tok/s/GPU"
        )


if __name__ == "__main__":
    main()
