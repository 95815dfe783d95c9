"""``gpuscale calibrate run``: fit a profile to one measured training run (see
:mod:`gpuscale.planner.calibrate_run` for what is fitted and why)."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from gpuscale.api.calibrate_run import CalibrateRunResult, calibrate_run
from gpuscale.cli._common import (
    FINITE,
    check_writable,
    console,
    emit_json,
    err_console,
    json_option,
)
from gpuscale.cli._run_options import run_options


@click.command("calibrate run")
@run_options
@click.option(
    "--measured-tokens-per-s",
    type=FINITE,
    default=None,
    help="Measured throughput of the whole job, all GPUs together, tokens/s.",
)
@click.option(
    "--measured-step-s",
    type=FINITE,
    default=None,
    help="Measured seconds per optimizer step (instead of --measured-tokens-per-s).",
)
@click.option(
    "--measured-memory-gib",
    type=FINITE,
    default=None,
    help="Measured peak memory the busiest GPU held, GiB, as estimate's memory_per_gpu_gib "
    "counts it (nvidia-smi; allocator reserve plus CUDA context): fits the allocator reserve.",
)
@click.option(
    "--fit",
    "only",
    type=click.Choice(["compute", "inter", "intra"]),
    default=None,
    help="Fit this parameter [default: the one the step is most sensitive to].",
)
@click.option("--name", default=None, help="Name of the profile [default: from the run].")
@click.option("-o", "--output", default=None, help="Write the profile YAML here.")
@json_option
def command(
    model: str,
    no_sequence_parallel: bool,
    no_flash_attention: bool,
    profile_file: str | None,
    output: str | None,
    as_json: bool,
    **run: Any,
) -> None:
    """Fit a profile to one measured run of MODEL: give the run's estimate flags and its
    measured throughput (or step time), optionally its peak memory; use the profile with
    --profile in estimate, plan and scale."""
    if output:
        check_writable(output, "-o")
    # --lora-rank counts only when typed: estimate's rule (the rank goes with an adapter fine-tune)
    typed = (
        click.get_current_context().get_parameter_source("lora_rank")
        is not click.core.ParameterSource.DEFAULT
    )
    run["lora_rank"] = run["lora_rank"] if typed else None
    result = calibrate_run(
        model,
        sequence_parallel=not no_sequence_parallel,
        flash_attention=not no_flash_attention,
        profile=profile_file,
        output=output,
        **run,
    )
    for name, why in result.assumed.items():
        err_console.print(f"assumed: --{name.replace('_', '-')} {why}")
    for warning in result.warnings:
        err_console.print(f"[yellow]warning[/yellow] {warning}")
    if as_json:
        emit_json(result.to_dict())
        return
    _render(result)


def _render(r: CalibrateRunResult) -> None:
    per_gpu = 1.0 / r.gpus
    table = Table(
        title=f"{r.model} on {r.gpus} x {r.gpu}, {r.framework}: calibrated to one run",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("tokens/s per GPU", justify="right")
    table.add_column("memory GiB", justify="right")
    memory = f"{r.measured_memory_gib:.1f}" if r.measured_memory_gib is not None else "-"
    table.add_row(
        "model before",
        f"{r.predicted_tokens_per_s_before * per_gpu:,.0f}",
        f"{r.predicted_memory_gib_before:.1f}",
    )
    table.add_row("measured", f"{r.measured_tokens_per_s * per_gpu:,.0f}", memory)
    table.add_row(
        "model after",
        f"{r.predicted_tokens_per_s_after * per_gpu:,.0f}",
        f"{r.predicted_memory_gib_after:.1f}",
    )
    console.print(table)
    sensitivity = ", ".join(f"{k} {v:.2f}" for k, v in r.elasticity.items())
    console.print(f"sensitivity of the step (d ln step / d ln parameter): {sensitivity}")
    for line in r.summary:
        console.print(f"fitted      {line}")
    if r.written:
        console.print(
            f"wrote {r.written}: use it with --framework {r.framework} --profile {r.written}"
        )
    else:
        console.print("(add -o FILE to write the profile)")
