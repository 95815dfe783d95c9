"""Open-loop (Poisson) admission wait of disaggregated deployments around their capacity: mean
queue wait and mean TTFT at fractions of the capacity, for a benchmark of 1000 requests. One
deployment where the prefill workers bind (long prompts), one where the decode workers bind.

PYTHONPATH=src python benchmarks/disagg_open_loop_wait.py
"""

from __future__ import annotations

import time

from gpuscale.api.serving import infer

BASE = {"gpu": "h200-sxm", "engine": "tensorrt-llm", "weights": "fp8"}
CASES = [
    (
        "llama3.1-70b",
        "prefill binds: 1 x TP2 prefill, 1 x TP4 decode, ISL/OSL 8192/256",
        {
            **BASE,
            "input_len": 8192,
            "output_len": 256,
            "prefill_workers": 1,
            "prefill_tp": 2,
            "decode_workers": 1,
            "decode_tp": 4,
        },
    ),
    (
        "llama3.1-70b",
        "decode binds: 1 x TP4 prefill, 1 x TP4 decode, ISL/OSL 1024/1024",
        {
            **BASE,
            "input_len": 1024,
            "output_len": 1024,
            "prefill_workers": 1,
            "prefill_tp": 4,
            "decode_workers": 1,
            "decode_tp": 4,
        },
    ),
]
FRACTIONS = (0.5, 0.9, 0.99, 1.01, 1.2)


def main() -> None:
    for model, label, kw in CASES:
        sat = infer(model, request_rate=1e5, **kw).to_dict()["options"][0]
        cap = float(sat["requests_per_s"])
        print(f"{model} {label}: capacity {cap:.3f} req/s, 1000 requests")
        print("  rate/cap   rate req/s   queue wait s   mean TTFT s   saturated   ms/prediction")
        for f in FRACTIONS:
            t0 = time.perf_counter()
            o = infer(model, request_rate=f * cap, **kw).to_dict()["options"][0]
            ms = (time.perf_counter() - t0) * 1e3
            print(
                f"  {f:8.3f}   {f * cap:10.3f}   {o['queue_wait_ms'] / 1e3:12.4f}   "
                f"{o['ttft_ms'] / 1e3:11.4f}   {o['saturated']!s:9}   {ms:8.1f}"
            )


if __name__ == "__main__":
    main()
