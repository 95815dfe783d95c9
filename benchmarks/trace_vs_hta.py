"""Cross-check ``gpuscale trace`` against HolisticTraceAnalysis on the quantities both compute.

HTA (``pip install HolisticTraceAnalysis``, not a gpuscale dependency) reports, per rank of a GPU
trace, the communication/computation overlap (``get_comm_comp_overlap``) and the temporal
breakdown into idle / compute / non-compute time (``get_temporal_breakdown``). This script writes
a random multi-rank GPU trace (compute kernels on two streams, NCCL kernels on a third, one
ProfilerStep spanning the kernels so that both tools see the same window), runs both, and prints
the figures side by side.

    pip install HolisticTraceAnalysis   # in a separate environment: it pulls pandas, jupyter
    python benchmarks/trace_vs_hta.py --ranks 4 --kernels 20000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any


def rank_trace(rank: int, kernels: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed + rank)
    events: list[dict[str, Any]] = []
    ts = {7: 1000.0, 8: 1000.0, 20: 1000.0}
    for i in range(kernels):
        stream = rng.choice((7, 7, 8, 20))
        # Whole microseconds: HTA rounds sub-us times down on load, gpuscale keeps them.
        ts[stream] += round(rng.expovariate(1 / 8.0))
        dur = round(rng.expovariate(1 / (60.0 if stream == 20 else 20.0))) + 1
        name = (
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
            if stream == 20
            else f"sm90_gemm_{i % 7}"
        )
        # HTA needs the launch (cuda_runtime) and its correlation id to accept a kernel.
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": ts[stream] - 5,
                "dur": 3,
                "args": {"correlation": i, "External id": i},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": stream,
                "ts": ts[stream],
                "dur": dur,
                "args": {"stream": stream, "device": 0, "correlation": i, "External id": i},
            }
        )
        ts[stream] += dur
    kern = [e for e in events if e["cat"] == "kernel"]
    start = min(e["ts"] for e in kern)
    end = max(e["ts"] + e["dur"] for e in kern)
    events.append(
        {
            "ph": "X",
            "cat": "user_annotation",
            "name": "ProfilerStep#1",
            "pid": 1,
            "tid": 1,
            "ts": start,
            "dur": end - start,
            "args": {},
        }
    )
    return {
        "schemaVersion": 1,
        "deviceProperties": [],
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 0},
        "traceEvents": events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--kernels", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        print("HolisticTraceAnalysis is not installed; pip install HolisticTraceAnalysis")
        return
    from gpuscale.measure.trace import analyze

    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.ranks):
            doc = rank_trace(r, args.kernels, args.seed)
            doc["distributedInfo"]["world_size"] = args.ranks
            (Path(tmp) / f"rank{r}.json").write_text(json.dumps(doc))
        t = time.perf_counter()
        ours = analyze([tmp], workers=1)
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        hta = TraceAnalysis(trace_dir=tmp)
        overlap = hta.get_comm_comp_overlap(visualize=False)
        temporal = hta.get_temporal_breakdown(visualize=False)
        t_hta = time.perf_counter() - t
    print(
        f"{args.ranks} ranks x {args.kernels} kernels; gpuscale {t_ours:.1f} s, "
        f"HTA {t_hta:.1f} s (wall time, each with its defaults)"
    )
    print("rank | overlap % gpuscale | HTA | idle us gpuscale | HTA | compute us gpuscale | HTA")
    for r in ours.ranks:
        b = r.breakdown
        h_ov = float(overlap.loc[overlap["rank"] == r.rank, "comp_comm_overlap_pctg"].iloc[0])
        row = temporal.loc[temporal["rank"] == r.rank].iloc[0]
        print(
            f"{r.rank} | {100 * (b.overlap_ratio or 0):.2f} | {h_ov:.2f} | "
            f"{b.idle_s.sum() * 1e6:.1f} | {float(row['idle_time(us)']):.1f} | "
            f"{(b.compute_s + b.optimizer_s).sum() * 1e6:.1f} | "
            f"{float(row['compute_time(us)']):.1f}"
        )


if __name__ == "__main__":
    main()
