"""One pass over a rank's events: the sets of time the analyzers need, and nothing else.

Kept per rank: the union of each kind of busy time (per host thread for CPU ops, since only the
training thread's ops are the "device" of a CPU-only job), the step windows, one duration per
collective call, and a histogram of kernel durations. Nested ops and back-to-back kernels merge
as they arrive, and host ops are dropped once kernels show they are not the device timeline, so
memory follows the busy intervals that stay apart and the steps and collectives, not the events.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuscale.errors import InputError, quoted
from gpuscale.measure.trace.classify import (
    STEP_RE,
    CommSource,
    Kind,
    classify,
    collective_name,
    comm_source,
    message_bytes,
)
from gpuscale.measure.trace.intervals import Intervals, UnionBuilder, merge

US = 1e-6
"""Chrome-trace timestamps and durations are microseconds."""

KERNEL_HIST_EDGES_S = np.logspace(-7, 0, 43)
"""Log-spaced bins from 0.1 us to 1 s (6 per decade) for kernel durations: a median to a few
percent without keeping one number per kernel."""
_EDGES = KERNEL_HIST_EDGES_S.tolist()

MAX_TS_US = float(2**53)
"""Latest timestamp accepted (us): past 2**53 a double no longer holds whole microseconds, so
durations computed from such times are rounding noise (a ProfilerStep at ``ts: 1e308`` was 0 s
long, or -1e302 s once clipped at the next step's start). It is year 2255 as Unix time; Kineto
writes microseconds since the trace started, or since the epoch (about 1.7e15 in 2024)."""
MAX_DUR_US = 86_400e6
"""Longest event accepted (us): one day. The profiler keeps every event of its window in
memory, so a traced step or kernel is seconds to minutes; a longer one is a corrupt record (a
wrapped-around end time), and would make one step outweigh the rest of the trace."""
TIMES_ACCEPTED = (
    f"accepted: ts from 0 to {MAX_TS_US:.4g} us (2**53) and dur from 0 to {MAX_DUR_US:.4g} us "
    "(one day), finite numbers"
)


class BadEvent(InputError):
    """An event whose times cannot be on a real timeline; :func:`analyze_rank
    <gpuscale.measure.trace.rank.analyze_rank>` puts the file's path in front."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectiveCall:
    """One collective as this rank saw it."""

    op: str
    bytes: int | None
    start_s: float
    duration_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class RankTimeline:
    """Everything one rank's trace contributes to the analysis (seconds, trace clock)."""

    device: str
    """``gpu`` when the trace has device kernels, else ``cpu`` (the training thread is the device)."""
    steps: tuple[int, ...]
    windows: Intervals
    compute: Intervals
    comm: Intervals
    data: Intervals
    optimizer: Intervals
    collectives: tuple[CollectiveCall, ...]
    collective_source: str | None
    kernel_hist: np.ndarray
    """Counts of compute-kernel durations in :data:`KERNEL_HIST_EDGES_S` bins (GPU only)."""
    events: int
    skipped: int
    """Events that had a known kind but no usable ``ts``/``dur``."""


def _number(value: Any) -> float | None:
    kind = type(value)
    if kind is float or kind is int:
        return float(value)
    return None


@dataclass
class TimelineBuilder:
    """Feed events with :meth:`add`; :meth:`build` returns the :class:`RankTimeline`."""

    _host_ops: dict[Any, UnionBuilder] = field(default_factory=lambda: defaultdict(UnionBuilder))
    _host_comm: UnionBuilder = field(default_factory=UnionBuilder)
    _host_comm_by_thread: dict[Any, UnionBuilder] = field(
        default_factory=lambda: defaultdict(UnionBuilder)
    )
    _dev_ops: UnionBuilder = field(default_factory=UnionBuilder)
    _dev_comm: UnionBuilder = field(default_factory=UnionBuilder)
    _data: UnionBuilder = field(default_factory=UnionBuilder)
    _optimizer: UnionBuilder = field(default_factory=UnionBuilder)
    _steps: dict[int, tuple[float, float]] = field(default_factory=dict)
    _step_threads: set[Any] = field(default_factory=set)
    _calls: dict[CommSource, list[CollectiveCall]] = field(
        default_factory=lambda: defaultdict(list)
    )
    _kernel_hist: np.ndarray = field(
        default_factory=lambda: np.zeros(len(KERNEL_HIST_EDGES_S) + 1, dtype=np.int64)
    )
    _open: dict[tuple[Any, Any], list[tuple[str, str, float, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    _events: int = 0
    _skipped: int = 0
    _gpu: bool = False
    _kinds: dict[tuple[str, str], Kind] = field(default_factory=dict)

    def _kind(self, name: str, cat: str) -> Kind:
        # A trace repeats a few thousand names millions of times: classify each pair once.
        key = (name, cat)
        kind = self._kinds.get(key)
        if kind is None:
            kind = self._kinds[key] = classify(name, cat)
        return kind

    def _used(self, name: Any, cat: Any) -> bool:
        """Whether the analysis reads an event of this name and category."""
        return (
            isinstance(name, str)
            and isinstance(cat, str)
            and self._kind(name, cat) is not Kind.IGNORED
        )

    def _refused(self, name: Any, what: str) -> BadEvent:
        return BadEvent(f"event #{self._events} {quoted(str(name))} {what}; {TIMES_ACCEPTED}")

    def add(self, event: dict[str, Any]) -> None:
        self._events += 1
        ph = event.get("ph")
        if ph == "X":
            ts, dur = _number(event.get("ts")), _number(event.get("dur"))
            if ts is None or dur is None:
                self._skipped += self._used(event.get("name"), event.get("cat"))
                return
            # One comparison on the hot path; NaN fails it too. Only events the analysis reads
            # are refused: a stray time on one it ignores (a flow arrow, a Python frame) cannot
            # move a step, so the trace is still worth reading.
            if not (0 <= ts <= MAX_TS_US and 0 <= dur <= MAX_DUR_US):
                name = event.get("name")
                if self._used(name, event.get("cat")):
                    raise self._refused(name, _wrong_time("ts", ts) or _wrong_duration(dur))
                return
            self._complete(event, ts * US, (ts + dur) * US)
        elif ph in ("B", "E"):
            self._begin_end(event, ph)

    def _begin_end(self, event: dict[str, Any], ph: str) -> None:
        # Older Chrome traces pair B/E events per thread; match them with a stack.
        ts = _number(event.get("ts"))
        if ts is None:
            return
        key = (event.get("pid"), event.get("tid"))
        if ph == "B":
            name, cat = str(event.get("name", "")), str(event.get("cat", ""))
            if not 0 <= ts <= MAX_TS_US and self._used(name, cat):
                raise self._refused(name, _wrong_time("ts", ts))
            # Pushed even when ignored, so that the next E closes this B and not an outer one.
            self._open[key].append((name, cat, ts, event.get("args")))
        elif self._open[key]:
            name, cat, start, args = self._open[key].pop()
            if not (start <= ts <= MAX_TS_US and ts - start <= MAX_DUR_US):
                if self._used(name, cat):
                    why = _wrong_time("end ts", ts) or (
                        f"ends at ts {ts:g} us, before it begins at ts {start:g} us"
                        if ts < start
                        else _wrong_duration(ts - start)
                    )
                    raise self._refused(name, why)
                return
            synthetic = {"name": name, "cat": cat, "pid": key[0], "tid": key[1], "args": args}
            self._complete(synthetic, start * US, ts * US)

    def _complete(self, event: dict[str, Any], start: float, end: float) -> None:
        name, cat = event.get("name"), event.get("cat")
        if not isinstance(name, str) or not isinstance(cat, str):
            return
        kind = self._kind(name, cat)
        if kind is Kind.IGNORED:
            return
        if kind is Kind.HOST_OP:
            if not self._gpu:
                self._host_ops[(event.get("pid"), event.get("tid"))].add(start, end)
            return
        if kind is Kind.DEVICE_OP:
            self._device_seen()
            self._dev_ops.add(start, end)
            if cat in ("kernel", "Kernel"):
                self._kernel_hist[bisect.bisect_left(_EDGES, end - start)] += 1
            return
        if kind is Kind.STEP:
            match = STEP_RE.match(name)
            if match:
                self._steps[int(match.group(1))] = (start, end)
                self._step_threads.add((event.get("pid"), event.get("tid")))
            return
        if kind is Kind.DATA:
            self._data.add(start, end)
            return
        if kind is Kind.OPTIMIZER:
            self._optimizer.add(start, end)
            if not self._gpu:
                self._host_ops[(event.get("pid"), event.get("tid"))].add(start, end)
            return
        if kind is Kind.DEVICE_COMM:
            self._device_seen()
            self._dev_comm.add(start, end)
        else:
            self._host_comm.add(start, end)
            if not self._gpu:
                self._host_comm_by_thread[(event.get("pid"), event.get("tid"))].add(start, end)
        source = comm_source(kind, name)
        if source is not None:
            args = event.get("args")
            args = args if isinstance(args, dict) else None
            op = collective_name(name, args)
            if op is not None:
                self._calls[source].append(
                    CollectiveCall(
                        op=op, bytes=message_bytes(args), start_s=start, duration_s=end - start
                    )
                )

    def _device_seen(self) -> None:
        # With device kernels the host ops are not the device timeline: stop keeping them.
        if not self._gpu:
            self._gpu = True
            self._host_ops.clear()
            self._host_comm_by_thread.clear()

    def _thread_compute(self, thread: Any) -> Intervals:
        """A host thread's op time less the time it spent inside collective calls."""
        if thread not in self._host_ops:
            return Intervals.empty()
        ops = self._host_ops[thread].build()
        if thread not in self._host_comm_by_thread:
            return ops
        return _minus(ops, self._host_comm_by_thread[thread].build())

    def feed(self, events: Iterable[dict[str, Any]]) -> TimelineBuilder:
        for event in events:
            self.add(event)
        return self

    def build(self) -> RankTimeline:
        dev_ops, dev_comm = self._dev_ops.build(), self._dev_comm.build()
        gpu = self._gpu
        data = self._data.build()
        optimizer = self._optimizer.build()
        if gpu:
            compute, comm = dev_ops, dev_comm
        else:
            # A CPU-only job: the training thread(s) are the device. Ops run inside the data
            # loader are input work, not training compute; a collective called from inside an
            # op (DDP launches its all-reduce from the AccumulateGrad hook) is communication
            # for as long as it blocks the training thread, not compute.
            threads = self._step_threads or set(self._host_ops)
            compute = _minus(_union(self._thread_compute(t) for t in threads), data)
            comm = self._host_comm.build()
        steps = tuple(sorted(self._steps))
        if steps:
            starts = np.array([self._steps[s][0] for s in steps])
            ends = np.array([self._steps[s][1] for s in steps])
            _check_step_order(steps, starts)
            # Steps are disjoint by construction of ProfilerStep; clip any rounding overlap.
            ends[:-1] = np.minimum(ends[:-1], starts[1:])
            windows = Intervals(starts, ends)
        else:
            # No ProfilerStep markers: the whole traced span is one window.
            timed = [x for x in (compute, comm, data, optimizer) if len(x)]
            windows = (
                Intervals(
                    np.array([min(x.starts[0] for x in timed)]),
                    np.array([max(x.ends[-1] for x in timed)]),
                )
                if timed
                else Intervals.empty()
            )
        source = min(self._calls, key=lambda s: s.rank) if self._calls else None
        calls = _with_sizes(self._calls[source], self._calls) if source else ()
        return RankTimeline(
            device="gpu" if gpu else "cpu",
            steps=steps,
            windows=windows,
            compute=compute,
            comm=comm,
            data=data,
            optimizer=optimizer,
            collectives=calls,
            collective_source=source.label if source else None,
            kernel_hist=self._kernel_hist.copy(),
            events=self._events,
            skipped=self._skipped,
        )


def _wrong_time(what: str, ts: float) -> str:
    """What is wrong with timestamp ``ts`` ("" if nothing is)."""
    if not math.isfinite(ts):
        return f"has {what} {ts}, not a finite number"
    if ts < 0:
        return f"has a negative {what} ({ts:g} us)"
    if ts > MAX_TS_US:
        return f"has {what} {ts:g} us, past 2**53 us"
    return ""


def _wrong_duration(dur: float) -> str:
    """What is wrong with duration ``dur`` (given that something is)."""
    if not math.isfinite(dur):
        return f"has dur {dur}, not a finite number"
    if dur < 0:
        return f"has a negative dur ({dur:g} us)"
    return f"lasts {dur / 3600e6:.3g} hours (dur {dur:g} us), longer than a day"


def _check_step_order(steps: tuple[int, ...], starts: np.ndarray) -> None:
    """``torch.profiler.profile.step()`` numbers steps in the order they run. A step that
    starts before the one numbered below it would be clipped to end before it begins (all
    timestamps negated gave steps of -0.9 ms): its times or numbers are wrong."""
    back = np.flatnonzero(np.diff(starts) < 0)
    if back.size:
        i = int(back[0])
        raise BadEvent(
            f"ProfilerStep#{steps[i + 1]} starts at ts {starts[i + 1] / US:g} us, before "
            f"ProfilerStep#{steps[i]} at ts {starts[i] / US:g} us; accepted: steps whose "
            "numbers increase with their start times, as torch.profiler writes them"
        )


def _with_sizes(
    calls: list[CollectiveCall], by_source: dict[CommSource, list[CollectiveCall]]
) -> tuple[CollectiveCall, ...]:
    """Calls in time order, with message sizes the chosen source lacks taken from another
    source of the same op in issue order (NCCL kernels carry no shapes in older traces; the
    host op that launched them does)."""
    ordered = sorted(calls, key=lambda c: c.start_s)
    out = list(ordered)
    for op in {c.op for c in ordered if c.bytes is None}:
        mine = [i for i, c in enumerate(ordered) if c.op == op]
        for other in by_source.values():
            sized = sorted((c for c in other if c.op == op), key=lambda c: c.start_s)
            if other is calls or len(sized) != len(mine) or any(c.bytes is None for c in sized):
                continue
            for i, donor in zip(mine, sized, strict=True):
                c = ordered[i]
                out[i] = CollectiveCall(
                    op=c.op, bytes=donor.bytes, start_s=c.start_s, duration_s=c.duration_s
                )
            break
    return tuple(out)


def _union(parts: Iterable[Intervals]) -> Intervals:
    items = list(parts)
    if not items:
        return Intervals.empty()
    return merge(np.concatenate([p.starts for p in items]), np.concatenate([p.ends for p in items]))


def _minus(a: Intervals, b: Intervals) -> Intervals:
    """``a`` with the time covered by ``b`` removed."""
    if len(a) == 0 or len(b) == 0:
        return a
    cuts = np.unique(np.concatenate([a.starts, a.ends, b.starts, b.ends]))
    mids = (cuts[:-1] + cuts[1:]) / 2
    keep = a.covers(mids) & ~b.covers(mids)
    return merge(cuts[:-1][keep], cuts[1:][keep])
