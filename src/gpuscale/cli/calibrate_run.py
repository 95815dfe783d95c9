"""``gpuscale calibrate run``: fit a profile to one measured training run (see
:mod:`gpuscale.planner.calibrate_run` for what is fitted and why)."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.calibrate_run import QUANTITIES, calibrate_run
from gpuscale.cli._common import (
    FINITE,
    check_writable,
    console,
    emit_json,
    err_console,
    json_option,
)
from gpuscale.cli._run_options import run_arguments, run_options
from gpuscale.report.calibrate_run import print_calibrated_run


@click.command("calibrate run")
@run_options
@click.option(
    "--measured-tokens-per-s",
    type=FINITE,
    default=None,
    help="Measured throughput of the whole job, all GPUs together, tokens/s.",
)
@click.option(
    "--measured-step-s",
    type=FINITE,
    default=None,
    help="Measured seconds per optimizer step (instead of --measured-tokens-per-s).",
)
@click.option(
    "--measured-memory-gib",
    type=FINITE,
    default=None,
    help="Measured peak memory the busiest GPU held, GiB, as estimate's memory_per_gpu_gib "
    "counts it (nvidia-smi; allocator reserve plus CUDA context): fits the allocator reserve.",
)
@click.option(
    "--fit",
    "only",
    type=click.Choice(list(QUANTITIES)),
    default=None,
    help="Fit this quantity [default: the one that explains the run with the smallest move "
    "relative to its prior spread].",
)
@click.option("--name", default=None, help="Name of the profile [default: from the run].")
@click.option("-o", "--output", default=None, help="Write the profile YAML here.")
@json_option
def command(output: str | None, as_json: bool, **flags: Any) -> None:
    """Fit a profile to one measured run of MODEL: give the run's estimate flags and its
    measured throughput (or step time), optionally its peak memory; use the profile with
    --profile in estimate, plan and scale."""
    if output:
        check_writable(output, "-o")
    run = run_arguments(click.get_current_context(), flags)
    result = calibrate_run(run.pop("model"), output=output, **run)
    for name, why in result.assumed.items():
        err_console.print(f"assumed: --{name.replace('_', '-')} {why}")
    for warning in result.warnings:
        err_console.print(f"[yellow]warning[/yellow] {warning}")
    if as_json:
        emit_json(result.to_dict())
        return
    print_calibrated_run(console, result)
