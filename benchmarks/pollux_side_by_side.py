"""The Pollux OSDI'21 artifact's workloads on gpuscale's simulator, next to its published results.

    python benchmarks/pollux_side_by_side.py [--loads 0.5,1.0,1.5,2.0]

Each of the artifact's 8 workloads (160 jobs; data/validation/cluster/pollux_artifact) runs on
examples/pollux-64.yaml (its 16 x 4-T4 testbed) with every job's speed on every placement from
the artifact's measured step times (gpuscale.cluster.pollux). Jobs are rigid, as in the
artifact's Tiresias+TunedJobs baseline: the workload's GPUs and batch size. Printed: average JCT
per workload and its mean over the 8, per queue order and placement policy, next to the
artifact's published results (simulator/results-jobload/*/summary.json); then the ratios
topology-aware / first-fit on the same workloads and order, and las-topology / published
Tiresias. Orders are decided at every event, and for las also every 60 s only ("las@60s"), as
the artifact's simulator does (``--interval 60``).
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from gpuscale.cluster import pollux
from gpuscale.cluster.placement import POLICIES
from gpuscale.cluster.simulate import ORDERS, simulate
from gpuscale.cluster.spec import load_cluster
from gpuscale.validation import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]
ARTIFACT = Path(DATA_DIR) / "cluster" / "pollux_artifact"
PUBLISHED = ("tiresias", "optimus", "pollux")
INTERVAL_S = 60.0
"""The artifact simulator's scheduling interval (``simulator.py --interval``, default 60)."""


def published() -> dict[tuple[str, str, str], float]:
    with open(ARTIFACT / "published_jobload.csv", newline="") as fh:
        return {
            (r["policy"], r["job_load"], r["workload"]): float(r["avg_jct_s"])
            for r in csv.DictReader(fh)
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loads", default="1.0", help="comma list of " + ",".join(pollux.JOB_LOADS))
    args = ap.parse_args()
    spec = load_cluster(ROOT / "examples" / "pollux-64.yaml")
    apps = pollux.load_applications(ARTIFACT / "traces")
    pub = published()
    runs = [(o, p, 0.0) for o in ORDERS for p in POLICIES]
    runs += [("las", p, INTERVAL_S) for p in POLICIES]
    for load in args.loads.split(","):
        table: dict[str, list[float]] = {}
        names: list[str] = []
        for path in pollux.workload_paths(ARTIFACT, load):
            w = pollux.read_workload(path, apps)
            names.append(w.name)
            model = pollux.ArtifactSpeeds(spec, apps, w.classes)
            table.setdefault("ideal", []).append(float(w.trace.work_s.mean()))
            for order, policy, every in runs:
                r = simulate(w.trace, model, policy=policy, order=order, schedule_every_s=every)
                assert r.jobs_completed == r.jobs_submitted == len(w.trace)
                tag = f"{order}@{every:g}s" if every else order
                table.setdefault(f"{tag}/{policy}", []).append(r.avg_jct_s)
            for p in PUBLISHED:
                table.setdefault(f"published {p}", []).append(pub[p, load, w.name])
        print(f"\nJob load {load}x: avg JCT (s) per workload, 160 jobs each x{load}, {spec.name}")
        short = [n.replace("workload-", "w") for n in names]
        print(f"{'':<20}" + "".join(f"{s:>7}" for s in short) + f"{'mean':>8}")
        for label, values in table.items():
            cells = "".join(f"{v:>7.0f}" for v in values)
            print(f"{label:<20}{cells}{np.mean(values):>8.0f}")
        mean = {k: float(np.mean(v)) for k, v in table.items()}
        print("topology / first-fit:", end="")
        for tag in (*ORDERS, f"las@{INTERVAL_S:g}s"):
            print(f"  {tag} {mean[f'{tag}/topology'] / mean[f'{tag}/first-fit']:.3f}", end="")
        print()
        tiresias = mean["published tiresias"]
        for run in ("las/topology", "las/first-fit", "las@60s/topology", "las@60s/first-fit"):
            print(f"{run} / published tiresias: {mean[run] / tiresias:.3f}")
        print(f"published optimus / tiresias: {mean['published optimus'] / tiresias:.3f}")


if __name__ == "__main__":
    main()
