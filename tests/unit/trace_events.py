"""Small synthetic Kineto-style event lists for the trace analyzer's unit tests.

Times are microseconds, as in real traces. The real-trace ground truth is in
tests/distributed/trace_scenarios.py; these lists pin exact numbers on hand-checkable timelines.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

MAIN, GLOO, STREAM, NCCL_STREAM = 1, 2, 7, 20


def ev(
    name: str, ts: float, dur: float, cat: str = "cpu_op", tid: Any = MAIN, **args: Any
) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 100,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def kernel(name: str, ts: float, dur: float, stream: int = STREAM, **args: Any) -> dict[str, Any]:
    return ev(name, ts, dur, cat="kernel", tid=stream, stream=stream, device=0, **args)


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return ev(f"ProfilerStep#{n}", ts, dur, cat="user_annotation")


def allreduce(ts: float, dur: float, nelems: int = 1 << 20) -> dict[str, Any]:
    return ev(
        "gloo:all_reduce",
        ts,
        dur,
        cat="user_annotation",
        tid=GLOO,
        **{"Input Dims": [[nelems]], "Input type": ["float"]},
    )


def cpu_rank(
    *,
    steps: int = 10,
    compute_us: float = 1000.0,
    comm_us: Any = 100.0,
    data_us: float = 10.0,
    period_us: float | None = None,
) -> list[dict[str, Any]]:
    """A CPU DDP-like rank: data loader, forward/backward, an all-reduce after backward,
    optimizer. ``comm_us`` may be a list (one duration per step)."""
    events: list[dict[str, Any]] = []
    t = 0.0
    for k in range(steps):
        comm = comm_us[k] if isinstance(comm_us, list) else comm_us
        total = data_us + compute_us + comm + 20
        window = max(total, period_us or 0)
        events += [
            step(k + 1, t, window),
            ev(
                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                t,
                data_us,
                cat="user_annotation",
            ),
            ev("aten::mm", t + data_us, compute_us),
            allreduce(t + data_us + compute_us, comm),
            ev(
                "Optimizer.step#SGD.step",
                t + data_us + compute_us + comm,
                20,
                cat="user_annotation",
            ),
        ]
        t += window
    return events


def trace_doc(events: list[dict[str, Any]], rank: int | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"schemaVersion": 1}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    doc["traceEvents"] = events
    return doc


def write(path: Path, events: list[dict[str, Any]], rank: int | None = None) -> Path:
    text = json.dumps(trace_doc(events, rank))
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path
