"""Adaptive parallelism: re-plan a running job when the network changes under it.

A job runs its best plan. At ``at_s`` an event hits: a level's links drop to ``factor`` of
their rate (``inter``: the fabric between nodes; ``intra``: NVLink/PCIe inside nodes, e.g. lanes
lost), or one node is lost. The static job keeps its plan (a node loss stops it until the node is
repaired, then it restarts on the same plan); the adaptive job re-plans with the planner's
search on what is left (a slower fabric favours less tensor/context parallelism across it, a lost
node a smaller data-parallel degree) whenever the tokens it gains before the horizon outweigh the
restart. A restart costs a fixed relaunch time plus reading the checkpoint back: weights and
Adam states, 2 + 12 bytes per parameter under mixed precision (Rajbhandari et al. 2020, ZeRO,
Sec. 3.1), at the checkpoint store's read bandwidth.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from gpuscale import catalog
from gpuscale.cluster.choices import EVENTS as EVENTS
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import estimate_batch
from gpuscale.errors import require
from gpuscale.planner import defaults
from gpuscale.planner.enumerate import enumerate_plans
from gpuscale.planner.words import describe
from gpuscale.specs import Cluster, ModelSpec, Plan, PlanBatch, Training

CHECKPOINT_BYTES_PER_PARAM = 14.0
"""bf16 weights (2) + fp32 master weights and two Adam moments (12): ZeRO paper Sec. 3.1."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Segment:
    start_s: float
    end_s: float
    tokens_per_s: float
    """0 while stopped or restarting."""
    what: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    segments: tuple[Segment, ...]

    @property
    def tokens(self) -> float:
        return sum((s.end_s - s.start_s) * s.tokens_per_s for s in self.segments)


@dataclass(frozen=True, kw_only=True, slots=True)
class Adaptation:
    before: str
    after_static: str
    after_adaptive: str
    static: Timeline
    adaptive: Timeline
    restart_s: float
    """Relaunch plus checkpoint read, seconds."""


def _best(
    model: ModelSpec, cluster: Cluster, training: Training, gbs: int, profile: Profile
) -> tuple[Plan, float] | None:
    """The planner's search: every plan on this cluster priced by the cost model, the fastest
    that fits."""
    plans = enumerate_plans(model, cluster.num_gpus, global_batch=gbs, seq_len=training.seq_len)
    if len(plans) == 0:
        return None
    est = estimate_batch(model, cluster, training, plans, profile)
    fits = np.asarray(est.fits, dtype=bool)
    if not fits.any():
        return None
    tps = np.where(fits, est.tokens_per_s, -1.0)
    i = int(np.argmax(tps))
    return plans.plan(i), float(tps[i])


def _rate(
    model: ModelSpec, cluster: Cluster, training: Training, plan: Plan, profile: Profile
) -> float:
    est = estimate_batch(model, cluster, training, PlanBatch.from_plans([plan]), profile)
    return float(est.tokens_per_s[0]) if bool(est.fits[0]) else 0.0


def _degraded(cluster: Cluster, event: str, factor: float) -> Cluster:
    if event == "inter":
        link = dataclasses.replace(
            cluster.inter, bandwidth_gb_per_s=cluster.inter.bandwidth_gb_per_s * factor
        )
        return dataclasses.replace(cluster, inter=link)
    link = dataclasses.replace(
        cluster.intra, bandwidth_gb_per_s=cluster.intra.bandwidth_gb_per_s * factor
    )
    return dataclasses.replace(cluster, intra=link)


def adapt(
    model: ModelSpec,
    cluster: Cluster,
    *,
    event: str,
    factor: float = 1.0,
    at_s: float,
    horizon_s: float,
    relaunch_s: float = 300.0,
    checkpoint_read_gb_per_s: float = 10.0,
    repair_s: float = 4 * 3600.0,
    profile: Profile | None = None,
) -> Adaptation:
    """Static vs adaptive throughput over ``[0, horizon_s]`` around one network event."""
    require(
        event in EVENTS, f"--event must be one of {', '.join(EVENTS)}, got '{event}'", field="event"
    )
    require(0 < factor <= 1, f"--factor must be in (0, 1], got {factor}", field="factor")
    require(
        0 <= at_s < horizon_s,
        "the event must fall inside the horizon (0 <= --at-h < --horizon-h)",
        field="at_h",
    )
    require(
        relaunch_s >= 0 and repair_s >= 0,
        "--restart-s and --repair-h must be >= 0",
        field="restart_s",
    )
    require(
        checkpoint_read_gb_per_s > 0,
        "checkpoint read bandwidth must be > 0",
        field="checkpoint_read_gb_per_s",
    )
    profile = profile or load_profile("generic")
    seq = int(defaults.seq_len(model).value)
    gbs = int(defaults.global_batch(model, seq).value)
    training = Training(seq_len=seq, precision=cluster.pace_device.half_precision)  # type: ignore[arg-type]
    start = _best(model, cluster, training, gbs, profile)
    require(
        start is not None,
        f"{model.name} has no plan that fits {cluster.num_gpus} GPUs",
        field="gpus",
    )
    assert start is not None
    plan0, rate0 = start
    gpn = cluster.gpus_per_node
    restart = relaunch_s + CHECKPOINT_BYTES_PER_PARAM * total_params(model) / (
        checkpoint_read_gb_per_s * 1e9
    )
    before = Segment(start_s=0.0, end_s=at_s, tokens_per_s=rate0, what=describe(plan0, gpn))

    if event == "node-loss":
        back = min(at_s + repair_s, horizon_s)
        static = Timeline(
            segments=(
                before,
                Segment(start_s=at_s, end_s=back, tokens_per_s=0.0, what="stopped: node lost"),
                Segment(
                    start_s=back,
                    end_s=min(back + restart, horizon_s),
                    tokens_per_s=0.0,
                    what="restart",
                ),
                Segment(
                    start_s=min(back + restart, horizon_s),
                    end_s=horizon_s,
                    tokens_per_s=rate0,
                    what=describe(plan0, gpn),
                ),
            )
        )
        require(cluster.num_gpus > gpn, "node-loss needs a job on more than one node", field="gpus")
        smaller = dataclasses.replace(cluster, num_gpus=cluster.num_gpus - gpn)
        found = _best(model, smaller, training, gbs, profile)
        segs = [before]
        after_adaptive = "stopped until repair (no plan fits the remaining GPUs)"
        if found is not None and at_s + restart < back:
            plan1, rate1 = found
            after_adaptive = describe(plan1, gpn)
            segs += [
                Segment(start_s=at_s, end_s=at_s + restart, tokens_per_s=0.0, what="restart"),
                Segment(
                    start_s=at_s + restart, end_s=back, tokens_per_s=rate1, what=after_adaptive
                ),
            ]
            end_restart = min(back + restart, horizon_s)
            segs += [
                Segment(start_s=back, end_s=end_restart, tokens_per_s=0.0, what="restart"),
                Segment(
                    start_s=end_restart,
                    end_s=horizon_s,
                    tokens_per_s=rate0,
                    what=describe(plan0, gpn),
                ),
            ]
            adaptive = Timeline(segments=tuple(s for s in segs if s.end_s > s.start_s))
        else:
            adaptive = static
        return Adaptation(
            before=describe(plan0, gpn),
            after_static="stopped until repair, then " + describe(plan0, gpn),
            after_adaptive=after_adaptive,
            static=Timeline(segments=tuple(s for s in static.segments if s.end_s > s.start_s)),
            adaptive=adaptive,
            restart_s=restart,
        )

    worse = _degraded(cluster, event, factor)
    rate_static = _rate(model, worse, training, plan0, profile)
    static = Timeline(
        segments=(
            before,
            Segment(
                start_s=at_s, end_s=horizon_s, tokens_per_s=rate_static, what=describe(plan0, gpn)
            ),
        )
    )
    found = _best(model, worse, training, gbs, profile)
    adaptive = static
    after = describe(plan0, gpn) + " (kept)"
    if found is not None:
        plan1, rate1 = found
        restart_end = min(at_s + restart, horizon_s)
        gain = rate1 * (horizon_s - restart_end) - rate_static * (horizon_s - at_s)
        if plan1 != plan0 and gain > 0:
            after = describe(plan1, gpn)
            adaptive = Timeline(
                segments=(
                    before,
                    Segment(start_s=at_s, end_s=restart_end, tokens_per_s=0.0, what="restart"),
                    Segment(start_s=restart_end, end_s=horizon_s, tokens_per_s=rate1, what=after),
                )
            )
    return Adaptation(
        before=describe(plan0, gpn),
        after_static=describe(plan0, gpn),
        after_adaptive=after,
        static=static,
        adaptive=adaptive,
        restart_s=restart,
    )


def cluster_of(gpu: str, gpus: int, gpus_per_node: int | None, inter: str) -> Cluster:
    return catalog.cluster(gpu, gpus, gpus_per_node=gpus_per_node, inter=inter)
