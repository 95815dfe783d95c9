"""``gpuscale calibrate``: measure (or read measurements), fit a profile, show how well it fits.
Parsing and rendering: the fit is :func:`gpuscale.api.measure.calibrate`."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource

from gpuscale.api.measure import calibrate, calibrate_runs, check_calibration_inputs
from gpuscale.cli._calibration_options import profile_options, show_calibration, topology_option
from gpuscale.cli._common import json_option
from gpuscale.errors import InputError

BENCHMARK_OPTIONS = (
    "nproc",
    "sizes",
    "iters",
    "backend",
    "group_by_node",
    "ranks_per_node",
    "timeout",
    "shapes",
)
"""Options that configure the benchmarks calibrate runs, and so mean nothing with --from."""


@click.command("calibrate")
@click.option(
    "--from",
    "sources",
    multiple=True,
    help="Read measurements instead of running: gpuscale bench --json files or "
    "nccl-tests logs (repeatable).",
)
@click.option(
    "--gpu",
    default=None,
    help="Catalog GPU the GEMM curve is for [default: recognised; 'cpu' on a CPU].",
)
@click.option("--nproc", type=int, default=None, help="Ranks for the collective benchmark.")
@click.option("--sizes", default=None, help="Collective sizes, MIN:MAX (see bench collectives).")
@click.option("--iters", default=20, show_default=True)
@click.option("--backend", default="auto", type=click.Choice(["auto", "gloo", "nccl"]))
@click.option("--group-by-node", is_flag=True, help="Measure intra- and inter-node separately.")
@click.option(
    "--ranks-per-node",
    type=int,
    default=None,
    help="Treat every K ranks as a node (testing --group-by-node on one host).",
)
@click.option("--timeout", default=120.0, show_default=True)
@click.option("--shapes", default=None, help="GEMM shapes (see bench matmul).")
@topology_option
@profile_options
@json_option
def command(sources: tuple[str, ...], html_path: str | None, as_json: bool, **o: Any) -> None:
    """Fit a calibration profile (per-level latency and bandwidth, GEMM efficiency curve) from
    the collective and matmul benchmarks, run now or read with --from. From one measured
    training run instead: gpuscale calibrate run --help."""
    if sources:
        ctx = click.get_current_context()
        for param in ctx.command.params:
            if param.name in BENCHMARK_OPTIONS and ctx.get_parameter_source(param.name) not in (
                None,
                ParameterSource.DEFAULT,
            ):
                raise InputError(
                    f"{param.opts[-1]} has no effect with --from (it sets up a benchmark run); "
                    "accepted: drop it, or drop --from to measure here"
                )
        fit = {k: o[k] for k in ("gpu", "gpus_per_node", "nics_per_node", "output", "name", "base")}
        result = calibrate(sources, html=html_path, **fit)
        show_calibration(result, as_json=as_json, html_path=html_path)
        return
    _measure_and_fit(html_path=html_path, as_json=as_json, **o)


def _measure_and_fit(
    *,
    gpu: str | None,
    nproc: int | None,
    sizes: str | None,
    iters: int,
    backend: str,
    group_by_node: bool,
    ranks_per_node: int | None,
    timeout: float,
    shapes: str | None,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    output: str | None,
    name: str,
    base: str,
    html_path: str | None,
    as_json: bool,
) -> None:
    """Run the collective and matmul benchmarks here (torch), then fit as --from does."""
    from gpuscale.api.measure import bench_collectives, bench_matmul
    from gpuscale.cli._bench_run import command_line, progress_bar, rank_failure, warn

    gpu = check_calibration_inputs(
        output=output,
        html=html_path,
        name=name,
        base=base,
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        shapes=shapes,
    )
    with rank_failure(), progress_bar("collectives") as update:
        coll = bench_collectives(
            ops="all_reduce,all_gather,reduce_scatter,broadcast,send_recv",
            sizes=sizes,
            iters=iters,
            nproc=nproc,
            backend=backend,
            group_by_node=group_by_node,
            ranks_per_node=ranks_per_node,
            timeout=timeout,
            progress=update,
            warn=warn,
            command=command_line(),
        )
    if coll is None:
        return  # a non-zero torchrun rank: rank 0 fits and writes
    with progress_bar("matmul") as update:
        gemm = bench_matmul(shapes=shapes, gpu=gpu, progress=update, warn=warn)
    result = calibrate_runs(
        [coll],
        [gemm],
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        output=output,
        name=name,
        base=base,
        html=html_path,
    )
    show_calibration(result, as_json=as_json, html_path=html_path)
