"""``gpuscale plan``: the best parallel plans for a model on N GPUs, and why the winner wins."""

from __future__ import annotations

import click

from gpuscale import api
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    err_console,
    inter_option,
    json_option,
    write_html,
)
from gpuscale.cli._planner_options import common_options
from gpuscale.report import planner as render
from gpuscale.report.progress import progress_bar


@click.command("plan")
@common_options
@click.option("--gpus", "num_gpus", type=int, required=True, help="GPUs available.")
@inter_option()
@click.option(
    "--objective",
    type=click.Choice(api.OBJECTIVES),
    default="throughput",
    show_default=True,
    help="throughput: fastest on all N GPUs; time: fastest to finish on up to N; "
    "cost: fewest GPU-hours per token on up to N.",
)
@click.option(
    "--top",
    "top_k",
    type=int,
    default=5,
    show_default=True,
    help="How many plans (distinct layouts) to show.",
)
@json_option
def command(
    model: str,
    gpu: str,
    gpus_per_node: int,
    nics_per_node: int | None,
    gbs: int | None,
    seq: int | None,
    tokens: str | None,
    price: float | None,
    precision: str,
    finetune: str,
    framework: str,
    profile_file: str | None,
    html_path: str | None,
    num_gpus: int,
    inter: str,
    objective: str,
    top_k: int,
    as_json: bool,
) -> None:
    """Search every parallel plan of MODEL on --gpus GPUs and rank what fits."""
    check_writable(html_path, "--html")
    with progress_bar("searching plans", err_console) as progress:
        result = api.plan(
            model,
            gpu=gpu,
            gpus=num_gpus,
            gpus_per_node=gpus_per_node,
            inter=inter,
            nics_per_node=nics_per_node,
            gbs=gbs,
            seq=seq,
            tokens=tokens,
            price=price,
            precision=precision,
            finetune=finetune,
            framework=framework,
            profile=profile_file,
            objective=objective,
            top=top_k,
            progress=progress,
        )
    workload, hardware = result.inputs.workload, result.inputs.hardware
    if as_json:
        emit_json(result.to_dict())
    else:
        render.print_plan(
            console,
            result.ranked,
            workload,
            header=f"[bold]gpuscale plan[/bold] {workload.model.name} on {num_gpus} x "
            f"{hardware.gpu} ({hardware.gpus_per_node} per node, {hardware.inter}), "
            f"profile {result.inputs.profile.name}",
            assumed=result.assumed,
            searched=f"  searched {result.search.evaluated:,} plans at "
            f"{len(result.search.counts)} GPU counts in {result.search_s:.2f} s; "
            f"{result.fitting:,} fit",
            objective=objective,
            why=result.why,
            headline=result.verdict.headline if result.verdict else None,
        )
    if html_path:
        write_html(
            html_path,
            f"gpuscale plan: {workload.model.name} on {num_gpus} x {hardware.gpu}",
            render.plan_sections(
                result.ranked,
                workload,
                result.why,
                result.verdict.headline if result.verdict else None,
            ),
        )
