"""``gpuscale bench collectives|matmul``: measure this machine (or a torchrun job)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from gpuscale import files
from gpuscale.api.measure import (
    COLLECTIVE_OPS,
    CPU_SIZES,
    GPU_SIZES,
    bench_collectives,
    bench_matmul,
)
from gpuscale.cli._bench_run import command_line, progress_bar, rank_failure, warn
from gpuscale.cli._common import check_writable, console, emit_json, json_option
from gpuscale.report.csv_rows import rows_csv
from gpuscale.report.measure import print_collectives, print_matmul


def write_csv(path: str, rows: Sequence[dict[str, Any]]) -> None:
    files.write_text(path, rows_csv(rows), label="--csv", field="csv")


@click.group("bench")
def command() -> None:
    """Measure collectives and matmuls with real torch.distributed and torch."""


@command.command("collectives")
@click.option(
    "--ops",
    default=",".join(COLLECTIVE_OPS),
    show_default=True,
    help="Comma-separated collectives.",
)
@click.option(
    "--sizes",
    default=None,
    help=f"MIN:MAX bytes (K/M/G suffixes) or a comma list [default: {GPU_SIZES} on "
    f"GPUs, {CPU_SIZES} on CPU].",
)
@click.option("--factor", default=2.0, show_default=True, help="Size step factor.")
@click.option("--iters", default=20, show_default=True, help="Timed iterations per size.")
@click.option("--warmup", default=5, show_default=True, help="Untimed iterations per size.")
@click.option(
    "--dtype",
    default="float32",
    show_default=True,
    type=click.Choice(["float32", "float16", "bfloat16", "float64", "int32", "int8"]),
)
@click.option(
    "--nproc",
    type=int,
    default=None,
    help="Ranks to start here [default: every GPU, or 2 on CPU]. Ignored under torchrun.",
)
@click.option(
    "--backend",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "gloo", "nccl"]),
    help="auto: nccl on GPUs, else gloo.",
)
@click.option(
    "--group-by-node",
    is_flag=True,
    help="Measure inside each node (intra) and across nodes (inter) separately.",
)
@click.option(
    "--ranks-per-node",
    type=int,
    default=None,
    help="Treat every K consecutive ranks as one node (try --group-by-node on one host).",
)
@click.option(
    "--timeout",
    default=120.0,
    show_default=True,
    help="Seconds a rank may wait on a collective; the run stops after this long without progress.",
)
@click.option("--csv", "csv_path", default=None, help="Also write the rows to this CSV file.")
@json_option
def collectives(
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
    csv_path: str | None,
    as_json: bool,
) -> None:
    """Time all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and send/recv over a
    size sweep, with nccl-tests' columns and per-size jitter.

    Multi-node: start it under torchrun on every node, e.g.
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500
    -m gpuscale.cli.main bench collectives --group-by-node
    """
    if csv_path:
        check_writable(csv_path, "--csv")
    with rank_failure(), progress_bar("collectives") as update:
        result = bench_collectives(
            ops=ops,
            sizes=sizes,
            factor=factor,
            iters=iters,
            warmup=warmup,
            dtype=dtype,
            nproc=nproc,
            backend=backend,
            group_by_node=group_by_node,
            ranks_per_node=ranks_per_node,
            timeout=timeout,
            progress=update,
            warn=warn,
            command=command_line(),
        )
    if result is None:
        return  # a non-zero torchrun rank: rank 0 reports
    if csv_path:
        write_csv(csv_path, result.rows())
    if as_json:
        emit_json(result.to_dict())
        return
    print_collectives(result.run, result.jitter_cv_limit)


@command.command("matmul")
@click.option(
    "--shapes",
    default=None,
    help="Comma list of N (square) or MxNxK [default: a sweep for the device].",
)
@click.option(
    "--dtype",
    default=None,
    type=click.Choice(["float32", "tf32", "bfloat16", "float16"]),
    help="[default: bfloat16 on GPU, float32 on CPU]",
)
@click.option(
    "--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"])
)
@click.option("--iters", default=10, show_default=True)
@click.option("--warmup", default=3, show_default=True)
@click.option(
    "--gpu",
    default=None,
    help="Catalog GPU id to rate efficiency against [default: recognised from the device name].",
)
@click.option("--csv", "csv_path", default=None, help="Also write the rows to this CSV file.")
@json_option
def matmul(
    shapes: str | None,
    dtype: str | None,
    device: str,
    iters: int,
    warmup: int,
    gpu: str | None,
    csv_path: str | None,
    as_json: bool,
) -> None:
    """GEMM TFLOP/s over a shape sweep: the efficiency curve of the cost model."""
    if csv_path:
        check_writable(csv_path, "--csv")
    with progress_bar("matmul") as update:
        result = bench_matmul(
            shapes=shapes,
            dtype=dtype,
            device=device,
            iters=iters,
            warmup=warmup,
            gpu=gpu,
            progress=update,
            warn=warn,
            command=command_line(),
        )
    if csv_path:
        write_csv(csv_path, result.rows())
    if as_json:
        emit_json(result.to_dict())
        return
    print_matmul(console, result.run, result.peak_tflops)
