"""Running the benchmarks behind ``bench`` and ``calibrate`` (shared by both commands, owned
by neither): check what the user typed, start the ranks, show progress, return the run."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpuscale.cli._common import err_console
from gpuscale.costmodel.collectives import OPS
from gpuscale.errors import InputError, require
from gpuscale.measure.bench_setup import (
    CPU_SIZES,
    GPU_SIZES,
    check_host_memory,
    choose_launch,
    host_available_bytes,
)
from gpuscale.measure.results import CollectiveRun, GemmRun


def command_line() -> str:
    return "gpuscale " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr; yields ``update(done, total)``."""
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def under_torchrun() -> bool:
    """torchrun (torch.distributed.elastic) sets these for every rank it starts."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")) and (
        "TORCHELASTIC_RUN_ID" in os.environ or "GROUP_RANK" in os.environ
    )


def _split_ops(text: str) -> tuple[str, ...]:
    items = [o.strip().replace("-", "_") for o in text.split(",")]
    require(
        all(items), f"--ops '{text}' has an empty item; accepted: a comma list of {', '.join(OPS)}"
    )
    aliases = {
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "alltoall": "all_to_all",
        "reducescatter": "reduce_scatter",
        "sendrecv": "send_recv",
    }
    ops = tuple(aliases.get(o, o) for o in items)
    for op in ops:
        require(op in OPS, f"unknown collective '{op}'; known: {', '.join(OPS)}")
    return ops


def warn(message: str) -> None:
    """A warning line on stderr: stdout stays the table or the JSON document."""
    err_console.print(
        f"[yellow]gpuscale: warning:[/yellow] {escape(message)}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )


def run_collectives(
    *,
    ops: str,
    sizes: str | None,
    factor: float,
    iters: int,
    warmup: int,
    dtype: str,
    nproc: int | None,
    backend: str,
    group_by_node: bool,
    ranks_per_node: int | None,
    timeout: float,
) -> CollectiveRun | None:
    """Local spawn, or this process's rank under torchrun (then only rank 0 gets the run).

    Everything the user typed is checked here, before a rank starts: a rank's error would
    come back as a rank failure (exit 1) after seconds of spawning."""
    from gpuscale.measure.collectives_bench import (
        CollectiveConfig,
        parse_sizes,
        run_rank,
        whole_elements,
    )
    from gpuscale.measure.launcher import RankFailure, launch

    try:
        import torch
    except ImportError:
        raise InputError(
            "gpuscale bench collectives needs PyTorch: pip install 'gpuscale[torch]'"
        ) from None
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    local = not under_torchrun()
    plan = choose_launch(nproc=nproc, backend=backend, gpus=gpus)
    n = plan.ranks
    if local:  # under torchrun the backend is resolved in each rank
        backend = plan.backend
    swept = parse_sizes(
        sizes if sizes is not None else GPU_SIZES if plan.on_gpus else CPU_SIZES, factor
    )
    swept, merged = whole_elements(swept, dtype)
    if merged:
        warn(f"--sizes: {merged}")
    op_names = _split_ops(ops)
    if local and backend == "gloo":  # every rank's buffers in this host's memory
        check_host_memory(op_names, swept, dtype, n, host_available_bytes())
    cfg = CollectiveConfig(
        ops=op_names,
        sizes=tuple(swept),
        iters=iters,
        warmup=warmup,
        dtype=dtype,
        backend=backend,
        timeout_s=timeout,
        group_by_node=group_by_node,
        ranks_per_node=ranks_per_node,
        command=command_line(),
    )
    if not local:
        rank0 = os.environ["RANK"] == "0"
        with progress_bar("collectives") if rank0 else _no_bar() as update:
            return run_rank(cfg, on_progress=update)
    require(
        ranks_per_node is None or n % ranks_per_node == 0,
        f"--ranks-per-node {ranks_per_node} does not divide the {n} ranks; accepted: a "
        f"divisor of --nproc ({', '.join(str(k) for k in range(1, n + 1) if n % k == 0)})",
    )
    require(
        backend != "nccl" or n <= gpus,
        f"--nproc {n} with nccl needs {n} GPUs, {gpus} visible; accepted: --nproc <= {gpus} "
        "or --backend gloo",
    )
    try:
        with progress_bar(f"collectives on {n} ranks") as update:
            result = launch(cfg.to_dict(), n, timeout_s=timeout, on_progress=update).result
    except RankFailure as exc:
        raise click.ClickException(str(exc)) from None
    return CollectiveRun.from_dict(result, "rank 0")


@contextmanager
def _no_bar() -> Iterator[Callable[[int, int], None]]:
    yield lambda done, total: None


def run_matmul(
    *, shapes: str | None, dtype: str | None, device: str, iters: int, warmup: int, gpu: str | None
) -> GemmRun:
    from gpuscale.measure.matmul_bench import (
        MatmulConfig,
        parse_shapes,
        run,
        shapes_for,
        target_device,
    )

    try:
        import torch
    except ImportError:
        raise InputError(
            "gpuscale bench matmul needs PyTorch: pip install 'gpuscale[torch]'"
        ) from None
    cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if gpu:
        from gpuscale import catalog

        gpu = catalog.gpu(gpu).id
    if gpu and not cuda:
        warn(
            f"--gpu {gpu} on a CPU run: 'of peak' sets the CPU against that GPU's datasheet "
            "peak, which says nothing about either device"
        )
    cfg = MatmulConfig(
        shapes=tuple(
            parse_shapes(shapes) if shapes is not None else shapes_for("cuda" if cuda else "cpu")
        ),
        dtype=dtype or ("bfloat16" if cuda else "float32"),
        device=device,
        iters=iters,
        warmup=warmup,
        gpu_id=gpu,
        command=command_line(),
    )
    target_device(cfg)  # bad input fails before the progress bar starts
    with progress_bar("matmul") as update:
        return run(cfg, on_progress=update)
