"""One rank's trace file, read and reduced; the unit of work of the parallel reader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuscale.errors import InputError
from gpuscale.measure.trace.breakdown import StepBreakdown, breakdown, median_kernel_s
from gpuscale.measure.trace.collectives import CallKey, keyed
from gpuscale.measure.trace.reader import ProgressFn, iter_events, rank_from_name, read_header
from gpuscale.measure.trace.timeline import KERNEL_HIST_EDGES_S, BadEvent, TimelineBuilder


@dataclass(frozen=True, kw_only=True, slots=True)
class RankResult:
    rank: int | None
    """From the trace's ``distributedInfo``, else the file name; None if neither says."""
    path: str
    device: str
    """``gpu`` (kernels on the device timeline) or ``cpu`` (the training thread is the device)."""
    backend: str | None
    world_size: int | None
    breakdown: StepBreakdown
    kernels: int
    median_kernel_s: float | None
    calls: dict[CallKey, float]
    collective_source: str | None
    events: int
    skipped: int


def analyze_rank(path: Path, progress: ProgressFn | None = None) -> RankResult:
    header = read_header(path)
    try:
        timeline = TimelineBuilder().feed(iter_events(path, progress)).build()
    except BadEvent as exc:  # the timeline does not know which file it is
        raise InputError(f"{path}: {exc}") from None
    if len(timeline.windows) == 0:
        raise InputError(
            f"{path}: no timed events (ph 'X' with ts and dur) in this trace; "
            "expected a PyTorch profiler trace"
        )
    return RankResult(
        rank=header.rank if header.rank is not None else rank_from_name(path),
        path=str(path),
        device=timeline.device,
        backend=header.backend,
        world_size=header.world_size,
        breakdown=breakdown(timeline),
        kernels=int(timeline.kernel_hist.sum()),
        median_kernel_s=median_kernel_s(timeline.kernel_hist, KERNEL_HIST_EDGES_S),
        calls=keyed(timeline.collectives, timeline.windows),
        collective_source=timeline.collective_source,
        events=timeline.events,
        skipped=timeline.skipped,
    )
