"""``gpuscale trace analyze``: why is my job slow? Read profiler traces, name the bottleneck."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
from pathlib import Path
from typing import Any

import click
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from gpuscale.cli._common import check_writable, console, emit_json, err_console, json_option
from gpuscale.errors import InputError, closest
from gpuscale.measure.trace import Prediction, TraceReport, analyze, load_prediction
from gpuscale.measure.trace import prediction_from_document as _prediction_from_document
from gpuscale.measure.trace.breakdown import PARTS

PROGRESS_MIN_BYTES = 64 << 20
"""Show a progress bar when the traces add up to more than this."""

_PART_LABELS = {
    "compute": "compute",
    "optimizer": "optimizer",
    "exposed_comm": "exposed comm",
    "data_wait": "data wait",
    "idle": "idle",
}
_SHORT = {
    "compute": "compute",
    "optimizer": "optim",
    "exposed_comm": "exp.comm",
    "data_wait": "data",
    "idle": "idle",
}


@click.group("trace")
def command() -> None:
    """Analyze PyTorch profiler traces: where the step time goes and why."""


_INLINE_EXAMPLE = "model=llama3.1-8b,gpu=h100-sxm,gpus=8,tp=2,dp=4"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_NOT_INLINE = ("help", "json")
"""Estimate options that make no sense inside a plan (the plan's JSON is read back)."""


def _accepted(param: click.Parameter) -> str:
    """What an estimate option takes, in words, for the one-line error."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return ", ".join(map(str, kind.choices))
    if isinstance(kind, click.IntRange | click.FloatRange):
        noun = "an integer" if isinstance(kind, click.IntRange) else "a number"
        bounds = [
            f"{'>' if kind.min_open else '>='} {kind.min}" if kind.min is not None else "",
            f"{'<' if kind.max_open else '<='} {kind.max}" if kind.max is not None else "",
        ]
        return " ".join([noun, " and ".join(b for b in bounds if b)]).strip()
    if isinstance(kind, click.types.IntParamType):
        return "an integer"
    if isinstance(kind, click.types.FloatParamType):
        return "a number"
    if isinstance(kind, click.types.BoolParamType) or getattr(param, "is_flag", False):
        return "true or false"
    return kind.name


def _click_error(exc: click.ClickException, given: dict[str, str]) -> InputError:
    """A click error of the in-process ``estimate`` as one line about --predict-with."""
    param = getattr(exc, "param", None)
    opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    key = opts[0].lstrip("-") if opts else None
    if isinstance(exc, click.MissingParameter) and key is not None and param is not None:
        return InputError(
            f"--predict-with: the plan lacks {key}= (`gpuscale estimate` needs --{key}); "
            f"e.g. {_INLINE_EXAMPLE}"
        )
    if isinstance(exc, click.BadParameter) and key is not None and param is not None:
        reason = exc.message.rstrip(".")
        return InputError(
            f"--predict-with {key}={given.get(key, '')!r}: {reason}; accepted: {_accepted(param)}"
        )
    return InputError(f"--predict-with: {exc.format_message().rstrip('.')}; e.g. {_INLINE_EXAMPLE}")


def _inline_plan(text: str) -> Prediction:
    """``model=llama3.1-8b,gpu=h100-sxm,gpus=8,tp=2`` -> ``gpuscale estimate`` run in-process."""
    from gpuscale.cli.main import COMMAND_MODULES

    if "estimate" not in COMMAND_MODULES:
        raise InputError(
            "an inline plan needs `gpuscale estimate`, which this build lacks; "
            "pass the JSON file of `gpuscale estimate ... --json` instead"
        )
    estimate = importlib.import_module(COMMAND_MODULES["estimate"]).command
    flags = {
        opt.lstrip("-"): p
        for p in estimate.params
        for opt in getattr(p, "opts", [])
        if opt.startswith("--") and opt.lstrip("-") not in _NOT_INLINE
    }
    given: dict[str, str] = {}
    argv: list[str] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = (s.strip() for s in item.partition("="))
        key = key.replace("_", "-")
        if not sep or not value:
            raise InputError(
                f"--predict-with: '{item}' is not key=value; write e.g. {_INLINE_EXAMPLE}"
            )
        if key in given:
            raise InputError(
                f"--predict-with: {key} is given twice ({key}={given[key]} and {key}={value}); "
                "give each key once"
            )
        if key != "model" and key not in flags:
            near = closest(key, ["model", *flags])
            hint = (
                f"did you mean {', '.join(near)}?"
                if near
                else f"accepted: model, {', '.join(sorted(flags))}"
            )
            raise InputError(f"--predict-with: unknown key '{key}'; {hint}")
        given[key] = value
        if key == "model":
            continue
        if getattr(flags[key], "is_flag", False):
            truth = value.lower()
            if truth not in _TRUE + _FALSE:
                raise InputError(
                    f"--predict-with {key}={value!r} is not true or false; accepted: "
                    f"{key}=true or {key}=false"
                )
            if truth in _TRUE:
                argv.append(f"--{key}")
        else:
            argv += [f"--{key}", value]
    model = given.get("model")
    if model is None:
        raise InputError(
            "--predict-with: an inline plan needs model=NAME (catalog id or config.json path); "
            f"e.g. {_INLINE_EXAMPLE}"
        )
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            estimate.main(
                args=[model, *argv, "--json"], prog_name="gpuscale estimate", standalone_mode=False
            )
    except click.ClickException as exc:
        raise _click_error(exc, given) from None
    except InputError as exc:
        raise InputError(f"--predict-with: {exc}") from None
    return _prediction_from_document(
        json.loads(out.getvalue()), f"estimate {model} {' '.join(argv)}"
    )


def _prediction(plan: str | None) -> Prediction | None:
    if plan is None:
        return None
    path = Path(plan)
    if path.is_file():
        return load_prediction(path)
    if "=" in plan:
        return _inline_plan(plan)
    raise InputError(
        f"--predict-with: '{plan}' is neither a file nor key=value pairs; pass the "
        "JSON of `gpuscale estimate ... --json` or model=...,gpu=...,gpus=..."
    )


def _run(
    paths: tuple[str, ...], workers: int | None, prediction: Prediction | None, show_progress: bool
) -> TraceReport:
    if not show_progress:
        return analyze(paths, workers=workers, prediction=prediction)
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("reading traces", total=None)
        return analyze(
            paths,
            workers=workers,
            prediction=prediction,
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )


def _total_bytes(paths: tuple[str, ...]) -> int:
    total = 0
    for p in map(Path, paths):
        files = p.iterdir() if p.is_dir() else [p]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def _ms(x: float) -> str:
    return f"{1e3 * x:.2f}"


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _render(report: TraceReport) -> None:
    steps = max(len(r.breakdown.steps) for r in report.ranks)
    ranks = Table(
        title=f"gpuscale trace: {len(report.ranks)} rank(s) x {steps} steps, "
        f"{report.device.upper()} timeline, share of step time"
    )
    for name in ("rank", "steps", "step ms", *(_SHORT[p] for p in PARTS), "overlap"):
        ranks.add_column(name, justify="right", no_wrap=True)
    for r in report.ranks:
        b = r.breakdown
        ranks.add_row(
            str(r.rank),
            str(len(b.steps)),
            _ms(float(b.step_s.mean())),
            *(_pct(b.share(p)) for p in PARTS),
            _pct(b.overlap_ratio),
        )
    console.print(ranks)
    if report.collectives:
        source = next((r.collective_source for r in report.ranks if r.collective_source), "")
        coll = Table(title=f"collectives from {source}; time of the last-arriving rank")
        for name in ("op", "size", "calls", "mean ms", "p99 ms", "CV", "wait ms", "GB/s"):
            coll.add_column(name, justify="left" if name == "op" else "right", no_wrap=True)
        for c in report.collectives:
            bw = c.algbw_gb_per_s
            coll.add_row(
                c.op,
                _size(c.bytes),
                str(c.calls),
                _ms(c.mean_s),
                _ms(c.p99_s),
                _pct(c.cv),
                _ms(c.wait_mean_s),
                "" if bw is None else f"{bw:.2f}",
            )
        console.print(coll)
    if report.skew is not None:
        s = report.skew
        console.print(
            f"rank skew: rank {s.slowest_rank} has {_pct(s.excess)} more device work "
            f"per step than the others ({_ms(s.excess_s)} ms), slowest in "
            f"{_pct(s.slowest_share)} of {s.steps} steps"
        )
    if report.diagnoses:
        for d in report.diagnoses:
            console.print(f"[bold red]{d.title}[/]\n  why:  {d.evidence}\n  next: {d.next_step}")
    else:
        console.print(
            "[bold green]No bottleneck found[/]: exposed communication, data wait, "
            "optimizer and idle time, collective jitter and rank skew are all within their "
            "limits."
        )
    if report.prediction is not None:
        from gpuscale.measure.trace.predict import device_mismatch, step_ratio

        title = f"measured vs predicted ({report.prediction.source}), share of step time"
        if device_mismatch(report.device, report.prediction) is None:
            ratio = step_ratio(report.ranks, report.prediction)
            title += (
                f": the step takes {ratio:.2g}x the predicted "
                f"{1e3 * report.prediction.step_time_s:.4g} ms"
            )
        pred = Table(title=title)
        for name in ("part", "predicted", "measured", "verdict"):
            pred.add_column(name, justify="left" if name in ("part", "verdict") else "right")
        for f in report.findings:
            style = "red" if f.off else ""
            pred.add_row(
                f.part,
                _pct(f.predicted_share),
                _pct(f.measured_share),
                f"[{style}]{f.verdict}[/]" if style else f.verdict,
            )
        console.print(pred)


def _html(report: TraceReport, path: str) -> None:
    import plotly.graph_objects as go

    from gpuscale.report.html import Section, write_report

    doc = report.to_dict()
    labels = [f"rank {r.rank}" for r in report.ranks]
    shares = go.Figure(
        [
            go.Bar(
                name=_PART_LABELS[p],
                y=labels,
                orientation="h",
                x=[100 * r.breakdown.share(p) for r in report.ranks],
            )
            for p in PARTS
        ]
    )
    shares.update_layout(
        barmode="stack", title="Where the step time goes", xaxis_title="% of step time"
    )
    timelines = []
    for r in report.ranks[:8]:
        b = r.breakdown
        fig = go.Figure(
            [
                go.Bar(name=_PART_LABELS[p], x=[str(s) for s in b.steps], y=1e3 * b.part(p))
                for p in PARTS
            ]
        )
        fig.update_layout(
            barmode="stack",
            title=f"rank {r.rank}: per-step breakdown",
            xaxis_title="step",
            yaxis_title="ms",
        )
        timelines.append(fig)
    rank_rows = [
        {
            "rank": x["rank"],
            "steps": x["steps"],
            "step_ms": 1e3 * x["step_time_s"],
            **{f"{p}_%": 100 * x["share"][p] for p in PARTS},
            "overlap_%": None if x["overlap_ratio"] is None else 100 * x["overlap_ratio"],
        }
        for x in doc["ranks"]
    ]
    sections = [
        Section(
            title="Diagnosis",
            text=" ".join(
                f"{d.title}: {d.evidence}. Next: {d.next_step}." for d in report.diagnoses
            )
            or "No bottleneck found.",
            rows=[],
            figures=[],
        ),
        Section(title="Breakdown per rank", rows=rank_rows, figures=[shares]),
        Section(title="Per-step timeline", figures=timelines),
        Section(title="Collectives", rows=doc["collectives"]),
    ]
    if report.prediction is not None:
        sections.append(Section(title="Measured vs predicted", rows=doc["prediction"]["findings"]))
    try:
        write_report(path, "gpuscale trace analyze", sections)
    except OSError as exc:
        raise InputError(
            f"cannot write --html '{path}': {exc.strerror or exc}; accepted: a file path in a "
            "writable folder"
        ) from None


@command.command("analyze")
@click.argument("traces", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--predict-with",
    "plan",
    metavar="PLAN",
    help="Compare with a prediction: the JSON file of `gpuscale estimate ... --json`, "
    "or inline estimate options model=ID,gpu=ID,gpus=N,tp=T,... .",
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Also write an HTML report with the breakdown and per-step plots.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    help="Processes reading ranks in parallel (default: one per file, up to the CPUs).",
)
@json_option
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
    check_writable(html_path, "--html")
    prediction = _prediction(plan)
    report = _run(
        traces, workers, prediction, show_progress=_total_bytes(traces) >= PROGRESS_MIN_BYTES
    )
    if html_path:
        _html(report, html_path)
    for warning in report.warnings:
        err_console.print(
            f"[yellow]gpuscale: warning:[/yellow] {warning}", highlight=False, soft_wrap=True
        )
    if as_json:
        document: dict[str, Any] = report.to_dict()
        if html_path:
            document["html"] = html_path
        emit_json({"trace": document})
        return
    _render(report)
    if html_path:
        console.print(f"HTML report: {html_path}")
