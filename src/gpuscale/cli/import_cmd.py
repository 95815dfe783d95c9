"""``gpuscale import nccl-tests LOG...``: turn nccl-tests output into a calibration profile.
Parsing and rendering: the fit is :func:`gpuscale.api.measure.import_nccl_tests`."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.measure import COLLECTIVE_OPS, import_nccl_tests
from gpuscale.cli._common import console, emit_json, warn
from gpuscale.cli._options import CALIBRATION, opt, options
from gpuscale.report.measure import print_fitted_profile, print_runs


@click.group("import")
def command() -> None:
    """Import measurements made by other tools."""


@command.command("nccl-tests")
@click.argument("logs", nargs=-1, required=True)
@options(
    opt(
        "--op",
        click.Choice((*COLLECTIVE_OPS, "reduce", "gather", "scatter")),
        help="The collective, where neither the log nor its file name says (a contradiction "
        "is an error).",
    ),
    opt(
        "--in-place",
        bool,
        help="Fit the in-place columns [default: out-of-place, as published tables use].",
    ),
    CALIBRATION,
)
def nccl_tests_cmd(logs: tuple[str, ...], html_path: str | None, as_json: bool, **o: Any) -> None:
    """Parse nccl-tests text logs (any version, mpirun --tag-output too) or -J JSON reports and
    fit the same profile as calibrate. A single-node log gives the 'intra' level, a multi-node
    one 'inter'."""
    result = import_nccl_tests(logs, html=html_path, **o)
    for w in result.fit.warnings:
        warn(w)
    if as_json:
        emit_json(result.to_dict())
        return
    print_runs(console, list(result.runs))
    print_fitted_profile(console, result.fit, html_path)
