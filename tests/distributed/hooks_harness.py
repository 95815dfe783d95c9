"""Run a function on ``world`` real gloo processes on this machine, with a deadline.

A ``file://`` rendezvous (no port races), one CPU thread per rank, torchrun's environment
(``LOCAL_WORLD_SIZE`` 2: ranks 0-1 are "node 0", 2-3 "node 1"), every child reaped, and each
child's traceback brought back into the test's failure message.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

WORLD = 4
LOCAL_WORLD = 2

Target = Callable[..., None]


def _child(
    target: Target, rank: int, world: int, local: int, folder: str, args: tuple[Any, ...]
) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(
        WORLD_SIZE=str(world),
        RANK=str(rank),
        LOCAL_WORLD_SIZE=str(local),
        LOCAL_RANK=str(rank % local),
        GROUP_RANK=str(rank // local),
    )
    torch.set_num_threads(1)
    out = Path(folder)
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{out / 'rendezvous'}",
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=60),
        )
        target(rank, world, out, *args)
    except BaseException:
        (out / f"rank{rank}.err").write_text(traceback.format_exc())
        raise SystemExit(1) from None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run_ranks(
    target: Target,
    folder: Path,
    *args: Any,
    world: int = WORLD,
    local: int = LOCAL_WORLD,
    timeout_s: float = 120.0,
) -> None:
    """Run ``target(rank, world, folder, *args)`` on ``world`` processes; raise on any failure
    or when the deadline passes (all children are killed and reaped either way)."""
    ctx = mp.get_context("spawn")
    folder.mkdir(parents=True, exist_ok=True)
    procs = [
        ctx.Process(target=_child, args=(target, r, world, local, str(folder), args), daemon=True)
        for r in range(world)
    ]
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        if hung:
            raise TimeoutError(f"ranks {hung} still running after {timeout_s:.0f}s")
        errors = sorted(folder.glob("rank*.err"))
        if errors:
            raise RuntimeError("\n".join(e.read_text() for e in errors))
        codes = [p.exitcode for p in procs]
        if any(codes):
            raise RuntimeError(f"rank exit codes {codes}")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join(5)
