"""Diagnosis rules: each one names a bottleneck, the figures behind it, and what to try next.

Every rule reads only figures the report prints, so a user can check the verdict by eye.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from gpuscale.measure.trace.collectives import CollectiveStats
from gpuscale.measure.trace.rank import RankResult
from gpuscale.measure.trace.skew import Skew


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    """When a figure becomes a finding. The first two are the article's rules of thumb
    (gpuscale issue 6: "exposed communication > 20% of step", "all-reduce CV > 20%")."""

    exposed_comm_share: float = 0.20
    """Network-bound above this share of the step spent in exposed communication."""
    collective_cv: float = 0.20
    """Jitter above this coefficient of variation of a collective's transfer time."""
    collective_min_calls: int = 8
    """Calls of one (op, size) needed before its CV means anything."""
    collective_min_share: float = 0.05
    """...and jitter only matters for a collective that takes at least this share of the
    (median) step: a noisy 1% of the step is not why a job is slow."""
    data_wait_share: float = 0.10
    """Input-bound above this share of the step with the device idle in the data loader."""
    straggler_excess: float = 0.20
    """Straggler when one rank has this much more device work per step than the others (GPU
    traces: kernel durations do not stretch when the host is busy)..."""
    straggler_excess_cpu: float = 0.50
    """...or this much on CPU-only traces, whose busy time is the wall time of host ops: other
    processes on a shared host stretch it. Identical ranks of the test jobs measured up to 28%
    apart in every step on a 2-core VM shared with other jobs."""
    straggler_consistency: float = 0.75
    """...and is the slowest in at least this fraction of the steps (not a one-off hiccup)."""
    launch_bound_kernel_s: float = 20e-6
    """Small batch when the median compute kernel is shorter than this (a few kernel launch
    latencies of ~5 us, NVIDIA CUDA C++ Best Practices Guide, "Kernel launch overhead")..."""
    launch_bound_idle_share: float = 0.20
    """...and the device idles for at least this share of the step between kernels."""
    optimizer_share: float = 0.25
    """Optimizer-bound above this share of the step. AdamW reads and writes about 16 bytes of
    state per parameter (Loshchilov & Hutter, arXiv:1711.05101, Alg. 2; fp32 master weights and
    two moments): a memory-bound pass that is a few percent of a step whose matmuls use the
    same parameters for thousands of tokens. A quarter of the step means the update is not
    amortised: too few tokens per step, an unfused per-tensor loop, or offload."""
    idle_share: float = 0.30
    """Idle-bound above this share of the step with nothing running on the device (and no
    other rule explaining it): time lost to the host between operations."""
    prediction_tolerance: float = 0.05
    """A predicted share of the step is off when the measured one differs by more than this."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Diagnosis:
    id: str
    """``network_bound``, ``input_bound``, ``jitter``, ``straggler``, ``small_batch``,
    ``optimizer_bound`` or ``idle_bound``."""
    title: str
    evidence: str
    next_step: str
    cost: float
    """Share of the (median) step this bottleneck accounts for; diagnoses are ranked by it."""
    ranks: tuple[int | None, ...] = field(default_factory=tuple)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _ms(x: float) -> str:
    return f"{1e3 * x:.2f} ms" if x < 1 else f"{x:.2f} s"


def _size(n: int | None) -> str:
    if n is None:
        return "unknown size"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def network_bound(ranks: Sequence[RankResult], limits: Thresholds) -> Diagnosis | None:
    # The rank that waits least shows the network's own cost; the others add waiting for it.
    shares = [r.breakdown.median_share("exposed_comm") for r in ranks]
    i = int(np.argmin(shares))
    if shares[i] <= limits.exposed_comm_share:
        return None
    overlap = ranks[i].breakdown.overlap_ratio
    hidden = "" if overlap is None else f"; only {_pct(overlap)} of communication overlaps compute"
    return Diagnosis(
        id="network_bound",
        title="Network-bound: the step waits for communication",
        evidence=(
            f"exposed communication is {_pct(shares[i])} of the median step even on rank "
            f"{ranks[i].rank}, the rank that waits least (limit "
            f"{_pct(limits.exposed_comm_share)}){hidden}"
        ),
        next_step=(
            "overlap more (smaller DDP buckets so all-reduce starts during backward, "
            "FSDP prefetch), send fewer bytes (bf16 or PowerSGD gradient compression "
            "hooks, gpuscale.runtime), or a larger batch per step; measure the fabric "
            "with `gpuscale bench collectives`"
        ),
        cost=shares[i],
        ranks=tuple(r.rank for r in ranks),
    )


def input_bound(ranks: Sequence[RankResult], limits: Thresholds) -> Diagnosis | None:
    hit = [(r, r.breakdown.median_share("data_wait")) for r in ranks]
    hit = [(r, s) for r, s in hit if s > limits.data_wait_share]
    if not hit:
        return None
    worst, share = max(hit, key=lambda rs: rs[1])
    which = (
        "every rank"
        if len(hit) == len(ranks) and len(ranks) > 1
        else ("rank " + ", ".join(str(r.rank) for r, _ in hit))
    )
    return Diagnosis(
        id="input_bound",
        title="Input-bound: the device idles while the data loader runs",
        evidence=(
            f"on {which} the device waits for the next batch for up to {_pct(share)} of "
            f"the median step (rank {worst.rank}; limit {_pct(limits.data_wait_share)})"
        ),
        next_step=(
            "load data in background workers (DataLoader num_workers > 0, "
            "persistent_workers, prefetch_factor, pin_memory), pre-process offline, "
            "or read from faster storage"
        ),
        cost=share,
        ranks=tuple(r.rank for r, _ in hit),
    )


def jitter(
    collectives: Sequence[CollectiveStats], step_s: float, exposed_share: float, limits: Thresholds
) -> Diagnosis | None:
    """Cost: the mean excess over the median call, over the step, and no more than the exposed
    communication (variation hidden under compute costs nothing)."""
    noisy = [
        c
        for c in collectives
        if c.calls >= limits.collective_min_calls
        and c.cv > limits.collective_cv
        and c.median_s * c.per_step >= limits.collective_min_share * step_s
    ]
    if not noisy:
        return None
    worst = max(noisy, key=lambda c: c.cv)
    return Diagnosis(
        id="jitter",
        title="Jitter: collective times vary from call to call",
        evidence=(
            f"{worst.op} of {_size(worst.bytes)}: CV {_pct(worst.cv)} over {worst.calls} "
            f"calls (mean {_ms(worst.mean_s)}, p99 {_ms(worst.p99_s)}; limit "
            f"{_pct(limits.collective_cv)}), taking each call's last-arriving rank so "
            "that waiting for a slow rank is not counted"
        ),
        next_step=(
            "check for other traffic on the fabric and for congestion (adaptive routing, "
            "QoS), pin NICs and CPU affinity, and measure repeatability with "
            "`gpuscale bench collectives`"
        ),
        cost=min(exposed_share, max(0.0, worst.mean_s - worst.median_s) * worst.per_step / step_s)
        if step_s > 0
        else 0.0,
    )


def straggler(
    skew: Skew | None, step_s: float, device: str, limits: Thresholds
) -> Diagnosis | None:
    """Cost: the others' wait for it, its extra busy time over the step."""
    limit = limits.straggler_excess if device == "gpu" else limits.straggler_excess_cpu
    if skew is None or skew.excess < limit:
        return None
    if skew.slowest_share < limits.straggler_consistency:
        return None
    return Diagnosis(
        id="straggler",
        title=f"Straggler: rank {skew.slowest_rank} is consistently slower",
        evidence=(
            f"rank {skew.slowest_rank} does {_pct(skew.excess)} more device work per step "
            f"than the other ranks' median ({_ms(skew.excess_s)} per step) and is the "
            f"slowest in {_pct(skew.slowest_share)} of {skew.steps} steps; every other "
            "rank waits for it in communication"
        ),
        next_step=(
            f"look at rank {skew.slowest_rank}'s host: thermal or power throttling, a "
            "slower or shared device, background processes, uneven data (sequence "
            "lengths) or uneven pipeline stages; `gpuscale doctor` checks the devices"
        ),
        cost=skew.excess_s / step_s if step_s > 0 else 0.0,
        ranks=(skew.slowest_rank,),
    )


def small_batch(ranks: Sequence[RankResult], limits: Thresholds) -> Diagnosis | None:
    gpu = [r for r in ranks if r.device == "gpu" and r.median_kernel_s is not None]
    hit = [
        r
        for r in gpu
        if r.median_kernel_s is not None
        and r.median_kernel_s < limits.launch_bound_kernel_s
        and r.breakdown.median_share("idle") > limits.launch_bound_idle_share
    ]
    if not hit:
        return None
    r = hit[0]
    return Diagnosis(
        id="small_batch",
        title="Small batch: kernels are too short, the GPU waits for launches",
        evidence=(
            f"median compute kernel {1e6 * (r.median_kernel_s or 0):.1f} us (limit "
            f"{1e6 * limits.launch_bound_kernel_s:.0f} us) with the device idle "
            f"{_pct(r.breakdown.median_share('idle'))} of the median step on rank {r.rank}"
        ),
        next_step=(
            "raise the micro-batch (or sequence length) per GPU, capture the step in "
            "CUDA graphs or torch.compile(mode='reduce-overhead'), fuse small ops"
        ),
        cost=r.breakdown.median_share("idle"),
        ranks=tuple(x.rank for x in hit),
    )


def optimizer_bound(ranks: Sequence[RankResult], limits: Thresholds) -> Diagnosis | None:
    shares = [r.breakdown.median_share("optimizer") for r in ranks]
    i = int(np.argmax(shares))
    if shares[i] <= limits.optimizer_share:
        return None
    return Diagnosis(
        id="optimizer_bound",
        title="Optimizer-bound: the optimizer step takes a large share of the step",
        evidence=(
            f"the optimizer step is {_pct(shares[i])} of the median step on rank "
            f"{ranks[i].rank} (limit {_pct(limits.optimizer_share)}); it is a pass over the "
            "parameters, so its share shrinks as the tokens per step grow"
        ),
        next_step=(
            "use a fused or foreach optimizer (torch.optim.AdamW(fused=True)), raise the "
            "tokens per step (micro-batch or gradient accumulation), shard the optimizer "
            "state (ZeRO-1/FSDP), and check that the optimizer state is not offloaded"
        ),
        cost=shares[i],
        ranks=tuple(
            r.rank for r, s in zip(ranks, shares, strict=True) if s > limits.optimizer_share
        ),
    )


def idle_bound(ranks: Sequence[RankResult], limits: Thresholds) -> Diagnosis | None:
    shares = [r.breakdown.median_share("idle") for r in ranks]
    i = int(np.argmax(shares))
    if shares[i] <= limits.idle_share:
        return None
    device = "GPU" if ranks[i].device == "gpu" else "training thread"
    return Diagnosis(
        id="idle_bound",
        title=f"Idle-bound: the {device} has nothing to run for much of the step",
        evidence=(
            f"no compute, communication or data loading runs for {_pct(shares[i])} of the "
            f"median step on rank {ranks[i].rank} (limit {_pct(limits.idle_share)})"
        ),
        next_step=(
            "find the host work between operations: synchronisations (.item(), .cpu(), "
            "printing or logging tensors), Python overhead, checkpoint or evaluation inside "
            "the step, sleeps; torch.compile or CUDA graphs cut launch overhead"
        ),
        cost=shares[i],
        ranks=tuple(r.rank for r, s in zip(ranks, shares, strict=True) if s > limits.idle_share),
    )


def median_step_s(ranks: Sequence[RankResult]) -> float:
    return float(np.median([np.median(r.breakdown.step_s) for r in ranks])) if ranks else 0.0


def diagnose(
    ranks: Sequence[RankResult],
    collectives: Sequence[CollectiveStats],
    skew: Skew | None,
    limits: Thresholds,
) -> list[Diagnosis]:
    """Every rule that fires, the one that accounts for most of the step first."""
    step_s = median_step_s(ranks)
    found = [
        straggler(skew, step_s, "gpu" if any(r.device == "gpu" for r in ranks) else "cpu", limits),
        network_bound(ranks, limits),
        input_bound(ranks, limits),
        jitter(
            collectives,
            step_s,
            min((r.breakdown.median_share("exposed_comm") for r in ranks), default=0.0),
            limits,
        ),
        small_batch(ranks, limits),
        optimizer_bound(ranks, limits),
    ]
    # Short kernels already explain an idle GPU; the general idle rule is the fallback.
    if found[-2] is None:
        found.append(idle_bound(ranks, limits))
    return sorted((d for d in found if d is not None), key=lambda d: -d.cost)
