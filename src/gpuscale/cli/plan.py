"""``gpuscale plan``: the best parallel plans for a model on N GPUs, and why the winner wins."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.cli._common import check_writable, console, emit_json, err_console, write_html
from gpuscale.cli._options import PLANNER, flag, opt, options
from gpuscale.report import planner as render
from gpuscale.report.progress import progress_bar


@click.command("plan")
@options(
    PLANNER,
    flag("gpus", required=True, help="GPUs available."),
    "inter",
    opt(
        "--objective",
        click.Choice(api.OBJECTIVES),
        "throughput",
        "throughput: fastest on all N GPUs; time: fastest to finish on up to N; "
        "cost: fewest GPU-hours per token on up to N.",
    ),
    opt("--top", int, 5, "How many plans (distinct layouts) to show."),
    "json",
)
def command(model: str, html_path: str | None, as_json: bool, **o: Any) -> None:
    """Search every parallel plan of MODEL on --gpus GPUs and rank what fits."""
    check_writable(html_path, "--html")
    with progress_bar("searching plans", err_console) as progress:
        result = api.plan(model, progress=progress, **o)
    if as_json:
        emit_json(result.to_dict())
    else:
        render.print_plan(console, result)
    if html_path:
        name, gpu = result.inputs.workload.model.name, result.inputs.hardware.gpu
        title = f"gpuscale plan: {name} on {result.num_gpus} x {gpu}"
        write_html(html_path, title, render.plan_sections(result))
