"""How a local collective benchmark runs: ranks, backend, sizes, and whether the host can hold
it. One rule for ``gpuscale bench collectives`` and ``gpuscale doctor``; no torch here (the
caller says how many GPUs it sees), so it is checked before a rank starts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from gpuscale.errors import InputError, require

GPU_SIZES = "8:128M"
CPU_SIZES = "8:4M"
"""Default sweeps: nccl-tests' usual range on GPUs; on CPU/gloo a range that finishes in
seconds (host memory bandwidth is reached by a few MiB)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch:
    """Ranks and backend of a local run."""

    ranks: int
    backend: str
    """``nccl`` or ``gloo`` (``auto`` resolved)."""
    on_gpus: bool
    """Whether the sweep's default is the GPU one (NCCL, or auto with GPUs visible)."""


def choose_launch(*, nproc: int | None, backend: str, gpus: int) -> Launch:
    """Every GPU with NCCL when there are two or more, else 2 gloo ranks on the host; an
    explicit ``nproc``/``backend`` wins (``auto``: NCCL needs a GPU per rank)."""
    if nproc is not None:
        require(
            nproc >= 2,
            f"--nproc must be >= 2 for a collective, got {nproc}; accepted: 2 or more",
            field="nproc",
        )
    n = nproc if nproc is not None else (gpus if gpus >= 2 and backend != "gloo" else 2)
    on_gpus = backend == "nccl" or (backend == "auto" and gpus > 0)
    if backend == "auto":
        backend = "nccl" if 2 <= n <= gpus else "gloo"
    return Launch(ranks=n, backend=backend, on_gpus=on_gpus)


def rank_buffer_bytes(op: str, size: int, dtype: str, ranks: int) -> int:
    """Bytes of the tensors one rank allocates for ``op`` at ``size``
    (:func:`gpuscale.measure.collectives_bench._make_op`: one buffer for all_reduce and
    broadcast, send and receive buffers for send_recv, input and output for the others)."""
    # Imported here: every command's flags read this module's defaults (GPU_SIZES, CPU_SIZES).
    from gpuscale.measure.collectives_bench import ELEMENT_BYTES, actual_size

    elem = ELEMENT_BYTES[dtype]
    _, count = actual_size(op, size, elem, ranks)
    if op in ("all_reduce", "broadcast"):
        return count * elem
    if op == "send_recv":
        return 2 * count * elem
    if op in ("all_gather", "reduce_scatter"):
        return (count + count * ranks) * elem
    return 2 * count * ranks * elem  # all_to_all


def host_available_bytes() -> int | None:
    """``MemAvailable`` (Linux ``/proc/meminfo``: what can be allocated without swapping), else
    the free physical pages; None where neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n: float) -> str:
    return f"{n / 2**30:.3g} GiB"


def check_host_memory(
    ops: Sequence[str], sizes: Sequence[int], dtype: str, ranks: int, available: int | None
) -> None:
    """Refuse a host (gloo) sweep whose largest size would not fit in the host's available
    memory with every local rank holding its buffers, before any rank starts: past it the
    ranks swap or the kernel's OOM killer stops one, after minutes of smaller sizes. The
    count is a lower bound (gloo adds scratch buffers of its own)."""
    if available is None or not sizes or not ops:
        return
    need = ranks * max(rank_buffer_bytes(op, size, dtype, ranks) for op in ops for size in sizes)
    if need > available:
        biggest = max(sizes)
        raise InputError(
            f"--sizes up to {_gib(biggest)} need at least {_gib(need)} of host memory for {ranks} "
            f"ranks' buffers, and {_gib(available)} is available; accepted: a smaller MAX in "
            "--sizes, fewer --ops or --nproc",
            field="sizes",
        )
