"""``gpuscale plan``: the best parallel plans for a model on N GPUs, and why the winner wins."""

from __future__ import annotations

import time

import click

from gpuscale.cli import _planner_render as render
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    inter_option,
    json_option,
    write_html,
)
from gpuscale.cli._planner_options import (
    build_inputs,
    common_options,
    progress_bar,
)
from gpuscale.planner.scale import curve_from_counts
from gpuscale.planner.search import OBJECTIVES, search
from gpuscale.planner.verdict import verdict


@click.command("plan")
@common_options
@click.option("--gpus", "num_gpus", type=int, required=True, help="GPUs available.")
@inter_option()
@click.option(
    "--objective",
    type=click.Choice(OBJECTIVES),
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
    inputs = build_inputs(
        model=model,
        gpu=gpu,
        inter=inter,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        gbs=gbs,
        seq=seq,
        tokens=tokens,
        price=price,
        precision=precision,
        finetune=finetune,
        framework=framework,
        profile_file=profile_file,
    )
    workload, hardware = inputs.workload, inputs.hardware
    hardware.cluster(num_gpus)
    start = time.perf_counter()
    with progress_bar("searching plans") as progress:
        result = search(
            workload,
            hardware,
            inputs.profile,
            num_gpus,
            objective=objective,
            top_k=top_k,
            progress=progress,
        )
    elapsed = time.perf_counter() - start
    curve = curve_from_counts(hardware.inter, result.counts)
    advice = verdict(curve, hardware.gpu, hardware.gpus_per_node) if curve else None
    fitting = sum(c.fitting for c in result.counts)

    if as_json:
        emit_json(
            {
                "command": "plan",
                "model": workload.model.name,
                "gpu": hardware.gpu,
                "num_gpus": num_gpus,
                "gpus_per_node": hardware.gpus_per_node,
                "inter": hardware.inter,
                "objective": objective,
                "seq": workload.training.seq_len,
                "global_batch": workload.global_batch,
                "tokens": workload.tokens,
                "price_per_gpu_hour": workload.price_per_gpu_hour,
                "precision": workload.training.precision,
                "finetune": workload.training.finetune,
                "profile": inputs.profile.name,
                "assumed": inputs.assumed,
                "memory_assumption": result.memory_assumption,
                "evaluated": result.evaluated,
                "fitting": fitting,
                "search_s": elapsed,
                "plans": [render.priced_row(p, workload) for p in result.ranked],
                "why": result.why,
                "verdict": render.verdict_document(advice) if advice else None,
            }
        )
    else:
        console.print(
            f"[bold]gpuscale plan[/bold] {workload.model.name} on {num_gpus} x "
            f"{hardware.gpu} ({hardware.gpus_per_node} per node, {hardware.inter}), "
            f"profile {inputs.profile.name}"
        )
        for why in inputs.assumed.values():
            console.print(f"  assumed: {why}")
        console.print(f"  assumed: {result.memory_assumption}", highlight=False)
        console.print(
            f"  searched {result.evaluated:,} plans at {len(result.counts)} GPU counts "
            f"in {elapsed:.2f} s; {fitting:,} fit"
        )
        console.print(
            render.plans_table(
                result.ranked,
                workload,
                f"Top plans (objective: {objective})",
                width=console.width,
            )
        )
        console.print(render.parts_table(result.winner))
        console.print(f"[bold]Why:[/bold] {result.why}")
        band = result.winner.estimate["uncertainty"]
        console.print(
            f"[bold]Error band:[/bold] ±{band['relative']:.0%} on throughput "
            f"(validation residuals of {band['regime']})",
            highlight=False,
        )
        for warning in band["warnings"]:
            console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
        if advice is not None:
            console.print(f"[bold]Verdict:[/bold] {advice.headline}")
    if html_path:
        from gpuscale.report.html import Section

        rows = [
            {
                "description": p.describe(),
                "GPUs": p.num_gpus,
                **render.cost_fields(p, workload),
                "tokens_per_s": p.tokens_per_s,
                "mfu": p.mfu,
                "memory_per_gpu_gib": p.memory_per_gpu_gib,
            }
            for p in result.ranked
        ]
        sections = [
            Section(
                title="Top plans",
                text=result.why,
                rows=rows,
                figures=render.plan_figures(result.ranked),
            )
        ]
        if advice is not None:
            sections.append(Section(title="Verdict", text=advice.headline))
        write_html(
            html_path,
            f"gpuscale plan: {workload.model.name} on {num_gpus} x {hardware.gpu}",
            sections,
        )
