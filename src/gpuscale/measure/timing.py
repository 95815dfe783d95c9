"""Time a callable the way benchmark harnesses do: warm up, synchronise, then time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def time_calls(fn: Callable[[], Any], iters: int, device: Any, warmup: int = 0) -> list[float]:
    """Seconds of each of ``iters`` calls of ``fn`` after ``warmup`` untimed ones. On CUDA,
    events time the stream rather than the host's launch (nccl-tests and nanoGPT's bench.py do
    the same); on the CPU, wall time per call."""
    import torch

    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        marks = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(iters)
        ]
        torch.cuda.synchronize(device)
        for start, end in marks:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        return [start.elapsed_time(end) * 1e-3 for start, end in marks]
    out = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out
