"""``gpuscale calibrate run``: fit a profile to one measured training run (see
:mod:`gpuscale.planner.calibrate_run` for what is fitted and why)."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.calibrate_run import QUANTITIES, calibrate_run
from gpuscale.cli._common import check_writable, console, emit_json, err_console
from gpuscale.cli._options import RUN, flag, opt, options
from gpuscale.report.calibrate_run import print_calibrated_run, print_notes


@click.command("calibrate run")
@options(
    RUN,
    *("measured_tokens_per_s", "measured_step_s", "measured_memory_gib"),
    opt(
        "--fit only",
        click.Choice(list(QUANTITIES)),
        help="Fit this quantity alone [default: split the gap between the quantities the step "
        "depends on, by their part of its prior uncertainty].",
    ),
    flag("name", default=None, help="Name of the profile [default: from the run]."),
    opt("-o --output", help="Write the profile YAML here."),
    "json",
)
def command(model: str, output: str | None, as_json: bool, **run: Any) -> None:
    """Fit a profile to one measured run of MODEL: give the run's estimate flags and its
    measured throughput (or step time), optionally its peak memory; use the profile with
    --profile in estimate, plan and scale."""
    check_writable(output, "-o")
    result = calibrate_run(model, output=output, **run)
    print_notes(err_console, result.assumed, result.warnings)
    if as_json:
        emit_json(result.to_dict())
        return
    print_calibrated_run(console, result)
