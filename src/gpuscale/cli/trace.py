"""``gpuscale trace analyze``: why is my job slow? Read profiler traces, name the bottleneck.
Parsing and rendering only: the analysis is :func:`gpuscale.api.measure.analyze_trace`."""

from __future__ import annotations

import click

from gpuscale import files
from gpuscale.api.measure import analyze_trace
from gpuscale.cli._common import console, emit_json, err_console, warn
from gpuscale.cli._options import flag, opt, options
from gpuscale.report.progress import bytes_progress_bar
from gpuscale.report.trace import print_trace

PROGRESS_MIN_BYTES = 64 << 20
"""Show a progress bar when the traces add up to more than this."""


@click.group("trace")
def command() -> None:
    """Analyze PyTorch profiler traces: where the step time goes and why."""


@command.command("analyze")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True))
@options(
    opt(
        "--predict-with plan",
        metavar="PLAN",
        help="Compare with a prediction: the JSON file of `gpuscale estimate ... --json`, "
        "or inline estimate options model=ID,gpu=ID,gpus=N,tp=T,... .",
    ),
    flag(
        "html",
        type=click.Path(dir_okay=False),
        help="Also write an HTML report with the breakdown and per-step plots.",
    ),
    opt(
        "--workers",
        click.IntRange(min=1),
        help="Processes reading ranks in parallel (default: one per file, up to the CPUs).",
    ),
    "json",
)
def analyze_command(
    traces: tuple[str, ...],
    plan: str | None,
    html_path: str | None,
    workers: int | None,
    as_json: bool,
) -> None:
    """Break each rank's steps into compute, exposed communication, data wait and idle; measure
    collective jitter and rank skew; name the bottleneck and the next thing to try.

    TRACES are PyTorch profiler traces (.json or .json.gz), one per rank, or folders of them.
    """
    show = files.total_bytes(traces) >= PROGRESS_MIN_BYTES
    with bytes_progress_bar("reading traces", err_console, show=show) as progress:
        result = analyze_trace(
            traces, predict_with=plan, html=html_path, workers=workers, progress=progress
        )
    for warning in result.report.warnings:
        warn(warning)
    if as_json:
        emit_json(result.to_dict())
        return
    print_trace(console, result.report)
    if html_path:
        console.print(f"HTML report: {html_path}")
