"""``gpuscale scale``: the best plan at 1, 2, 4, ... N GPUs, break-even, and the verdict."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.cli._common import check_writable, console, emit_json, err_console, write_html
from gpuscale.cli._options import PLANNER, flag, opt, options
from gpuscale.report import planner as render
from gpuscale.report.progress import progress_bar


@click.command("scale")
@options(
    PLANNER,
    opt("--max-gpus", int, required=True, help="Largest GPU count to consider."),
    flag("inter", help="Fabric between nodes; a comma list compares fabrics side by side."),
    opt(
        "--runs",
        int,
        help="Compare K independent runs side by side with K runs one after another.",
    ),
    "json",
)
def command(model: str, html_path: str | None, as_json: bool, **o: Any) -> None:
    """Best plan of MODEL at 1, 2, 4, ... --max-gpus GPUs: throughput, per-GPU efficiency, time
    and cost to train, the break-even point, and one GPU / one node / a cluster."""
    check_writable(html_path, "--html")
    with progress_bar("scaling", err_console) as progress:
        result = api.scale(model, progress=progress, **o)
    if as_json:
        emit_json(result.to_dict())
    else:
        render.print_scale(console, result)
    if html_path:
        name, gpu = result.inputs.workload.model.name, result.inputs.hardware.gpu
        write_html(html_path, f"gpuscale scale: {name} on {gpu}", render.scale_sections(result))
