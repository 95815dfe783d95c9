"""``gpuscale scale``: the best plan at 1, 2, 4, ... N GPUs, break-even, and the verdict."""

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


@click.command("scale")
@common_options
@click.option("--max-gpus", type=int, required=True, help="Largest GPU count to consider.")
@inter_option("Fabric between nodes; a comma list compares fabrics side by side.")
@click.option(
    "--runs",
    type=int,
    default=None,
    help="Compare K independent runs side by side with K runs one after another.",
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
    max_gpus: int,
    inter: str,
    runs: int | None,
    as_json: bool,
) -> None:
    """Best plan of MODEL at 1, 2, 4, ... --max-gpus GPUs: throughput, per-GPU efficiency, time
    and cost to train, the break-even point, and one GPU / one node / a cluster."""
    check_writable(html_path, "--html")
    with progress_bar("scaling", err_console) as progress:
        result = api.scale(
            model,
            gpu=gpu,
            max_gpus=max_gpus,
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
            runs=runs,
            progress=progress,
        )
    workload, hardware = result.inputs.workload, result.inputs.hardware
    if as_json:
        emit_json(result.to_dict())
    else:
        render.print_scale(
            console,
            result.curves,
            result.verdicts,
            workload,
            header=f"[bold]gpuscale scale[/bold] {workload.model.name} on up to {max_gpus} x "
            f"{hardware.gpu} ({hardware.gpus_per_node} per node), profile "
            f"{result.inputs.profile.name}",
            assumed=result.assumed,
            searched=f"  searched {result.evaluated:,} plans in {result.search_s:.2f} s; "
            f"{result.baseline_note}",
            runs=runs,
            runs_cmp=result.runs,
            max_gpus=max_gpus,
        )
    if html_path:
        write_html(
            html_path,
            f"gpuscale scale: {workload.model.name} on {hardware.gpu}",
            render.scale_sections(
                result.curves, workload, result.verdict.headline, result.baseline_note, result.runs
            ),
        )
