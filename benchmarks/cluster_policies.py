"""Placement policies side by side on the synthetic Philly-like trace and the real Philly trace.

    python benchmarks/cluster_policies.py [--jobs 100000] [--orders fifo,sjf]

Synthetic: 100,000 jobs at 80% offered load on examples/rail-4096.yaml. Real: the 82,247 jobs
of data/validation/cluster/philly_pollux.csv (Pollux's processing of the Philly trace, which
offers about 374 busy GPUs on average) on examples/fat-tree-512.yaml (73% load, non-blocking)
and on examples/rail-4096.yaml (9% load, 1:7 above the pod). Ratios are topology-aware
over first-fit on the same trace and queue order.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuscale.cluster.placement import POLICIES
from gpuscale.cluster.simulate import simulate
from gpuscale.cluster.slowdown import SlowdownModel
from gpuscale.cluster.spec import load_cluster
from gpuscale.cluster.trace import read_trace, synthetic_philly
from gpuscale.validation import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]


def run(label: str, cluster: str, trace_kind: str, jobs: int, orders: list[str]) -> None:
    spec = load_cluster(ROOT / "examples" / cluster)
    if trace_kind == "real":
        trace = read_trace(Path(DATA_DIR) / "cluster" / "philly_pollux.csv")
    else:
        trace = synthetic_philly(jobs, seed=0, load_gpus=0.8 * spec.num_gpus)
    model = SlowdownModel(spec)
    print(f"\n{label}: {len(trace)} jobs on {spec.name} ({spec.num_gpus} GPUs)")
    head = f"{'order':<5} {'policy':<10} {'avg JCT h':>9} {'p95 JCT h':>9} {'queue h':>8} {'makespan d':>10} {'util':>5} {'thru GPUs':>9} {'speed':>5} {'frag':>5}"
    print(head)
    for order in orders:
        results = {p: simulate(trace, model, policy=p, order=order) for p in POLICIES}
        for p, r in results.items():
            print(
                f"{order:<5} {p:<10} {r.avg_jct_s / 3600:9.2f} {r.p95_jct_s / 3600:9.2f} "
                f"{r.avg_queue_s / 3600:8.2f} {r.makespan_s / 86400:10.1f} {r.gpu_utilization:5.3f} "
                f"{r.throughput_gpus:9.1f} {r.mean_speed:5.3f} {r.fragmentation:5.3f}"
            )
        t, f = results["topology"], results["first-fit"]
        print(
            f"{order:<5} topology/first-fit: avg JCT x{f.avg_jct_s / t.avg_jct_s:.2f} better, "
            f"p95 x{f.p95_jct_s / t.p95_jct_s:.2f}, throughput x{t.throughput_gpus / f.throughput_gpus:.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--orders", default="fifo,sjf")
    args = parser.parse_args()
    orders = args.orders.split(",")
    run("synthetic Philly-like", "rail-4096.yaml", "synthetic", args.jobs, orders)
    run("real Philly (Pollux processing)", "fat-tree-512.yaml", "real", 0, orders)
    run("real Philly (Pollux processing), oversubscribed core", "rail-4096.yaml", "real", 0, orders)


if __name__ == "__main__":
    main()
