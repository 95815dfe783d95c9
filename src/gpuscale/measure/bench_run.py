"""Running the collective and matmul benchmarks on this machine (torch, imported lazily):
check what the user typed, start the ranks, return the run. Progress and warnings go to
callbacks, so the CLI draws its bars and the API stays quiet."""

from __future__ import annotations

import os
from collections.abc import Callable

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

ProgressFn = Callable[[int, int], None]
WarnFn = Callable[[str], None]


def _quiet(done: int, total: int) -> None:
    del done, total


def _ignore(message: str) -> None:
    del message


def under_torchrun() -> bool:
    """torchrun (torch.distributed.elastic) sets these for every rank it starts."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")) and (
        "TORCHELASTIC_RUN_ID" in os.environ or "GROUP_RANK" in os.environ
    )


def reporting_rank() -> bool:
    """Whether this process reports (bars, tables): any process but a torchrun rank other than
    0, so that a job shows one bar, not one per rank."""
    return not under_torchrun() or os.environ["RANK"] == "0"


def parse_ops(text: str) -> tuple[str, ...]:
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
    command: str = "",
    progress: ProgressFn = _quiet,
    warn: WarnFn = _ignore,
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
    from gpuscale.measure.launcher import launch

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
    op_names = parse_ops(ops)
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
        command=command,
    )
    if not local:
        rank0 = os.environ["RANK"] == "0"
        return run_rank(cfg, on_progress=progress if rank0 else _quiet)
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
    # a RankFailure (a rank crashed or timed out) is not the user's input: it propagates
    result = launch(cfg.to_dict(), n, timeout_s=timeout, on_progress=progress).result
    return CollectiveRun.from_dict(result, "rank 0")


def run_matmul(
    *,
    shapes: str | None,
    dtype: str | None,
    device: str,
    iters: int,
    warmup: int,
    gpu: str | None,
    command: str = "",
    progress: ProgressFn = _quiet,
    warn: WarnFn = _ignore,
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
        command=command,
    )
    target_device(cfg)  # bad input fails before the progress bar starts
    return run(cfg, on_progress=progress)
