"""Open-loop (Poisson) admission wait of disaggregated deployments around their capacity: mean
queue wait and mean TTFT at fractions of the capacity, for a benchmark of 1000 requests. One
deployment where the prefill workers bind (long prompts), two where the decode workers bind
(their KV pages; 64 running requests). Then the median wall time of one prediction over
every rate and deployment, three times over (wall and CPU time: the CPU time is less
sensitive to a shared machine's load).

PYTHONPATH=src python benchmarks/disagg_open_loop_wait.py
"""

from __future__ import annotations

import statistics
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
    (
        "llama3.1-70b",
        "decode binds at 64 running: 1 x TP4 prefill, 1 x TP4 decode (--decode-batch 64), 1024/1024",
        {
            **BASE,
            "input_len": 1024,
            "output_len": 1024,
            "prefill_workers": 1,
            "prefill_tp": 4,
            "decode_workers": 1,
            "decode_tp": 4,
            "decode_batch": 64,
        },
    ),
]
FRACTIONS = (0.5, 0.9, 0.99, 1.01, 1.2)
REPEATS = 3


def main() -> None:
    loads: list[tuple[dict[str, object], float]] = []
    for model, label, kw in CASES:
        sat = infer(model, request_rate=1e5, **kw).to_dict()["options"][0]
        cap = float(sat["requests_per_s"])
        print(f"{model} {label}: capacity {cap:.3f} req/s, 1000 requests")
        print("  rate/cap   rate req/s   queue wait s   mean TTFT s   saturated")
        for f in FRACTIONS:
            o = infer(model, request_rate=f * cap, **kw).to_dict()["options"][0]
            loads.append((kw, f * cap))
            print(
                f"  {f:8.3f}   {f * cap:10.3f}   {o['queue_wait_ms'] / 1e3:12.4f}   "
                f"{o['ttft_ms'] / 1e3:11.4f}   {o['saturated']}"
            )
        print("  " + next((n for n in o["notes"] if n.startswith("open-loop queue")), "-"))
    wall, cpu = [], []
    for _ in range(REPEATS):
        for kw, rate in loads:
            t0, c0 = time.perf_counter(), time.process_time()
            infer("llama3.1-70b", request_rate=rate, **kw)
            wall.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
    print(
        f"one prediction: median {statistics.median(wall):.1f} ms wall, "
        f"{statistics.median(cpu):.1f} ms CPU, over {len(wall)}"
    )


if __name__ == "__main__":
    main()
