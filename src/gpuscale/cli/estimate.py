"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    html_option,
    json_option,
    write_result_html,
)
from gpuscale.cli._run_options import run_arguments, run_options
from gpuscale.report.estimate import print_estimate


@click.command("estimate")
@run_options
@html_option
@json_option
def command(html_path: str | None, as_json: bool, **flags: Any) -> None:
    """Predict one training step of MODEL on a cluster under one parallel plan.

    MODEL is a catalog id (gpuscale catalog models) or a Hugging Face config.json.
    """
    check_writable(html_path, "--html")
    run = run_arguments(click.get_current_context(), flags)
    result = api.estimate(run.pop("model"), **run)
    write_result_html(
        html_path,
        f"gpuscale estimate: {result.model} on {result.gpus} x {result.gpu}",
        f"{result.tokens_per_s:,.0f} tokens/s ({result.tokens_per_s_per_gpu:,.0f} per GPU), "
        f"MFU {result.mfu:.1%}, {result.memory_per_gpu_gib:.1f} GiB per GPU; {result.bottleneck}",
        result,
    )
    if as_json:
        emit_json(result.to_dict())
        return
    print_estimate(console, result.to_dict(), result.parts_s)
