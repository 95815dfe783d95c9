"""GEMM throughput over a sweep of shapes: the efficiency curve the cost model prices compute with.

Harness in the manner of nanoGPT's ``bench.py``: allocate, warm up (cuBLAS picks its kernel on
the first calls), synchronise, then time each iteration (CUDA events on a GPU, the wall clock on a
CPU). FLOPs are ``2*m*n*k`` per matmul.
"""

from __future__ import annotations

import platform
import re
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from gpuscale import catalog
from gpuscale.errors import InputError, require
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.results import GemmRun, GemmSample
from gpuscale.measure.stats import jitter
from gpuscale.measure.timing import time_calls

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
    accepted = "accepted: a comma list of N (a square) or MxNxK"
    require(bool(text.strip()), f"--shapes is empty; {accepted}")
    parts = [p.strip() for p in text.split(",")]
    require(all(parts), f"--shapes '{text}' has an empty item; {accepted}")
    shapes = []
    for part in parts:
        m = re.fullmatch(r"(\d+)(?:x(\d+)x(\d+))?", part.lower())
        if not m:
            raise InputError(f"shape '{part}' is not understood; {accepted}")
        a = int(m.group(1))
        shape = (a, int(m.group(2)), int(m.group(3))) if m.group(2) else (a, a, a)
        require(all(d >= 1 for d in shape), f"shape '{part}' has a zero dimension; {accepted}")
        shapes.append(shape)
    return shapes


ELEMENT_BYTES = {"float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2}
"""Storage per element (TF32 is a tensor-core mode over float32 storage)."""


def shape_bytes(shape: tuple[int, int, int], dtype: str) -> int:
    """Memory one timed matmul holds: ``A (m x k)``, ``B (k x n)`` and the output ``m x n``."""
    m, n, k = shape
    return (m * k + k * n + m * n) * ELEMENT_BYTES[dtype]


def _bytes_text(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def check_fits(shapes: Sequence[tuple[int, int, int]], dtype: str, free_bytes: int | None) -> None:
    """Refuse a shape larger than the device's free memory before allocating it: the allocator's
    own error is a traceback on a CPU, and on Linux an overcommitted host may be OOM-killed."""
    if free_bytes is None:
        return
    for shape in shapes:
        need = shape_bytes(shape, dtype)
        if need > free_bytes:
            m, n, k = shape
            text = str(m) if m == n == k else f"{m}x{n}x{k}"
            raise InputError(
                f"shape {text} needs {_bytes_text(need)} for A, B and the output, and the "
                f"device has {_bytes_text(free_bytes)} free; accepted: smaller --shapes"
            )


def free_memory_bytes(device: Any) -> int | None:
    """Free memory of the device a run allocates on (``MemAvailable`` of the host for a CPU)."""
    import torch

    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    from gpuscale.measure.bench_setup import host_available_bytes

    return host_available_bytes()


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
        require(self.iters >= 1, f"--iters must be >= 1, got {self.iters}; accepted: e.g. 10")
        require(self.warmup >= 0, f"--warmup must be >= 0, got {self.warmup}; accepted: e.g. 3")


def target_device(cfg: MatmulConfig) -> Any:
    """The torch device the run will use, once the config is known to be runnable on it."""
    import torch

    want_cuda = cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
    require(
        not want_cuda or torch.cuda.is_available(),
        "--device cuda: no CUDA GPU visible; accepted here: --device cpu",
    )
    require(
        want_cuda or cfg.dtype != "tf32",
        "--dtype tf32 is a CUDA tensor-core mode and a CPU would run float32 under its name; "
        "accepted on CPU: float32, bfloat16, float16",
    )
    device = torch.device("cuda", torch.cuda.current_device()) if want_cuda else torch.device("cpu")
    check_fits(cfg.shapes, cfg.dtype, free_memory_bytes(device))
    return device


def run(cfg: MatmulConfig, on_progress: Callable[[int, int], None] | None = None) -> GemmRun:
    """Time every shape; return the run (efficiency is computed by calibration)."""
    try:
        import torch
    except ImportError:
        raise InputError(
            "gpuscale bench matmul needs PyTorch: pip install 'gpuscale[torch]'"
        ) from None

    device = target_device(cfg)
    dtype = torch.float32 if cfg.dtype == "tf32" else getattr(torch, cfg.dtype)
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = cfg.dtype == "tf32"
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
        if gpu_id:
            notes.append(
                f"a CPU run rated against {gpu_id}'s datasheet peak: 'of peak' is not an "
                "efficiency of either device"
            )
    samples = []
    try:
        for i, (m, n, k) in enumerate(cfg.shapes):
            a = torch.randn(m, k, device=device, dtype=dtype)
            b = torch.randn(k, n, device=device, dtype=dtype)

            def matmul(a: Any = a, b: Any = b) -> Any:
                return torch.matmul(a, b)

            times = time_calls(matmul, cfg.iters, device, cfg.warmup)
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
        text = str(exc).lower()
        if "out of memory" in text or "can't allocate memory" in text:
            raise InputError(
                f"shape {m}x{n}x{k} needs {_bytes_text(shape_bytes((m, n, k), cfg.dtype))} "
                "and does not fit in device memory; accepted: smaller --shapes"
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
        device_type=device.type,
    )


def shapes_for(device: str) -> Sequence[tuple[int, int, int]]:
    """Default sweep: small on a CPU, up to LLM layer sizes on a GPU."""
    return parse_shapes(GPU_SHAPES if device == "cuda" else CPU_SHAPES)
