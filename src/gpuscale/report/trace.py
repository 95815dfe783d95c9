"""Rendering of ``gpuscale trace analyze``: the rich tables for the terminal, the plotly
figures and the HTML sections. Given a TraceReport, computes nothing."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from gpuscale.report.html import Section

PARTS = ("compute", "optimizer", "exposed_comm", "data_wait", "idle")
"""The parts of a step, in display order (gpuscale.measure.trace.breakdown.PARTS)."""
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


def print_trace(console: Console, report: Any) -> None:
    """Breakdown per rank, collectives, skew, diagnoses and the prediction, as rich tables."""
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
        title = f"measured vs predicted ({report.prediction.source}), share of step time"
        if report.step_ratio is not None:
            ratio = report.step_ratio
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


def trace_figures(report: Any) -> list[Any]:
    """The share of each part per rank, then each rank's per-step breakdown (first 8 ranks)."""
    return [_shares(report), *_timelines(report)]


def _shares(report: Any) -> Any:
    import plotly.graph_objects as go

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
    return shares


def _timelines(report: Any) -> list[Any]:
    import plotly.graph_objects as go

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
    return timelines


def trace_sections(report: Any) -> list[Section]:
    """The HTML report of a trace analysis."""
    doc = report.to_dict()
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
        Section(title="Breakdown per rank", rows=rank_rows, figures=[_shares(report)]),
        Section(title="Per-step timeline", figures=_timelines(report)),
        Section(title="Collectives", rows=doc["collectives"]),
    ]
    if report.prediction is not None:
        sections.append(Section(title="Measured vs predicted", rows=doc["prediction"]["findings"]))
    return sections
