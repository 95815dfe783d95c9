"""``gpuscale bench collectives|matmul``: measure this machine (or a torchrun job)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import click
from rich.table import Table

from gpuscale import files
from gpuscale.cli._bench_run import run_collectives, run_matmul
from gpuscale.cli._common import check_writable, console, emit_json, json_option
from gpuscale.costmodel.collectives import OPS
from gpuscale.measure.bench_setup import (
    CPU_SIZES,
    GPU_SIZES,
)
from gpuscale.measure.results import CollectiveRun, GemmRun
from gpuscale.measure.stats import JITTER_CV_LIMIT


def _size(n: int) -> str:
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return str(n)


def collective_rows(run: CollectiveRun) -> list[dict[str, Any]]:
    return [{**asdict(s), "jittery": (s.cv or 0.0) > JITTER_CV_LIMIT} for s in run.samples]


def print_collectives(run: CollectiveRun) -> None:
    """nccl-tests' own layout (fixed-width text, one row per size), with the jitter columns
    appended: people compare it line by line with nccl-tests output."""
    click.echo(
        f"# gpuscale bench collectives: {run.backend}, {run.world_size} ranks on "
        f"{run.nodes} node(s) x {run.ranks_per_node}, {run.device}, {run.software}"
    )
    head = (
        f"#{'level':>6} {'op':>14} {'ranks':>5} {'size':>12} {'count':>12} {'type':>8} "
        f"{'time':>9} {'algbw':>7} {'busbw':>7} {'p50':>9} {'p99':>9} {'cv':>5}"
    )
    units = (
        f"#{'':>6} {'':>14} {'':>5} {'(B)':>12} {'(elements)':>12} {'':>8} "
        f"{'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'(us)':>9} {'(us)':>9} {'(%)':>5}"
    )
    click.echo(head)
    click.echo(units)
    flagged = 0
    for s in run.samples:
        jittery = (s.cv or 0.0) > JITTER_CV_LIMIT
        flagged += jittery
        click.echo(
            f" {s.level:>6} {s.op:>14} {s.ranks:>5} {s.size_bytes:>12} {s.count:>12} "
            f"{s.dtype:>8} {s.time_us:>9.1f} {s.algbw_gb_per_s:>7.3f} "
            f"{s.busbw_gb_per_s:>7.3f} {s.p50_us or 0:>9.1f} {s.p99_us or 0:>9.1f} "
            f"{100 * (s.cv or 0):>5.0f}" + ("  jitter" if jittery else "")
        )
    if flagged:
        click.echo(
            f"# network jitter: expect slow training ({flagged} of {len(run.samples)} "
            f"sizes vary by more than {JITTER_CV_LIMIT:.0%} from iteration to iteration)"
        )
    for note in run.notes:
        click.echo(f"# note: {note}")


def write_csv(path: str, rows: Sequence[dict[str, Any]]) -> None:
    text = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    files.write_text(path, text.getvalue(), label="--csv", field="csv")


def print_matmul(run: GemmRun, peak: float | None) -> None:
    table = Table(
        title=f"matmul on {run.device}" + (f" ({run.gpu_id})" if run.gpu_id else ""),
        title_justify="left",
    )
    for col in ("m", "n", "k", "dtype", "GFLOP", "time (us)", "TFLOP/s", "of peak", "cv"):
        table.add_column(col, justify="left" if col == "dtype" else "right")
    for s in run.samples:
        table.add_row(
            str(s.m),
            str(s.n),
            str(s.k),
            s.dtype,
            f"{s.flops / 1e9:.3g}",
            f"{s.time_us:.1f}",
            f"{s.tflops:.3f}",
            f"{s.tflops / peak:.0%}" if peak else "-",
            f"{s.cv:.0%}",
        )
    console.print(table)
    for note in run.notes:
        console.print(f"note: {note}")


@click.group("bench")
def command() -> None:
    """Measure collectives and matmuls with real torch.distributed and torch."""


@command.command("collectives")
@click.option(
    "--ops", default=",".join(OPS), show_default=True, help="Comma-separated collectives."
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
    run = run_collectives(
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
    )
    if run is None:
        return
    rows = collective_rows(run)
    if csv_path:
        write_csv(csv_path, rows)
    if as_json:
        emit_json({**run.to_dict(), "samples": rows, "jitter_cv_limit": JITTER_CV_LIMIT})
        return
    print_collectives(run)


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
    from gpuscale.measure.matmul_bench import peak_tflops

    if csv_path:
        check_writable(csv_path, "--csv")
    run = run_matmul(shapes=shapes, dtype=dtype, device=device, iters=iters, warmup=warmup, gpu=gpu)
    peak = peak_tflops(run.gpu_id, run.samples[0].dtype) if run.gpu_id else None
    rows = [
        {**asdict(s), "flops": s.flops, "efficiency": s.tflops / peak if peak else None}
        for s in run.samples
    ]
    if csv_path:
        write_csv(csv_path, rows)
    if as_json:
        emit_json({**run.to_dict(), "samples": rows, "peak_tflops": peak})
        return
    print_matmul(run, peak)
