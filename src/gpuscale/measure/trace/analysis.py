"""The whole analysis: read every rank (in parallel), then the cross-rank analyzers."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import queue
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuscale.errors import InputError
from gpuscale.measure.trace.breakdown import PARTS
from gpuscale.measure.trace.collectives import CollectiveStats, distribution
from gpuscale.measure.trace.diagnose import Diagnosis, Thresholds, diagnose
from gpuscale.measure.trace.predict import Finding, Prediction, compare, step_ratio
from gpuscale.measure.trace.rank import RankResult, analyze_rank
from gpuscale.measure.trace.reader import expand
from gpuscale.measure.trace.skew import Skew, skew

ProgressFn = Callable[[int, int], None]
"""Called with (bytes read so far over all files, total bytes)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceReport:
    ranks: tuple[RankResult, ...]
    collectives: tuple[CollectiveStats, ...]
    skew: Skew | None
    diagnoses: tuple[Diagnosis, ...]
    prediction: Prediction | None = None
    findings: tuple[Finding, ...] = ()

    @property
    def device(self) -> str:
        return "gpu" if any(r.device == "gpu" for r in self.ranks) else "cpu"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready document (``--json``)."""
        ranks = []
        for r in self.ranks:
            b = r.breakdown
            ranks.append(
                {
                    "rank": r.rank,
                    "path": r.path,
                    "device": r.device,
                    "backend": r.backend,
                    "steps": len(b.steps),
                    "step_time_s": float(b.step_s.mean()),
                    "share": {p: b.share(p) for p in PARTS},
                    "overlap_ratio": b.overlap_ratio,
                    "kernels": r.kernels,
                    "median_kernel_s": r.median_kernel_s,
                    "collective_source": r.collective_source,
                    "events": r.events,
                    "skipped_events": r.skipped,
                    "per_step": [
                        {
                            "step": s,
                            "step_s": float(b.step_s[i]),
                            **{f"{p}_s": float(b.part(p)[i]) for p in PARTS},
                            "overlapped_comm_s": float(b.overlapped_comm_s[i]),
                        }
                        for i, s in enumerate(b.steps)
                    ],
                }
            )
        doc: dict[str, Any] = {
            "device": self.device,
            "ranks": ranks,
            "collectives": [
                {
                    "op": c.op,
                    "bytes": c.bytes,
                    "calls": c.calls,
                    "mean_s": c.mean_s,
                    "p99_s": c.p99_s,
                    "cv": c.cv,
                    "wait_mean_s": c.wait_mean_s,
                    "algbw_gb_per_s": c.algbw_gb_per_s,
                }
                for c in self.collectives
            ],
            "skew": None
            if self.skew is None
            else {
                "steps": self.skew.steps,
                "slowest_rank": self.skew.slowest_rank,
                "slowest_share": self.skew.slowest_share,
                "excess": self.skew.excess,
                "excess_s": self.skew.excess_s,
                "busy_median_s": {str(k): v for k, v in self.skew.busy_median_s.items()},
            },
            "diagnoses": [
                {
                    "id": d.id,
                    "title": d.title,
                    "evidence": d.evidence,
                    "next_step": d.next_step,
                    "cost": d.cost,
                    "ranks": list(d.ranks),
                }
                for d in self.diagnoses
            ],
        }
        if self.prediction is not None:
            doc["prediction"] = {
                "source": self.prediction.source,
                "predicted_step_time_s": self.prediction.step_time_s,
                "measured_over_predicted_step": step_ratio(self.ranks, self.prediction),
                "findings": [
                    {
                        "part": f.part,
                        "predicted_share": f.predicted_share,
                        "measured_share": f.measured_share,
                        "predicted_s": f.predicted_s,
                        "measured_s": f.measured_s,
                        "off": f.off,
                        "verdict": f.verdict,
                    }
                    for f in self.findings
                ],
            }
        return doc


_progress_queue: Any = None


def _init_worker(q: Any) -> None:
    global _progress_queue
    _progress_queue = q


def _worker(index: int, path: Path) -> RankResult:
    q = _progress_queue
    return analyze_rank(path, None if q is None else (lambda n: q.put((index, n))))


def _read_all(paths: Sequence[Path], workers: int, progress: ProgressFn | None) -> list[RankResult]:
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    done = [0] * len(paths)

    def report(index: int, n: int) -> None:
        done[index] = n
        if progress is not None:
            progress(sum(done), total)

    if workers <= 1 or len(paths) == 1:
        results = []
        for i, path in enumerate(paths):
            results.append(analyze_rank(path, functools.partial(report, i)))
            report(i, sizes[i])
        return results
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    with ProcessPoolExecutor(
        max_workers=min(workers, len(paths)),
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(q,),
    ) as pool:
        futures: list[Future[RankResult]] = [
            pool.submit(_worker, i, p) for i, p in enumerate(paths)
        ]
        pending = set(futures)
        while pending:
            try:
                index, n = q.get(timeout=0.1)
                report(index, n)
            except queue.Empty:
                pass
            for i, f in enumerate(futures):
                if f in pending and f.done():
                    pending.discard(f)
                    report(i, sizes[i])
        return [f.result() for f in futures]


def _by_rank(results: list[RankResult]) -> dict[int, RankResult]:
    """Results keyed by rank, in rank order; files that name no rank take the free numbers."""
    claimed: dict[int, RankResult] = {}
    for r in results:
        if r.rank is None:
            continue
        if r.rank in claimed:
            raise InputError(
                f"two traces claim rank {r.rank}: {claimed[r.rank].path} and {r.path}; "
                "pass one trace per rank"
            )
        claimed[r.rank] = r
    free = (i for i in range(len(results) + len(claimed)) if i not in claimed)
    for r in results:
        if r.rank is None:
            rank = next(free)
            claimed[rank] = replace(r, rank=rank)
    return dict(sorted(claimed.items()))


def analyze(
    paths: Sequence[str | Path],
    *,
    thresholds: Thresholds | None = None,
    prediction: Prediction | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
) -> TraceReport:
    """Analyze trace files (one per rank) or folders of them."""
    limits = thresholds or Thresholds()
    files = expand([Path(p) for p in paths])
    for f in files:
        if not f.is_file():
            raise InputError(f"{f}: no such trace file")
    if workers is None:
        workers = min(len(files), os.cpu_count() or 1)
    by_rank = _by_rank(_read_all(files, workers, progress))
    ranks = list(by_rank.values())
    stats = distribution({k: r.calls for k, r in by_rank.items()})
    rank_skew = skew({k: r.breakdown for k, r in by_rank.items()})
    findings = (
        compare(ranks, prediction, limits.prediction_tolerance) if prediction is not None else []
    )
    return TraceReport(
        ranks=tuple(ranks),
        collectives=tuple(stats),
        skew=rank_skew,
        diagnoses=tuple(diagnose(ranks, stats, rank_skew, limits)),
        prediction=prediction,
        findings=tuple(findings),
    )
