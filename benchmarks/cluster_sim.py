"""How fast the cluster simulator runs: jobs per second for a synthetic Philly-like trace of
100,000 jobs on the 4,096-GPU rail-optimized example cluster, per placement policy.

    python benchmarks/cluster_sim.py [--jobs 100000] [--cluster examples/rail-4096.yaml]

Times are CPU seconds of this process (one thread: BLAS/OpenMP threads set to 1 and the process
pinned to one CPU where the OS allows), so a busy machine does not distort them; wall time is
printed too. The trace offers 80% of the cluster's GPUs on average (``--load-gpus``).
Target (issue 11): 100,000 jobs in under 60 s on one core, every policy.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from gpuscale.cluster.placement import POLICIES  # noqa: E402
from gpuscale.cluster.simulate import simulate  # noqa: E402
from gpuscale.cluster.slowdown import SlowdownModel  # noqa: E402
from gpuscale.cluster.spec import load_cluster  # noqa: E402
from gpuscale.cluster.trace import synthetic_philly  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--cluster", default=str(ROOT / "examples" / "rail-4096.yaml"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    spec = load_cluster(args.cluster)
    trace = synthetic_philly(args.jobs, seed=args.seed, load_gpus=0.8 * spec.num_gpus)
    model = SlowdownModel(spec)
    print(
        f"{spec.name}: {spec.num_gpus} GPUs; {len(trace)} jobs (synthetic philly, seed {args.seed})"
    )
    print(f"{'policy':<10} {'cpu s':>7} {'wall s':>7} {'jobs/s':>9}  target < 60 s")
    for policy in POLICIES:
        c0, w0 = time.process_time(), time.perf_counter()
        result = simulate(trace, model, policy=policy)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        ok = "ok" if cpu < 60 else "MISSED"
        print(f"{policy:<10} {cpu:7.1f} {wall:7.1f} {len(trace) / cpu:9.0f}  {ok}")
        assert result.jobs_completed + result.jobs_failed == len(trace)


if __name__ == "__main__":
    main()
