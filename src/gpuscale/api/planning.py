"""``plan`` and ``scale``: the best parallel plans on N GPUs, and the best plan at 1, 2, 4 ... N."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.api.training import (
    MAX_GPUS,
    FabricArg,
    GpuArg,
    ModelArg,
    gpu_count,
)
from gpuscale.errors import require
from gpuscale.planner import search as planner_search
from gpuscale.planner.inputs import Inputs, build_inputs
from gpuscale.planner.scale import RunsComparison, ScaleCurve, compare_runs, curve_from_counts
from gpuscale.planner.scale import scale_fabrics as _scale_fabrics
from gpuscale.planner.search import OBJECTIVES, PricedPlan
from gpuscale.planner.verdict import Verdict, verdict
from gpuscale.report import planner as render
from gpuscale.specs.hardware import check_whole_nodes

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` while the search runs."""

__all__ = ["MAX_GPUS", "OBJECTIVES", "PlanResult", "ScaleResult", "plan", "scale"]


def _inputs(
    model: ModelArg,
    gpu: GpuArg,
    inter: FabricArg,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    gbs: int | None,
    seq: int | None,
    tokens: str | float | None,
    price: float | None,
    precision: str,
    finetune: str,
    framework: str,
    profile: str | Path | None,
    compile: bool,
) -> Inputs:
    return build_inputs(
        model=model,
        gpu=gpu,
        inter=inter,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        gbs=gbs,
        seq=seq,
        tokens=tokens,
        price=price,
        precision=precision,
        finetune=finetune,
        framework=framework,
        profile_file=profile,
        compile=compile,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanResult:
    """The ranked plans for ``num_gpus`` GPUs (``gpuscale plan --json``)."""

    inputs: Inputs
    """The workload, hardware and profile searched, with what was assumed."""
    objective: str
    num_gpus: int
    search: planner_search.PlanResult
    """Every GPU count searched, the ranking and why the winner wins."""
    search_s: float
    verdict: Verdict | None
    """One GPU, one node or a cluster, from the curve the search walked."""

    @property
    def ranked(self) -> tuple[PricedPlan, ...]:
        return self.search.ranked

    @property
    def winner(self) -> PricedPlan:
        return self.search.winner

    @property
    def why(self) -> str:
        return self.search.why

    @property
    def fitting(self) -> int:
        return sum(c.fitting for c in self.search.counts)

    @property
    def assumed(self) -> Mapping[str, str]:
        return self.inputs.assumed

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.winner.estimate["uncertainty"]["warnings"])

    @property
    def memory_assumption(self) -> str:
        """The memory headroom every recommended plan keeps, in words."""
        return self.search.memory_assumption

    def to_dict(self) -> dict[str, Any]:
        workload, hardware = self.inputs.workload, self.inputs.hardware
        return document(
            {
                "command": "plan",
                "model": workload.model.name,
                "gpu": hardware.gpu,
                "num_gpus": self.num_gpus,
                "gpus_per_node": hardware.gpus_per_node,
                "inter": hardware.inter,
                "objective": self.objective,
                "seq": workload.training.seq_len,
                "gbs": workload.global_batch,
                "tokens": workload.tokens,
                "price_per_gpu_hour": workload.price_per_gpu_hour,
                "precision": workload.training.precision,
                "compile": workload.training.compile,
                "finetune": workload.training.finetune,
                "profile": self.inputs.profile.name,
                "assumed": dict(self.assumed),
                "memory_assumption": self.memory_assumption,
                "evaluated": self.search.evaluated,
                "fitting": self.fitting,
                "search_s": self.search_s,
                "plans": [render.priced_row(p, workload) for p in self.ranked],
                "why": self.why,
                "verdict": render.verdict_document(self.verdict) if self.verdict else None,
            }
        )

    def figures(self) -> list[Any]:
        return render.plan_figures(self.ranked)


@checks_arguments
def plan(
    model: ModelArg,
    *,
    gpu: GpuArg,
    gpus: int,
    gpus_per_node: int | None = None,
    inter: FabricArg = catalog.DEFAULT_INTER,
    nics_per_node: int | None = None,
    gbs: int | None = None,
    seq: int | None = None,
    tokens: str | float | None = None,
    price: float | None = None,
    precision: str = "bf16",
    finetune: str = "full",
    framework: str = "generic",
    profile: str | Path | None = None,
    compile: bool = False,
    objective: str = "throughput",
    top: int = 5,
    progress: Progress | None = None,
) -> PlanResult:
    """Search every parallel plan of ``model`` on ``gpus`` GPUs and rank what fits.

    ``objective``: ``throughput`` (fastest on all GPUs), ``time`` (fastest to finish on up to
    ``gpus``) or ``cost`` (fewest GPU-hours per token on up to ``gpus``). ``seq``, ``gbs`` and
    ``tokens`` default to published recipes (reported in ``assumed``); ``tokens`` takes a count
    such as ``"15T"`` or a number; ``gpus_per_node`` to the GPU's NVLink domain.
    """
    inputs = _inputs(
        model,
        gpu,
        inter,
        gpus_per_node,
        nics_per_node,
        gbs,
        seq,
        tokens,
        price,
        precision,
        finetune,
        framework,
        profile,
        compile,
    )
    workload, hardware = inputs.workload, inputs.hardware
    gpu_count(gpus, "gpus")
    hardware.cluster(gpus)
    start = time.perf_counter()
    result = planner_search.search(
        workload,
        hardware,
        inputs.profile,
        gpus,
        objective=objective,
        top_k=top,
        progress=progress,
    )
    elapsed = time.perf_counter() - start
    curve = curve_from_counts(hardware.inter, result.counts)
    advice = verdict(curve, hardware.gpu, hardware.gpus_per_node) if curve else None
    return PlanResult(
        inputs=inputs,
        objective=objective,
        num_gpus=gpus,
        search=result,
        search_s=elapsed,
        verdict=advice,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleResult:
    """The best plan at 1, 2, 4 ... ``max_gpus`` GPUs per fabric (``gpuscale scale --json``)."""

    inputs: Inputs
    max_gpus: int
    curves: tuple[ScaleCurve, ...]
    """One per fabric, in the order given; the first is the main one."""
    verdicts: tuple[Verdict, ...]
    runs_requested: int | None
    runs: RunsComparison | None
    """K independent runs side by side against one after another (``None``: not asked, or no
    share of the GPUs fits the model)."""
    search_s: float

    @property
    def curve(self) -> ScaleCurve:
        return self.curves[0]

    @property
    def verdict(self) -> Verdict:
        return self.verdicts[0]

    @property
    def assumed(self) -> Mapping[str, str]:
        return self.inputs.assumed

    @property
    def evaluated(self) -> int:
        return sum(c.evaluated for c in self.curves)

    @property
    def baseline_note(self) -> str:
        """What the efficiency column is relative to."""
        if self.curve.baseline_gpus == 1:
            return "efficiency relative to 1 GPU"
        return (
            f"does not fit one GPU: efficiency relative to {self.curve.baseline_gpus} GPUs, the "
            "smallest count that fits"
        )

    def to_dict(self) -> dict[str, Any]:
        workload, hardware = self.inputs.workload, self.inputs.hardware
        return document(
            {
                "command": "scale",
                "model": workload.model.name,
                "gpu": hardware.gpu,
                "max_gpus": self.max_gpus,
                "gpus_per_node": hardware.gpus_per_node,
                "seq": workload.training.seq_len,
                "gbs": workload.global_batch,
                "tokens": workload.tokens,
                "price_per_gpu_hour": workload.price_per_gpu_hour,
                "precision": workload.training.precision,
                "compile": workload.training.compile,
                "finetune": workload.training.finetune,
                "profile": self.inputs.profile.name,
                "assumed": dict(self.assumed),
                "evaluated": self.evaluated,
                "search_s": self.search_s,
                "curves": [
                    render.curve_document(c, workload, v)
                    for c, v in zip(self.curves, self.verdicts, strict=True)
                ],
                "runs": render.runs_document(self.runs) if self.runs else None,
                "verdict": render.verdict_document(self.verdict),
            }
        )

    def figures(self) -> list[Any]:
        return render.scale_figures(self.curves, self.inputs.workload)


@checks_arguments
def scale(
    model: ModelArg,
    *,
    gpu: GpuArg,
    max_gpus: int,
    gpus_per_node: int | None = None,
    inter: FabricArg | list[FabricArg] | tuple[FabricArg, ...] = catalog.DEFAULT_INTER,
    nics_per_node: int | None = None,
    gbs: int | None = None,
    seq: int | None = None,
    tokens: str | float | None = None,
    price: float | None = None,
    precision: str = "bf16",
    finetune: str = "full",
    framework: str = "generic",
    profile: str | Path | None = None,
    compile: bool = False,
    runs: int | None = None,
    progress: Progress | None = None,
) -> ScaleResult:
    """The best plan of ``model`` at 1, 2, 4 ... ``max_gpus`` GPUs: throughput, per-GPU
    efficiency, time and cost to train, break-even, and one GPU / one node / a cluster.

    ``inter``: one fabric, a comma list (``"roce-100,ib-ndr400"``) or a list, compared side by
    side. ``runs``: compare K independent runs side by side with K runs one after another.
    ``gpus_per_node`` defaults to the GPU's NVLink domain.
    """
    if isinstance(inter, (list, tuple)):
        given = [catalog.link(f).id for f in inter]
    elif isinstance(inter, str):
        given = [f.strip() for f in inter.split(",") if f.strip()]
    else:
        given = [inter.id]
    require(len(given) > 0, "--inter needs at least one fabric id", field="inter")
    require(
        len(set(given)) == len(given),
        f"--inter lists a fabric twice: {','.join(given)}",
        field="inter",
    )
    fabrics = [catalog.link(f).id for f in given]
    require(runs is None or runs >= 1, f"--runs must be >= 1, got {runs}", field="runs")
    inputs = _inputs(
        model,
        gpu,
        fabrics[0],
        gpus_per_node,
        nics_per_node,
        gbs,
        seq,
        tokens,
        price,
        precision,
        finetune,
        framework,
        profile,
        compile,
    )
    workload, hardware = inputs.workload, inputs.hardware
    gpu_count(max_gpus, "max_gpus")
    per_node = hardware.gpus_per_node  # --gpus-per-node, or the GPU's NVLink domain
    check_whole_nodes(max_gpus, per_node, f"--max-gpus ({max_gpus})", "max_gpus")
    start = time.perf_counter()
    curves = _scale_fabrics(
        workload, hardware, inputs.profile, max_gpus, fabrics, progress=progress
    )
    elapsed = time.perf_counter() - start
    verdicts = tuple(verdict(c, hardware.gpu, hardware.gpus_per_node) for c in curves)
    return ScaleResult(
        inputs=inputs,
        max_gpus=max_gpus,
        curves=tuple(curves),
        verdicts=verdicts,
        runs_requested=runs,
        runs=compare_runs(curves[0], runs, workload.tokens) if runs else None,
        search_s=elapsed,
    )
