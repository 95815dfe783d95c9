"""``gpuscale export``: the plan from ``estimate``/``plan --json`` as files a trainer or scheduler
accepts (parse, call :func:`gpuscale.api.export_plan`, list what was written)."""

from __future__ import annotations

import click
from rich.table import Table

from gpuscale.api.export import CLUSTER_TARGETS, TARGETS, TORCHTITAN_VERSIONS, export_plan
from gpuscale.cli._common import console, emit_json, json_option


@click.command("export")
@click.option("--to", "target", required=True, type=click.Choice(TARGETS), help="Target tool.")
@click.option(
    "--from",
    "source",
    required=True,
    help="The --json output of `gpuscale estimate` or `gpuscale plan` (its first ranked plan); "
    "- reads it from standard input.",
)
@click.option(
    "--seq",
    type=click.IntRange(min=1),
    default=None,
    help="Sequence length, if the document lacks it.",
)
@click.option(
    "--precision",
    type=click.Choice(["bf16", "fp16", "fp8", "fp32"]),
    default=None,
    help="Training precision [default: the document's, else bf16].",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="GPUs a node [default: the document's, else 8].",
)
@click.option(
    "-o",
    "--output",
    default=None,
    help="Folder to write the files into (created if its parent exists).",
)
@click.option(
    "--torchtitan-version",
    default=None,
    help=f"torchtitan release line: {', '.join(TORCHTITAN_VERSIONS)} (0.2.x: a TOML job file) "
    f"[default: {TORCHTITAN_VERSIONS[0]}].",
)
@click.option(
    "--cluster",
    default=None,
    help=f"Cluster file: also write its topology for the scheduler ({', '.join(CLUSTER_TARGETS)}).",
)
@json_option
def command(
    target: str,
    source: str,
    seq: int | None,
    precision: str | None,
    gpus_per_node: int | None,
    output: str | None,
    torchtitan_version: str | None,
    cluster: str | None,
    as_json: bool,
) -> None:
    """Write the plan as torchtitan, Megatron-LM, DeepSpeed, accelerate, Slurm, Kueue or Volcano
    files."""
    result = export_plan(
        source,
        to=target,
        seq=seq,
        precision=precision,
        gpus_per_node=gpus_per_node,
        output=output,
        torchtitan_version=torchtitan_version,
        cluster=cluster,
    )
    if as_json:
        emit_json(result.to_dict())
        return
    table = Table("file", "what it is", "bytes", box=None)
    for item in result.export.files:
        table.add_row(item.name, item.purpose, f"{len(item.content.encode()):,}")
    console.print(table)
    if output is None:
        for item in result.export.files:
            console.rule(item.name)
            click.echo(item.content, nl=False)  # verbatim: never wrapped to the terminal width
    else:
        for path in result.written:
            console.print(f"wrote {path}")
    for note in result.export.notes:
        console.print(f"note: {note}")
