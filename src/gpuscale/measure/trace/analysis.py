"""The whole analysis: read every rank (in parallel), then the cross-rank analyzers."""

from __future__ import annotations

import functools
import multiprocessing as mp
import multiprocessing.connection
import os
import queue
import signal
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from gpuscale.errors import InputError
from gpuscale.files import input_path
from gpuscale.measure.trace.breakdown import PARTS
from gpuscale.measure.trace.collectives import CollectiveStats, distribution
from gpuscale.measure.trace.diagnose import Diagnosis, Thresholds, diagnose
from gpuscale.measure.trace.predict import (
    Finding,
    Prediction,
    compare,
    device_mismatch,
    step_ratio,
)
from gpuscale.measure.trace.rank import RankResult, analyze_rank
from gpuscale.measure.trace.reader import expand
from gpuscale.measure.trace.skew import Skew, skew

ProgressFn = Callable[[int, int], None]
"""Called with (bytes read so far over all files, total bytes)."""

_POLL_S = 0.1
"""How often the parent looks for a child that died without a message."""
_REAP_TIMEOUT_S = 10.0
"""How long to wait for a killed child to be reaped (SIGKILL cannot be caught)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceReport:
    ranks: tuple[RankResult, ...]
    collectives: tuple[CollectiveStats, ...]
    skew: Skew | None
    diagnoses: tuple[Diagnosis, ...]
    prediction: Prediction | None = None
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    """Caveats on reading the report, e.g. a CPU timeline held against a GPU prediction."""

    @property
    def device(self) -> str:
        return "gpu" if any(r.device == "gpu" for r in self.ranks) else "cpu"

    @property
    def step_ratio(self) -> float | None:
        """Measured over predicted step time; None without a prediction, or when the trace's
        device is not the one predicted (times do not carry over)."""
        if self.prediction is None or device_mismatch(self.device, self.prediction):
            return None
        return step_ratio(self.ranks, self.prediction)

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
        doc["warnings"] = list(self.warnings)
        if self.prediction is not None:
            doc["prediction"] = {
                "source": self.prediction.source,
                "gpu": self.prediction.gpu,
                "predicted_step_time_s": self.prediction.step_time_s,
                "measured_over_predicted_step": self.step_ratio,
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


def _watch_parent() -> None:
    """Exit as soon as the parent does, even when it is killed outright (SIGKILL, OOM)."""
    parent = mp.parent_process()
    if parent is not None:
        mp.connection.wait([parent.sentinel])
        os._exit(1)


def _worker(index: int, path: Path, out: Any) -> None:
    """Read one rank in a child process; every outcome goes to ``out`` as one message."""
    threading.Thread(target=_watch_parent, daemon=True).start()
    try:
        result = analyze_rank(path, lambda n: out.put(("progress", index, n)))
    except InputError as exc:
        out.put(("error", index, str(exc)))
    except BaseException as exc:  # the parent re-raises it with the traceback
        out.put(("crash", index, "".join(traceback.format_exception(exc)).strip()))
    else:
        out.put(("done", index, result))


def _how_it_ended(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        return f"was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return f"exited with code {exitcode}"


def _read_parallel(
    paths: Sequence[Path], workers: int, report: Callable[[int, int | None], None]
) -> list[RankResult]:
    """One spawned process per file, at most ``workers`` at once. The first failure stops the
    rest; every child is killed and reaped on the way out, whatever the way out is."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    waiting = list(enumerate(paths))[::-1]
    running: dict[int, BaseProcess] = {}
    results: dict[int, RankResult] = {}
    try:
        while waiting or running:
            while waiting and len(running) < workers:
                index, path = waiting.pop()
                child = ctx.Process(target=_worker, args=(index, path, out), daemon=True)
                child.start()
                running[index] = child
            try:
                kind, index, payload = out.get(timeout=_POLL_S)
            except queue.Empty:
                # A child that died without a word (killed, out of memory) sent nothing; one
                # that finished has its message in the pipe already, so look there first.
                dead = [i for i, c in running.items() if not c.is_alive()]
                if dead and out.empty():
                    raise RuntimeError(
                        f"reading {paths[dead[0]]} stopped without a result: its process "
                        f"{_how_it_ended(running[dead[0]].exitcode)}"
                    ) from None
                continue
            if kind == "progress":
                report(index, payload)
            elif kind == "done":
                results[index] = payload
                report(index, None)
                running.pop(index).join()
            elif kind == "error":
                raise InputError(payload)
            else:
                raise RuntimeError(f"reading {paths[index]} failed in its process:\n{payload}")
    finally:
        for left in running.values():
            left.kill()
        for left in running.values():
            left.join(timeout=_REAP_TIMEOUT_S)
        out.close()
        out.cancel_join_thread()
    return [results[i] for i in range(len(paths))]


def _read_all(paths: Sequence[Path], workers: int, progress: ProgressFn | None) -> list[RankResult]:
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    done = [0] * len(paths)

    def report(index: int, n: int | None) -> None:
        done[index] = sizes[index] if n is None else n
        if progress is not None:
            progress(sum(done), total)

    if workers <= 1 or len(paths) == 1:
        results = []
        for i, path in enumerate(paths):
            results.append(analyze_rank(path, functools.partial(report, i)))
            report(i, None)
        return results
    return _read_parallel(paths, min(workers, len(paths)), report)


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
    seen: dict[tuple[int, int], Path] = {}
    for f in files:
        st = os.stat(input_path(f, label="trace"))
        first = seen.get((st.st_dev, st.st_ino))
        if first is not None:
            same = "given twice" if first == f else f"the same file as {first}"
            raise InputError(f"{f} is {same}; pass each rank's trace once")
        seen[(st.st_dev, st.st_ino)] = f
    if workers is None:
        workers = min(len(files), os.cpu_count() or 1)
    by_rank = _by_rank(_read_all(files, workers, progress))
    ranks = list(by_rank.values())
    stats = distribution({k: r.calls for k, r in by_rank.items()})
    rank_skew = skew({k: r.breakdown for k, r in by_rank.items()})
    device = "gpu" if any(r.device == "gpu" for r in ranks) else "cpu"
    mismatch = None if prediction is None else device_mismatch(device, prediction)
    findings = (
        compare(
            ranks,
            prediction,
            limits.prediction_tolerance,
            seconds_comparable=mismatch is None,
        )
        if prediction is not None
        else []
    )
    return TraceReport(
        warnings=() if mismatch is None else (mismatch,),
        ranks=tuple(ranks),
        collectives=tuple(stats),
        skew=rank_skew,
        diagnoses=tuple(diagnose(ranks, stats, rank_skew, limits)),
        prediction=prediction,
        findings=tuple(findings),
    )
