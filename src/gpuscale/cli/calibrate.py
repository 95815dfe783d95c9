"""``gpuscale calibrate``: measure (or read measurements), fit a profile, show how well it fits.
Parsing and rendering: the fit is :func:`gpuscale.api.measure.calibrate`."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.measure import (
    CalibrationResult,
    bench_collectives,
    bench_matmul,
    calibrate,
    calibrate_runs,
    check_calibration_inputs,
)
from gpuscale.cli._common import bench_bar, command_line, console, emit_json, typed_options, warn
from gpuscale.cli._options import CALIBRATION, flag, opt, options
from gpuscale.errors import InputError
from gpuscale.report.measure import print_fitted_profile

BENCHMARK = ["nproc", "sizes", "iters", "backend", "group_by_node", "ranks_per_node", "timeout"]
"""The benchmarks' flags (as ``bench`` takes them): they mean nothing with --from."""


@click.command("calibrate")
@options(
    opt(
        "--from sources",
        multiple=True,
        help="Read measurements instead of running: gpuscale bench --json files or "
        "nccl-tests logs (repeatable).",
    ),
    flag("gpu", help="Catalog GPU the GEMM curve is for [default: recognised; 'cpu' on a CPU]."),
    *BENCHMARK,
    "shapes",
    CALIBRATION,
)
def command(sources: tuple[str, ...], html_path: str | None, as_json: bool, **o: Any) -> None:
    """Fit a calibration profile (per-level latency and bandwidth, GEMM efficiency curve) from
    the collective and matmul benchmarks, run now or read with --from. From one measured
    training run instead: gpuscale calibrate run --help."""
    bench = {k: o.pop(k) for k in BENCHMARK}
    if sources:
        typed = typed_options(click.get_current_context())
        for name in [*BENCHMARK, "shapes"]:
            if name in typed:
                raise InputError(
                    f"{typed[name]} has no effect with --from (it sets up a benchmark run); "
                    "accepted: drop it, or drop --from to measure here"
                )
        del o["shapes"]
        result = calibrate(sources, html=html_path, **o)
    else:
        measured = _measure_and_fit(bench, html_path=html_path, **o)
        if measured is None:
            return  # a non-zero torchrun rank: rank 0 fits and writes
        result = measured
    for w in result.fit.warnings:
        warn(w)
    if as_json:
        emit_json(result.to_dict())
    else:
        print_fitted_profile(console, result.fit, html_path)


def _measure_and_fit(
    bench: dict[str, Any], *, shapes: str | None, html_path: str | None, **fit: Any
) -> CalibrationResult | None:
    """Run the collective and matmul benchmarks here (torch), then fit as --from does."""
    gpu = check_calibration_inputs(html=html_path, shapes=shapes, **fit)
    ops = "all_reduce,all_gather,reduce_scatter,broadcast,send_recv"
    with bench_bar("collectives") as update:
        coll = bench_collectives(
            ops=ops, progress=update, warn=warn, command=command_line(), **bench
        )
    if coll is None:
        return None
    with bench_bar("matmul") as update:
        gemm = bench_matmul(shapes=shapes, gpu=gpu, progress=update, warn=warn)
    return calibrate_runs([coll], [gemm], html=html_path, **{**fit, "gpu": gpu})
