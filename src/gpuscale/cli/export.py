"""``gpuscale export``: the plan from ``estimate``/``plan --json`` as files a trainer or scheduler
accepts (parse, call :func:`gpuscale.api.export_plan`, list what was written)."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.api.export import CLUSTER_TARGETS, TARGETS, TORCHTITAN_VERSIONS, export_plan
from gpuscale.cli._common import console, emit_json
from gpuscale.cli._options import flag, opt, options
from gpuscale.report.export import print_export


@click.command("export")
@options(
    opt("--to", click.Choice(TARGETS), required=True, help="Target tool."),
    opt(
        "--from source",
        required=True,
        help="The --json output of `gpuscale estimate` or `gpuscale plan` (its first ranked plan); "
        "- reads it from standard input.",
    ),
    flag(
        "seq",
        type=click.IntRange(min=1),
        default=None,
        help="Sequence length, if the document lacks it.",
    ),
    flag(
        "precision",
        type=click.Choice(["bf16", "fp16", "fp8", "fp32"]),
        default=None,
        help="Training precision [default: the document's, else bf16].",
    ),
    flag(
        "gpus_per_node",
        type=click.IntRange(min=1),
        help="GPUs a node [default: the document's, else the GPU's NVLink domain: 8; 72 on "
        "GB200/GB300 NVL72].",
    ),
    opt("-o --output", help="Folder to write the files into (created if its parent exists)."),
    opt(
        "--torchtitan-version",
        help=f"torchtitan release line: {', '.join(TORCHTITAN_VERSIONS)} (0.2.x: a TOML job file) "
        f"[default: {TORCHTITAN_VERSIONS[0]}].",
    ),
    opt(
        "--cluster",
        help=f"Cluster file: also write its topology for the scheduler ({', '.join(CLUSTER_TARGETS)}).",
    ),
    "json",
)
def command(source: str, as_json: bool, **o: Any) -> None:
    """Write the plan as torchtitan, Megatron-LM, DeepSpeed, accelerate, Slurm, Kueue or Volcano
    files."""
    result = export_plan(source, **o)
    if as_json:
        emit_json(result.to_dict())
        return
    print_export(console, result.export, result.written, to_folder=o["output"] is not None)
