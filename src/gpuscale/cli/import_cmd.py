"""``gpuscale import nccl-tests LOG...``: turn nccl-tests output into a calibration profile."""

from __future__ import annotations

import click
from rich.table import Table

from gpuscale.cli._common import console, json_option
from gpuscale.cli.calibrate import (
    check_outputs,
    distinct_files,
    finish,
    profile_options,
    topology,
    topology_option,
)
from gpuscale.costmodel.collectives import OPS
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.measure.calibrate import calibrate
from gpuscale.measure.nccl_tests import NcclTestsRun, parse_files
from gpuscale.measure.sources import Measurements

OP_CHOICES = (*OPS, "reduce", "gather", "scatter")


def print_runs(runs: list[NcclTestsRun]) -> None:
    table = Table(title="nccl-tests runs", title_justify="left")
    for col in ("log:line", "op", "ranks", "level", "type", "rows", "max busbw", "status"):
        table.add_column(
            col, justify="left" if col in ("log:line", "op", "level", "type", "status") else "right"
        )
    for r in runs:
        busbw = [t.busbw_gb_per_s for row in r.rows for t in (row.out_of_place,) if t]
        status = (
            "aborted"
            if r.aborted
            else "wrong values"
            if r.wrong_rows
            else "ok"
            if r.complete
            else "no footer"
        )
        table.add_row(
            f"{r.path.rsplit('/', 1)[-1]}:{r.line}",
            r.op,
            f"{r.nodes}x{r.ranks_per_node}",
            r.level,
            r.dtype,
            str(len(r.rows)),
            f"{max(busbw):.1f}" if busbw else "-",
            status,
        )
    console.print(table)


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
    check_outputs(output=output, html_path=html_path, name=name)
    topology(None, gpus_per_node, nics_per_node)
    load_profile(base)
    distinct_files(logs, "log")
    runs = parse_files(logs, op)
    usable = [r for r in runs if r.samples(in_place=in_place)]
    if not usable:
        reasons = "; ".join(w for r in runs for w in r.warnings()) or "no data rows"
        raise InputError(f"nothing to calibrate: {reasons}")
    m = Measurements(nccl=usable)
    samples = [s for r in usable for s in r.samples(in_place=in_place)]
    notes = [w for r in runs for w in r.warnings()]
    for r in usable:
        notes.append(
            f"{r.path}:{r.line}: {r.nodes} node(s) of {r.ranks_per_node} ranks -> '{r.level}' level"
        )
    topo = topology(m.ranks_per_node(), gpus_per_node, nics_per_node)
    cal = calibrate(samples, None, topo)
    if not as_json:
        print_runs(runs)
    finish(
        cal,
        m,
        name=name,
        base=base,
        output=output,
        html_path=html_path,
        topo=topo,
        notes=notes,
        as_json=as_json,
        title=f"gpuscale import nccl-tests: {name}",
        how="gpuscale import nccl-tests",
    )
