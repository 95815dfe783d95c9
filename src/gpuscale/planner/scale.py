"""The scaling curve: the best plan at 1, 2, 4, ... N GPUs, and what each step up buys.

Per-GPU efficiency is throughput per GPU relative to the *baseline*: one GPU when the model fits
one card, else the smallest count that fits (the curve says which). The break-even point is the
last count up to which every step up still returned at least ``marginal_threshold`` of a GPU's
throughput per added GPU, where "a GPU's throughput" is the best per-GPU throughput of any count
so far (a memory-starved baseline, e.g. two GPUs with full recompute, must not flatter the
GPUs added later). Past break-even the added GPUs deliver less than that, so each extra token
costs more than ``1 / marginal_threshold`` times the best price per token seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscale.costmodel.profile import Profile
from gpuscale.errors import require
from gpuscale.planner.enumerate import SearchSpace
from gpuscale.planner.search import (
    CountResult,
    Hardware,
    PricedPlan,
    Progress,
    Workload,
    gpu_counts,
    no_fit_error,
    search_counts,
)
from gpuscale.planner.words import gpus

DEFAULT_MARGINAL_THRESHOLD = 0.5
"""Break-even: added GPUs must return at least half a GPU's throughput each, i.e. the marginal
tokens may cost at most twice the best price per token so far."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ScalePoint:
    """The best plan at one GPU count and how it compares with the baseline."""

    num_gpus: int
    best: PricedPlan | None
    """``None`` when no plan fits at this count."""
    search: CountResult
    speedup: float | None
    """Throughput over the baseline's."""
    efficiency: float | None
    """Throughput per GPU over the baseline's (1.0 at the baseline)."""
    marginal_efficiency: float | None
    """Extra throughput per added GPU since the previous fitting count, over the best per-GPU
    throughput of any smaller count."""

    def time_to_train_s(self, tokens: float) -> float | None:
        return None if self.best is None else self.best.time_to_train_s(tokens)

    def gpu_hours(self, tokens: float) -> float | None:
        return None if self.best is None else self.best.gpu_hours(tokens)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScaleCurve:
    """Best plans over GPU counts on one fabric."""

    fabric: str
    points: tuple[ScalePoint, ...]
    baseline_gpus: int
    """Smallest count where the model fits (the efficiency reference)."""
    break_even_gpus: int
    marginal_threshold: float

    def point(self, num_gpus: int) -> ScalePoint:
        return next(p for p in self.points if p.num_gpus == num_gpus)

    @property
    def fitting(self) -> tuple[ScalePoint, ...]:
        return tuple(p for p in self.points if p.best is not None)

    @property
    def break_even_reached(self) -> bool:
        """Whether a count past break-even was searched (and fits). When not, break-even is
        just the largest count searched and more GPUs may still pay."""
        return any(p.num_gpus > self.break_even_gpus for p in self.fitting)

    @property
    def evaluated(self) -> int:
        return sum(p.search.evaluated for p in self.points)


def curve_from_counts(
    fabric: str,
    counts: Sequence[CountResult],
    marginal_threshold: float = DEFAULT_MARGINAL_THRESHOLD,
) -> ScaleCurve | None:
    """Speed-up, efficiency and break-even from per-count searches; ``None`` if nothing fits."""
    bests = [c.best for c in counts if c.best is not None]
    if not bests:
        return None
    base = bests[0]
    base_per_gpu = base.tokens_per_s / base.num_gpus
    best_per_gpu = base_per_gpu
    points = []
    previous: PricedPlan | None = None
    break_even = base.num_gpus
    still_paying = True
    for c in counts:
        best = c.best
        if best is None:
            points.append(
                ScalePoint(
                    num_gpus=c.num_gpus,
                    best=None,
                    search=c,
                    speedup=None,
                    efficiency=None,
                    marginal_efficiency=None,
                )
            )
            continue
        marginal = None
        if previous is not None:
            marginal = (
                (best.tokens_per_s - previous.tokens_per_s)
                / (best.num_gpus - previous.num_gpus)
                / best_per_gpu
            )
            still_paying = still_paying and marginal >= marginal_threshold
            if still_paying:
                break_even = best.num_gpus
        points.append(
            ScalePoint(
                num_gpus=c.num_gpus,
                best=best,
                search=c,
                speedup=best.tokens_per_s / base.tokens_per_s,
                efficiency=best.tokens_per_s / best.num_gpus / base_per_gpu,
                marginal_efficiency=marginal,
            )
        )
        previous = best
        best_per_gpu = max(best_per_gpu, best.tokens_per_s / best.num_gpus)
    return ScaleCurve(
        fabric=fabric,
        points=tuple(points),
        baseline_gpus=base.num_gpus,
        break_even_gpus=break_even,
        marginal_threshold=marginal_threshold,
    )


def scale(
    workload: Workload,
    hardware: Hardware,
    profile: Profile,
    max_gpus: int,
    *,
    space: SearchSpace | None = None,
    marginal_threshold: float = DEFAULT_MARGINAL_THRESHOLD,
    progress: Progress | None = None,
) -> ScaleCurve:
    """The best plan at each of 1, 2, 4, ... ``max_gpus`` GPUs on ``hardware``'s fabric."""
    require(0 < marginal_threshold <= 1, "the break-even threshold must be in (0, 1]")
    counts = search_counts(
        workload,
        hardware,
        profile,
        gpu_counts(max_gpus, hardware.gpus_per_node),
        top_k=1,
        space=space,
        progress=progress,
    )
    curve = curve_from_counts(hardware.inter, counts, marginal_threshold)
    if curve is None:
        raise no_fit_error(workload, hardware, counts)
    return curve


def scale_fabrics(
    workload: Workload,
    hardware: Hardware,
    profile: Profile,
    max_gpus: int,
    fabrics: Sequence[str],
    *,
    space: SearchSpace | None = None,
    marginal_threshold: float = DEFAULT_MARGINAL_THRESHOLD,
    progress: Progress | None = None,
) -> tuple[ScaleCurve, ...]:
    """One curve per fabric, same model, GPU and counts (for "days to train on each")."""
    require(len(fabrics) > 0, "--inter needs at least one fabric")
    total = len(fabrics) * len(gpu_counts(max_gpus, hardware.gpus_per_node))
    curves = []
    for i, fabric in enumerate(fabrics):
        offset = i * total // len(fabrics)

        def step(done: int, _n: int, offset: int = offset) -> None:
            if progress is not None:
                progress(offset + done, total)

        curves.append(
            scale(
                workload,
                hardware.with_inter(fabric),
                profile,
                max_gpus,
                space=space,
                marginal_threshold=marginal_threshold,
                progress=step,
            )
        )
    return tuple(curves)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunsComparison:
    """``runs`` independent trainings (e.g. a hyper-parameter search) on ``total_gpus``: all at
    once on a share each, or one after another on all of them."""

    runs: int
    total_gpus: int
    gpus_per_run: int
    parallel_wall_s: float
    parallel_gpu_hours: float
    sequential_wall_s: float
    sequential_gpu_hours: float

    @property
    def parallel_wins(self) -> bool:
        return self.parallel_wall_s <= self.sequential_wall_s

    def summary(self) -> str:
        """Both options and which finishes first, in one sentence."""
        day = 86400.0
        side = (
            f"{self.runs} runs side by side on {gpus(self.gpus_per_run)} each: "
            f"{self.parallel_wall_s / day:.3g} days, {self.parallel_gpu_hours:,.0f} GPU-hours"
        )
        row = (
            f"one after another on all {self.total_gpus}: "
            f"{self.sequential_wall_s / day:.3g} days, {self.sequential_gpu_hours:,.0f} GPU-hours"
        )
        ratio = self.sequential_wall_s / self.parallel_wall_s
        if abs(ratio - 1.0) < 0.01:
            return f"{side}; {row}: the same, since scaling is linear up to {self.total_gpus}."
        if ratio > 1.0:
            return f"{side}; {row}: side by side finishes {ratio:.2f}x sooner."
        return f"{side}; {row}: one after another finishes {1 / ratio:.2f}x sooner."


def compare_runs(curve: ScaleCurve, runs: int, tokens: float) -> RunsComparison | None:
    """Compare K runs side by side with K runs in a row on the curve's largest count.

    Each side-by-side run gets the largest count of the curve that fits within
    ``total / runs`` GPUs; ``None`` when no such count fits the model.
    """
    require(runs >= 1, f"--runs must be >= 1, got {runs}")
    total = curve.points[-1]
    share = [p for p in curve.fitting if p.num_gpus * runs <= total.num_gpus]
    if not share or total.best is None:
        return None
    each = share[-1].best
    if each is None:
        return None
    return RunsComparison(
        runs=runs,
        total_gpus=total.num_gpus,
        gpus_per_run=each.num_gpus,
        parallel_wall_s=each.time_to_train_s(tokens),
        parallel_gpu_hours=runs * each.gpu_hours(tokens),
        sequential_wall_s=runs * total.best.time_to_train_s(tokens),
        sequential_gpu_hours=runs * total.best.gpu_hours(tokens),
    )
