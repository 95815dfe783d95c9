"""Options and rendering shared by ``calibrate`` and ``import nccl-tests`` (owned by neither
command): where the profile goes, the NIC share, and how a fitted profile is shown."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.measure import CalibrationResult, profile_names
from gpuscale.cli._bench_run import warn
from gpuscale.cli._common import console, emit_json
from gpuscale.report.measure import print_calibration


def topology_option(func: Any) -> Any:
    func = click.option(
        "--nics-per-node",
        type=int,
        default=None,
        help="NICs per node, to turn the measured inter-node bus bandwidth into "
        "a per-NIC rate [default: one per GPU].",
    )(func)
    return click.option(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs per node, with --nics-per-node [default: as measured].",
    )(func)


def profile_options(func: Any) -> Any:
    func = click.option(
        "-o",
        "--output",
        default=None,
        help="Write the fitted profile YAML here (use it with --profile).",
    )(func)
    func = click.option(
        "--name", default="measured", show_default=True, help="Name of the profile."
    )(func)
    func = click.option(
        "--base",
        default="generic",
        show_default=True,
        help=f"Profile the measurement overrides ({', '.join(profile_names())} or a YAML path).",
    )(func)
    return click.option(
        "--html",
        "html_path",
        default=None,
        help="Write an HTML report with predicted-vs-measured plots.",
    )(func)


def show_calibration(result: CalibrationResult, *, as_json: bool, html_path: str | None) -> None:
    """Warnings on stderr in every mode; then the JSON document, or the tables."""
    for w in result.fit.warnings:
        warn(w)
    if as_json:
        emit_json(result.to_dict())
        return
    cal = result.fit.calibration
    print_calibration(console, cal, list(result.fit.notes))
    written = result.fit.written
    if written:
        console.print(f"wrote {written}: use it with --profile {written}")
    else:
        console.print("(add -o FILE to write the profile)")
    if html_path:
        console.print(f"wrote {html_path}")
