"""``gpuscale.api`` entry points of the cluster simulator: ``cluster_simulate``,
``cluster_trace``, ``cluster_export`` and ``cluster_adapt`` (the ``gpuscale cluster simulate``
/ ``trace`` / ``export`` / ``adapt`` commands)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import SCHEMA_VERSION, catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api.training import gpu_count
from gpuscale.cluster.adapt import EVENTS, Adaptation, Timeline, adapt, cluster_of
from gpuscale.cluster.export import FORMATS, check_node_prefix, export
from gpuscale.cluster.placement import POLICIES
from gpuscale.cluster.simulate import ORDERS, Degradation, Failures, SimResult, simulate
from gpuscale.cluster.slowdown import DEFAULT_MODEL, SlowdownModel
from gpuscale.cluster.spec import ClusterSpec, load_cluster
from gpuscale.cluster.trace import (
    SYNTHETIC,
    Trace,
    read_trace,
    synthetic_philly,
    trace_statistics,
    write_trace,
)
from gpuscale.errors import InputError, require

# The vocabulary the CLI offers as choices, and the trace writer, re-exported so that the CLI
# needs nothing below the API.
__all__ = [
    "DEFAULT_MODEL",
    "EVENTS",
    "FORMATS",
    "ORDERS",
    "POLICIES",
    "SYNTHETIC",
    "Degradation",
    "cluster_adapt",
    "cluster_export",
    "cluster_simulate",
    "cluster_trace",
    "parse_degradation",
    "write_trace",
]


def _num(v: Any) -> Any:
    return float(v) if hasattr(v, "dtype") else v


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterSimulation:
    """The policies' results on one trace and cluster, side by side."""

    cluster: dict[str, Any]
    trace: dict[str, float]
    results: tuple[SimResult, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "cluster": self.cluster,
            "trace": self.trace,
            "policies": [{k: _num(v) for k, v in r.to_dict().items()} for r in self.results],
        }

    def figures(self) -> list[Any]:
        import plotly.graph_objects as go

        names = [r.policy for r in self.results]
        fig = go.Figure(
            [
                go.Bar(name="avg JCT (h)", x=names, y=[r.avg_jct_s / 3600 for r in self.results]),
                go.Bar(name="p95 JCT (h)", x=names, y=[r.p95_jct_s / 3600 for r in self.results]),
            ]
        )
        fig.update_layout(title="Job completion time by placement policy", barmode="group")
        return [fig]


def parse_degradation(text: str) -> Degradation:
    """``LEVEL:INDEX:FACTOR:START_S:END_S`` (the CLI's ``--degrade``), e.g. ``core:0:0.25:3600:7200``:
    the link ``INDEX`` of ``LEVEL`` keeps ``FACTOR`` of its bandwidth from ``START_S`` to
    ``END_S`` seconds into the trace."""
    parts = text.split(":")
    if len(parts) != 5:
        raise InputError(
            f"--degrade '{text}' must be LEVEL:INDEX:FACTOR:START_S:END_S, "
            "e.g. core:0:0.25:3600:7200",
            field="degrade",
        )
    try:
        return Degradation(
            level=parts[0],
            index=int(parts[1]),
            factor=float(parts[2]),
            start_s=float(parts[3]),
            end_s=float(parts[4]),
        )
    except ValueError:
        raise InputError(
            f"--degrade '{text}': INDEX must be an integer and FACTOR, START_S, END_S numbers",
            field="degrade",
        ) from None


def _seed(seed: int) -> None:
    # numpy's SeedSequence takes non-negative integers only (a negative one was a traceback).
    require(seed >= 0, f"--seed must be a whole number >= 0, got {seed}", field="seed")


@checks_arguments
def cluster_simulate(
    cluster: str | Path | ClusterSpec,
    trace: str | Path | Trace,
    *,
    policy: str = "all",
    order: str = "fifo",
    seed: int = 0,
    default_model: str = DEFAULT_MODEL,
    node_mtbf_h: float | None = None,
    repair_h: float = 4.0,
    checkpoint_min: float = 60.0,
    max_restarts: int = 10,
    degradations: tuple[Degradation, ...] = (),
    adaptive: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
) -> ClusterSimulation:
    """Simulate ``trace`` on ``cluster`` under one placement policy or ``"all"`` of them."""
    _seed(seed)
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster)
    jobs = trace if isinstance(trace, Trace) else read_trace(trace)
    names = list(POLICIES) if policy == "all" else [policy]
    for name in names:
        if name not in POLICIES:
            raise InputError(
                f"unknown --policy '{name}'; accepted: {', '.join(POLICIES)}, all", field="policy"
            )
    failures = None
    if node_mtbf_h is not None:
        failures = Failures(
            node_mtbf_s=node_mtbf_h * 3600.0,
            repair_s=repair_h * 3600.0,
            checkpoint_every_s=checkpoint_min * 60.0,
            max_restarts=max_restarts,
        )
    model = SlowdownModel(spec, default_model=default_model)
    for name in sorted(set(jobs.model) - {""}):
        catalog.model(name)  # an unknown model fails here, before any simulation runs
    results = []
    for name in names:
        step = None if progress is None else (lambda d, t, n=name: progress(n, d, t))
        results.append(
            simulate(
                jobs,
                model,
                policy=name,
                order=order,
                seed=seed,
                failures=failures,
                degradations=degradations,
                adaptive=adaptive,
                progress=step,
            )
        )
    return ClusterSimulation(
        cluster=spec.describe(), trace=trace_statistics(jobs), results=tuple(results)
    )


MAX_TRACE_JOBS = 1_000_000
"""Most jobs in a synthetic trace: ten times Philly's ~100,000, and a CSV (33 MB at 10^6 jobs)
that ``cluster simulate --trace`` still reads under its 64 MiB file cap (10^12 jobs asked numpy
for 7 TiB)."""


@checks_arguments
def cluster_trace(
    *, synthetic: str = "philly", jobs: int, seed: int = 0, load_gpus: float | None = None
) -> Trace:
    """A synthetic trace matching published statistics (only ``philly`` for now)."""
    _seed(seed)
    require(
        jobs <= MAX_TRACE_JOBS,
        f"--jobs must be at most {MAX_TRACE_JOBS:,}, got {jobs}",
        field="jobs",
    )
    require(
        synthetic in SYNTHETIC,
        f"unknown --synthetic '{synthetic}'; accepted: {', '.join(SYNTHETIC)}",
        field="synthetic",
    )
    return synthetic_philly(jobs, seed=seed, load_gpus=load_gpus)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterExport:
    """A cluster file's topology in one scheduler's format."""

    format: str
    cluster: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "format": self.format,
            "cluster": self.cluster,
            "text": self.text,
        }

    def figures(self) -> list[Any]:
        return []


@checks_arguments
def cluster_export(
    cluster: str | Path | ClusterSpec, *, format: str, node_prefix: str = "node"
) -> ClusterExport:
    """The topology for Slurm (``slurm-conf``, ``slurm-yaml``), Kueue or Volcano."""
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(cluster)
    require(
        node_prefix.replace("-", "").isalnum(),
        f"--node-prefix '{node_prefix}' must be letters, digits and dashes",
        field="node_prefix",
    )
    check_node_prefix(format, node_prefix)
    return ClusterExport(format=format, cluster=spec.name, text=export(spec, format, node_prefix))


@dataclass(frozen=True, kw_only=True, slots=True)
class AdaptResult:
    """Static vs adaptive plan around one network event."""

    model: str
    event: str
    factor: float
    at_s: float
    horizon_s: float
    adaptation: Adaptation

    def to_dict(self) -> dict[str, Any]:
        a = self.adaptation

        def timeline(t: Timeline) -> list[dict[str, Any]]:
            return [
                {
                    "start_s": s.start_s,
                    "end_s": s.end_s,
                    "tokens_per_s": s.tokens_per_s,
                    "plan": s.what,
                }
                for s in t.segments
            ]

        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "event": self.event,
            "factor": self.factor,
            "at_s": self.at_s,
            "horizon_s": self.horizon_s,
            "restart_s": a.restart_s,
            "plan_before": a.before,
            "plan_static": a.after_static,
            "plan_adaptive": a.after_adaptive,
            "tokens_static": a.static.tokens,
            "tokens_adaptive": a.adaptive.tokens,
            "gain": a.adaptive.tokens / a.static.tokens if a.static.tokens else None,
            "static": timeline(a.static),
            "adaptive": timeline(a.adaptive),
        }

    def figures(self) -> list[Any]:
        import plotly.graph_objects as go

        fig = go.Figure()
        for name, t in (("static", self.adaptation.static), ("adaptive", self.adaptation.adaptive)):
            xs: list[float] = []
            ys: list[float] = []
            for s in t.segments:
                xs += [s.start_s / 3600, s.end_s / 3600]
                ys += [s.tokens_per_s, s.tokens_per_s]
            fig.add_trace(go.Scatter(x=xs, y=ys, name=name, mode="lines"))
        fig.update_layout(
            title=f"{self.model}: {self.event} at {self.at_s / 3600:g} h",
            xaxis_title="hours",
            yaxis_title="tokens/s",
        )
        return [fig]


@checks_arguments
def cluster_adapt(
    model: str,
    *,
    gpu: str,
    gpus: int,
    gpus_per_node: int | None = None,
    inter: str = catalog.DEFAULT_INTER,
    event: str,
    factor: float = 0.25,
    at_h: float = 1.0,
    horizon_h: float = 24.0,
    restart_s: float = 300.0,
    checkpoint_read_gb_per_s: float = 10.0,
    repair_h: float = 4.0,
) -> AdaptResult:
    """Re-plan ``model`` on ``gpus`` GPUs after a link degradation (``event`` "inter" or
    "intra", ``factor`` the bandwidth left) or a node loss (no bandwidth factor: 1.0)."""
    spec = catalog.model(model)
    gpu_count(gpus, "gpus")
    if event == "node-loss":
        factor = 1.0
    adaptation = adapt(
        spec,
        cluster_of(gpu, gpus, gpus_per_node, inter),
        event=event,
        factor=factor,
        at_s=at_h * 3600.0,
        horizon_s=horizon_h * 3600.0,
        relaunch_s=restart_s,
        checkpoint_read_gb_per_s=checkpoint_read_gb_per_s,
        repair_s=repair_h * 3600.0,
    )
    return AdaptResult(
        model=spec.name,
        event=event,
        factor=factor,
        at_s=at_h * 3600.0,
        horizon_s=horizon_h * 3600.0,
        adaptation=adaptation,
    )
