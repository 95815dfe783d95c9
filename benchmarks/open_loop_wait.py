"""Open-loop (Poisson) admission wait around the capacity: mean queue wait and mean TTFT at
fractions of the capacity, for one aggregated deployment and a benchmark of 1000 requests.

PYTHONPATH=src python benchmarks/open_loop_wait.py
"""

from __future__ import annotations

from gpuscale.api.serving import infer

CASES = [
    ("llama3.1-8b", {"gpu": "h100-sxm", "engine": "vllm"}),
    ("llama3.1-70b", {"gpu": "h200-sxm", "engine": "vllm", "tp": 4, "weights": "fp8"}),
]
FRACTIONS = (0.5, 0.9, 0.99, 0.999, 1.01, 1.2)


def main() -> None:
    for model, kw in CASES:
        sat = infer(model, request_rate=1e5, **kw).to_dict()["options"][0]
        cap = float(sat["requests_per_s"])
        print(f"{model} {kw}: capacity {cap:.3f} req/s, 1000 requests, ISL/OSL 1024/1024")
        print("  rate/cap   rate req/s   queue wait s   mean TTFT s   saturated")
        for f in FRACTIONS:
            o = infer(model, request_rate=f * cap, **kw).to_dict()["options"][0]
            print(
                f"  {f:8.3f}   {f * cap:10.3f}   {o['queue_wait_ms'] / 1e3:12.4f}   "
                f"{o['ttft_ms'] / 1e3:11.4f}   {o['saturated']}"
            )


if __name__ == "__main__":
    main()
