"""``gpuscale scale``: the best plan at 1, 2, 4, ... N GPUs, break-even, and the verdict."""

from __future__ import annotations

import time

import click

from gpuscale import catalog
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
from gpuscale.errors import require
from gpuscale.planner.scale import compare_runs, scale_fabrics
from gpuscale.planner.verdict import verdict


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
    gpus_per_node: int | None,
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
    fabrics = [f.strip() for f in inter.split(",") if f.strip()]
    require(len(fabrics) > 0, "--inter needs at least one fabric id")
    require(len(set(fabrics)) == len(fabrics), f"--inter lists a fabric twice: {inter}")
    for fabric in fabrics:
        catalog.link(fabric)
    require(runs is None or runs >= 1, f"--runs must be >= 1, got {runs}")
    inputs = build_inputs(
        model=model,
        gpu=gpu,
        inter=fabrics[0],
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
    per_node = hardware.gpus_per_node  # --gpus-per-node, or the GPU's NVLink domain
    require(max_gpus >= 1, f"--max-gpus must be a positive integer, got {max_gpus}")
    require(
        max_gpus <= per_node or max_gpus % per_node == 0,
        f"--max-gpus ({max_gpus}) must be a multiple of --gpus-per-node ({per_node}) "
        "once it spans several nodes",
    )
    start = time.perf_counter()
    with progress_bar("scaling") as progress:
        curves = scale_fabrics(
            workload, hardware, inputs.profile, max_gpus, fabrics, progress=progress
        )
    elapsed = time.perf_counter() - start
    main = curves[0]
    verdicts = [verdict(c, hardware.gpu, hardware.gpus_per_node) for c in curves]
    advice = verdicts[0]
    runs_cmp = compare_runs(main, runs, workload.tokens) if runs else None
    base_note = (
        "efficiency relative to 1 GPU"
        if main.baseline_gpus == 1
        else f"does not fit one GPU: efficiency relative to {main.baseline_gpus} GPUs, the "
        "smallest count that fits"
    )

    if as_json:
        emit_json(
            {
                "command": "scale",
                "model": workload.model.name,
                "gpu": hardware.gpu,
                "max_gpus": max_gpus,
                "gpus_per_node": hardware.gpus_per_node,
                "seq": workload.training.seq_len,
                "global_batch": workload.global_batch,
                "tokens": workload.tokens,
                "price_per_gpu_hour": workload.price_per_gpu_hour,
                "precision": workload.training.precision,
                "finetune": workload.training.finetune,
                "profile": inputs.profile.name,
                "assumed": inputs.assumed,
                "evaluated": sum(c.evaluated for c in curves),
                "search_s": elapsed,
                "curves": [
                    render.curve_document(c, workload, v)
                    for c, v in zip(curves, verdicts, strict=True)
                ],
                "runs": render.runs_document(runs_cmp) if runs_cmp else None,
                "verdict": render.verdict_document(advice),
            }
        )
    else:
        console.print(
            f"[bold]gpuscale scale[/bold] {workload.model.name} on up to {max_gpus} x "
            f"{hardware.gpu} ({hardware.gpus_per_node} per node), profile "
            f"{inputs.profile.name}"
        )
        for why in inputs.assumed.values():
            console.print(f"  assumed: {why}")
        console.print(
            f"  searched {sum(c.evaluated for c in curves):,} plans in {elapsed:.2f} s; {base_note}"
        )
        for curve in curves:
            console.print(
                render.scale_table(
                    curve,
                    workload,
                    f"Best plan per GPU count over {curve.fabric}",
                    width=console.width,
                )
            )
        if len(curves) > 1:
            console.print(render.fabrics_table(curves, workload))
        if runs:
            over = f" over {main.fabric}" if len(curves) > 1 else ""
            console.print(
                f"[bold]Runs{over}:[/bold] "
                + (
                    runs_cmp.summary()
                    if runs_cmp
                    else f"no share of {max_gpus} GPUs split {runs} ways fits the model"
                )
            )
        for curve, v in zip(curves, verdicts, strict=True):
            where = f" over {curve.fabric}" if len(curves) > 1 else ""
            console.print(f"[bold]Verdict{where}:[/bold] {v.headline}")
    if html_path:
        from gpuscale.report.html import Section

        sections = [
            Section(title="Verdict", text=advice.headline),
            Section(
                title="Scaling",
                text=f"{base_note}; {render.break_even_words(main)}",
                rows=[render.point_summary(p, workload) for p in main.points],
                figures=render.scale_figures(curves, workload),
            ),
        ]
        if runs_cmp:
            sections.append(Section(title="Independent runs", text=runs_cmp.summary()))
        write_html(html_path, f"gpuscale scale: {workload.model.name} on {hardware.gpu}", sections)
