"""``gpuscale import nccl-tests LOG...``: turn nccl-tests output into a calibration profile.
Parsing and rendering: the fit is :func:`gpuscale.api.measure.import_nccl_tests`."""

from __future__ import annotations

import click

from gpuscale.api.measure import COLLECTIVE_OPS, import_nccl_tests
from gpuscale.cli._calibration_options import profile_options, show_calibration, topology_option
from gpuscale.cli._common import console, json_option
from gpuscale.report.measure import print_runs

OP_CHOICES = (*COLLECTIVE_OPS, "reduce", "gather", "scatter")


@click.group("import")
def command() -> None:
    """Import measurements made by other tools."""


@command.command("nccl-tests")
@click.argument("logs", nargs=-1, required=True)
@click.option(
    "--op",
    type=click.Choice(OP_CHOICES),
    default=None,
    help="The collective, where neither the log nor its file name says (a contradiction "
    "is an error).",
)
@click.option(
    "--in-place",
    is_flag=True,
    help="Fit the in-place columns [default: out-of-place, as published tables use].",
)
@topology_option
@profile_options
@json_option
def nccl_tests_cmd(
    logs: tuple[str, ...],
    op: str | None,
    in_place: bool,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    output: str | None,
    name: str,
    base: str,
    html_path: str | None,
    as_json: bool,
) -> None:
    """Parse nccl-tests text logs (any version, mpirun --tag-output too) or -J JSON reports and
    fit the same profile as calibrate. A single-node log gives the 'intra' level, a multi-node
    one 'inter'."""
    result = import_nccl_tests(
        logs,
        op=op,
        in_place=in_place,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        output=output,
        name=name,
        base=base,
        html=html_path,
    )
    if not as_json:
        print_runs(console, list(result.runs))
    show_calibration(result, as_json=as_json, html_path=html_path)
