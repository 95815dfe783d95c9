"""GEMM throughput over a sweep of shapes: the efficiency curve the cost model prices compute with.

Harness in the manner of nanoGPT's ``bench.py``: allocate, warm up (cuBLAS picks its kernel on
the first calls), synchronise, then time each iteration (CUDA events on a GPU, the wall clock on a
CPU). FLOPs are ``2*m*n*k`` per matmul.
"""

from __future__ import annotations

import platform
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from gpuscale import catalog
from gpuscale.errors import InputError, require
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.results import GemmRun, GemmSample
from gpuscale.measure.stats import jitter

DTYPES = ("float32", "tf32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")

CPU_SHAPES = "128,256,384,512,768,1024"
GPU_SHAPES = "256,512,1024,2048,4096,8192,16384,4096x4096x14336,8192x8192x28672,16384x8192x8192"
"""Squares, plus the MLP GEMMs of an 8B/70B model at 4-8k tokens (Llama 3 hidden/ffn sizes),
because real layers are rarely square."""

_PRECISION = {"float32": "fp32", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16"}
"""Catalog precision of each dtype, for the device's dense peak."""


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """``N`` (a square) or ``MxNxK``, comma separated."""
    shapes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(\d+)(?:x(\d+)x(\d+))?", part.lower())
        if not m:
            raise InputError(f"shape '{part}' is not understood; use N (a square) or MxNxK")
        a = int(m.group(1))
        shape = (a, int(m.group(2)), int(m.group(3))) if m.group(2) else (a, a, a)
        require(all(d >= 1 for d in shape), f"shape '{part}': every dimension must be >= 1")
        shapes.append(shape)
    require(bool(shapes), f"--shapes '{text}': no shape")
    return shapes


def peak_tflops(gpu_id: str, dtype: str) -> float:
    device = catalog.gpu(gpu_id)
    try:
        return device.peak(_PRECISION[dtype])
    except KeyError:
        raise InputError(f"{gpu_id} has no {dtype} peak in the catalog") from None


@dataclass(frozen=True, kw_only=True, slots=True)
class MatmulConfig:
    shapes: tuple[tuple[int, int, int], ...]
    dtype: str = "float32"
    device: str = "auto"
    iters: int = 10
    warmup: int = 3
    gpu_id: str | None = None
    """Catalog id to report efficiency against; recognised from the driver's name if absent."""
    command: str = ""

    def __post_init__(self) -> None:
        require(self.dtype in DTYPES, f"unknown dtype '{self.dtype}'; known: {', '.join(DTYPES)}")
        require(
            self.device in DEVICES, f"unknown device '{self.device}'; known: {', '.join(DEVICES)}"
        )
        require(self.iters >= 1, f"--iters must be >= 1, got {self.iters}")
        require(self.warmup >= 0, f"--warmup must be >= 0, got {self.warmup}")


def _timer(device: Any) -> Callable[[Callable[[], Any], int], list[float]]:
    import torch

    def cuda(fn: Callable[[], Any], iters: int) -> list[float]:
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

    def cpu(fn: Callable[[], Any], iters: int) -> list[float]:
        out = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
        return out

    return cuda if device.type == "cuda" else cpu


def run(cfg: MatmulConfig, on_progress: Callable[[int, int], None] | None = None) -> GemmRun:
    """Time every shape; return the run (efficiency is computed by calibration)."""
    try:
        import torch
    except ImportError:
        raise InputError(
            "gpuscale bench matmul needs PyTorch: pip install 'gpuscale[torch]'"
        ) from None

    want_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    require(not want_cuda or torch.cuda.is_available(), "--device cuda: no CUDA GPU visible")
    device = torch.device("cuda", torch.cuda.current_device()) if want_cuda else torch.device("cpu")
    dtype = torch.float32 if cfg.dtype == "tf32" else getattr(torch, cfg.dtype)
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = cfg.dtype == "tf32"
    timer = _timer(device)
    gpu_id, name = cfg.gpu_id, "cpu"
    notes: list[str] = []
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name = props.name
        gpu_id = gpu_id or match_gpu(name, props.total_memory / 2**30)
        if gpu_id is None:
            notes.append(
                f"'{name}' is not recognised as a catalog GPU; pass --gpu ID to get "
                "efficiency against its datasheet peak"
            )
    else:
        name = platform.processor() or platform.machine() or "cpu"
        notes.append(f"CPU run ({torch.get_num_threads()} threads)")
    samples = []
    try:
        for i, (m, n, k) in enumerate(cfg.shapes):
            a = torch.randn(m, k, device=device).to(dtype)
            b = torch.randn(k, n, device=device).to(dtype)

            def matmul(a: Any = a, b: Any = b) -> Any:
                return torch.matmul(a, b)

            timer(matmul, cfg.warmup)
            times = timer(matmul, cfg.iters)
            j = jitter(times)
            samples.append(
                GemmSample(
                    m=m,
                    n=n,
                    k=k,
                    dtype=cfg.dtype,
                    time_us=j.mean_s * 1e6,
                    tflops=2.0 * m * n * k / j.mean_s / 1e12 if j.mean_s else 0.0,
                    cv=j.cv,
                )
            )
            del a, b
            if on_progress is not None:
                on_progress(i + 1, len(cfg.shapes))
    except RuntimeError as exc:
        if "out of memory" in str(exc).lower():
            raise InputError(
                f"shape {m}x{n}x{k} does not fit in device memory; use smaller --shapes"
            ) from None
        raise
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return GemmRun(
        samples=tuple(samples),
        device=name,
        gpu_id=gpu_id,
        host=socket.gethostname(),
        started=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        software=f"torch {torch.__version__}",
        command=cfg.command,
        notes=tuple(notes),
    )


def shapes_for(device: str) -> Sequence[tuple[int, int, int]]:
    """Default sweep: small on a CPU, up to LLM layer sizes on a GPU."""
    return parse_shapes(GPU_SHAPES if device == "cuda" else CPU_SHAPES)
