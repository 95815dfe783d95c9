"""``gpuscale bench collectives|matmul``: measure this machine (or a torchrun job)."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import files
from gpuscale.api.measure import COLLECTIVE_OPS, bench_collectives, bench_matmul
from gpuscale.cli._common import bench_bar, check_writable, command_line, console, emit_json, warn
from gpuscale.cli._options import flag, opt, options
from gpuscale.report.csv_rows import rows_csv
from gpuscale.report.measure import print_collectives, print_matmul

CSV = opt("--csv csv_path", help="Also write the rows to this CSV file.")


@click.group("bench")
def command() -> None:
    """Measure collectives and matmuls with real torch.distributed and torch."""


@command.command("collectives")
@options(
    opt("--ops", default=",".join(COLLECTIVE_OPS), help="Comma-separated collectives."),
    "sizes",
    opt("--factor", float, 2.0, "Size step factor."),
    "iters",
    "warmup",
    opt(
        "--dtype",
        click.Choice(["float32", "float16", "bfloat16", "float64", "int32", "int8"]),
        "float32",
        "Element type of the buffers.",
    ),
    *("nproc", "backend", "group_by_node", "ranks_per_node", "timeout"),
    CSV,
    "json",
)
def collectives(csv_path: str | None, as_json: bool, **o: Any) -> None:
    """Time all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and send/recv over a
    size sweep, with nccl-tests' columns and per-size jitter.

    Multi-node: start it under torchrun on every node, e.g.
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500
    -m gpuscale.cli.main bench collectives --group-by-node
    """
    check_writable(csv_path, "--csv")
    with bench_bar("collectives") as update:
        result = bench_collectives(progress=update, warn=warn, command=command_line(), **o)
    if result is None:
        return  # a non-zero torchrun rank: rank 0 reports
    if csv_path:
        files.write_text(csv_path, rows_csv(result.rows()), label="--csv", field="csv")
    if as_json:
        emit_json(result.to_dict())
        return
    print_collectives(result.run, result.jitter_cv_limit)


@command.command("matmul")
@options(
    "shapes",
    opt(
        "--dtype",
        click.Choice(["float32", "tf32", "bfloat16", "float16"]),
        help="Element type [default: bfloat16 on GPU, float32 on CPU].",
    ),
    opt("--device", click.Choice(["auto", "cpu", "cuda"]), "auto", "Where to run the GEMMs."),
    flag("iters", default=10, help="Timed iterations per shape."),
    flag("warmup", default=3, help="Untimed iterations per shape."),
    flag(
        "gpu",
        help="Catalog GPU id to rate efficiency against [default: recognised from the device name].",
    ),
    CSV,
    "json",
)
def matmul(csv_path: str | None, as_json: bool, **o: Any) -> None:
    """GEMM TFLOP/s over a shape sweep: the efficiency curve of the cost model."""
    check_writable(csv_path, "--csv")
    with bench_bar("matmul") as update:
        result = bench_matmul(progress=update, warn=warn, command=command_line(), **o)
    if csv_path:
        files.write_text(csv_path, rows_csv(result.rows()), label="--csv", field="csv")
    if as_json:
        emit_json(result.to_dict())
        return
    print_matmul(console, result.run, result.peak_tflops)
