"""Is the caching allocator under memory pressure in torchtitan's context-parallel rows?

For every CP row of torchtitan's H100 tables (benchmarks/llama3_h100_202412_torchtitan.md,
Tables 2 and 6; the same runs as the paper's Tables 5 and 6) print the measured reserved peak,
the card's memory, what the memory model predicts with and without PyTorch's ring-attention
buffers (costmodel/ring_attention.py ``ring_workspace_bytes``; "ring bufs" is their size, "ring
adds" what they add to the peak, zero where the loss sets it), and the throughput error of the
same configuration (benchmarks/validate.py). A pressure regime would show as measured or
predicted demand reaching the card where the throughput error jumps.

    python benchmarks/cp_memory_pressure.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.ring_attention import ring_shapes, ring_workspace_bytes
from gpuscale.validation import DATA_DIR
from gpuscale.validation import published_memory as pm
from gpuscale.validation.published_runs import evaluate, load_all

GIB = float(2**30)
RING_CONSTANTS = ("cp_ring_unfused_passes", "cp_kv_heads_repeated", "cp_kv_all_gather")
# Memory rows -> the throughput row of the same configuration (the paper's Tables 5 and 6).
SAME_RUN = {
    "torchtitan-t2-fsdp8-cp1": "torchtitan-paper-t5-1",
    "torchtitan-t2-fsdp4-cp2": "torchtitan-paper-t5-2",
    "torchtitan-t2-fsdp2-cp4": "torchtitan-paper-t5-3",
    "torchtitan-t2-fsdp1-cp8": "torchtitan-paper-t5-4",
    "torchtitan-t6-fsdp8-cp1": "torchtitan-paper-t6-1",
    "torchtitan-t6-fsdp4-cp2": "torchtitan-paper-t6-2",
    "torchtitan-t6-fsdp2-cp4": "torchtitan-paper-t6-3",
    "torchtitan-t6-fsdp1-cp8": "torchtitan-paper-t6-4",
}


def main() -> None:
    rows = {r["id"]: r for r in pm.load_rows(DATA_DIR / "published_memory_pretraining.csv")}
    errors = {r.id: r.error for r in evaluate(load_all(DATA_DIR)) if r.predicted is not None}
    capacity = catalog.gpu("h100-sxm-500w").memory_bytes / GIB
    base = load_profile("generic")
    print(f"card: h100-sxm-500w, {capacity:.1f} GiB")
    print(
        f"{'row':26s} {'cp':>3s} {'measured':>9s} {'free':>6s} {'predicted':>10s} "
        f"{'no ring':>8s} {'ring bufs':>10s} {'ring adds':>10s} {'step error':>11s}"
    )
    for mem_id, run_id in SAME_RUN.items():
        case = pm.to_case(rows[mem_id], base)
        off = dataclasses.replace(
            case.profile,
            constants={**case.profile.constants, **dict.fromkeys(RING_CONSTANTS, 0.0)},
        )
        with_ring = plan_memory(case.model, case.training, case.plan, case.profile)["reserved"]
        without = plan_memory(case.model, case.training, case.plan, off)["reserved"]
        plan = case.plan
        shapes = ring_shapes(
            case.model,
            np.array([plan.micro_batch * case.training.seq_len / plan.cp]),
            np.array([plan.tp]),
            heads_repeated=True,
        )
        buffers = ring_workspace_bytes(shapes, np.array([plan.cp]), 2.0, all_gather=True)[0]
        print(
            f"{mem_id:26s} {case.plan.cp:3d} {case.measured_gib:9.1f} "
            f"{capacity - case.measured_gib:6.1f} {with_ring / GIB:10.1f} {without / GIB:8.1f} "
            f"{buffers / GIB:10.1f} {(with_ring - without) / GIB:10.1f} {errors[run_id]:+11.1%}"
        )


if __name__ == "__main__":
    main()
