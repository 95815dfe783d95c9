"""Rendering planner results: JSON-ready rows, rich tables and plotly figures (no logic)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.measure import Measurement
from rich.table import Table

from gpuscale.planner.scale import RunsComparison, ScaleCurve, ScalePoint
from gpuscale.planner.search import PricedPlan, Workload
from gpuscale.planner.verdict import Verdict, superlinear_reason
from gpuscale.planner.words import PART_NAMES
from gpuscale.report.html import Section

DAY_S = 86400.0


def _days(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _big(value: float | None) -> str:
    if value is None:
        return "-"
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


@dataclass(frozen=True, kw_only=True, slots=True)
class _Column:
    header: str
    cells: list[str]
    justify: JustifyMethod = "right"
    min_width: int | None = None
    """Set for a text column that may wrap at spaces (narrower than its longest cell)."""
    drop: int | None = None
    """Order in which the column is hidden when the terminal is too narrow for the table, lowest
    first; ``None``: always shown. Hidden columns are named under the table; --json has all."""


_STYLES: tuple[dict[str, Any], ...] = (
    {},
    {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "collapse_padding": True},
    {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "padding": (0, 0)},
)
"""Rich's default box, then no edges and two spaces between columns, then one space."""

_MEASURE = Console(width=10_000)


def _build(columns: Sequence[_Column], title: str, notes: Sequence[str], style: int) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        caption="\n".join(notes) or None,
        caption_justify="left",
        **_STYLES[style],
    )
    for c in columns:
        table.add_column(
            c.header,
            justify=c.justify,
            min_width=c.min_width,
            no_wrap=c.min_width is None,
            overflow="fold",
        )
    for row in zip(*(c.cells for c in columns), strict=True):
        table.add_row(*row)
    return table


def _needed(columns: Sequence[_Column], style: int) -> int:
    """Terminal columns the table needs with every wrapping column at its ``min_width``."""
    narrowest = [
        c
        if c.min_width is None
        else _Column(header=c.header, cells=["x" * c.min_width] * len(c.cells))
        for c in columns
    ]
    table = _build(narrowest, "", (), style)
    return Measurement.get(_MEASURE, _MEASURE.options, table).maximum


def _fitted(
    columns: Sequence[_Column], width: int | None, title: str, notes: Sequence[str] = ()
) -> Table:
    """The table in full when it fits ``width`` terminal columns; else without box edges and
    with less space between columns; else also without the droppable columns, least useful
    first, until it fits. Numbers never become ``…``: at worst a cell folds onto a second line."""
    if width is None:
        return _build(columns, title, notes, style=0)
    for style in range(len(_STYLES)):
        if _needed(columns, style) <= width:
            return _build(columns, title, notes, style)
    tight = len(_STYLES) - 1
    kept = list(columns)
    hidden: list[str] = []
    droppable = sorted((c for c in columns if c.drop is not None), key=lambda c: c.drop or 0)
    while droppable and _needed(kept, tight) > width:
        column = droppable.pop(0)
        kept.remove(column)
        hidden.append(column.header)
    if hidden:
        notes = [
            *notes,
            f"hidden to fit {width} columns: {', '.join(hidden)} (widen the terminal or use --json)",
        ]
    return _build(kept, title, notes, tight)


def plan_fields(p: PricedPlan) -> dict[str, Any]:
    plan = p.plan
    return {
        "tp": plan.tp,
        "pp": plan.pp,
        "dp": plan.dp,
        "cp": plan.cp,
        "vp": plan.vp,
        "ep": plan.ep,
        "etp": plan.etp,
        "mbs": plan.micro_batch,
        "gbs": plan.global_batch,
        "zero": plan.zero,
        "recompute": plan.recompute,
        "sequence_parallel": plan.sequence_parallel,
    }


def cost_fields(p: PricedPlan, workload: Workload) -> dict[str, Any]:
    hours = p.gpu_hours(workload.tokens)
    price = workload.price_per_gpu_hour
    return {
        "time_to_train_days": p.time_to_train_s(workload.tokens) / DAY_S,
        "gpu_hours": hours,
        "cost_usd": None if price is None else hours * price,
    }


def priced_row(p: PricedPlan, workload: Workload) -> dict[str, Any]:
    """A plan as ``--json`` prints it: the cost model's row, the plan, time and cost to train."""
    return {
        "num_gpus": p.num_gpus,
        "description": p.describe(),
        "plan": plan_fields(p),
        **dict(p.estimate),
        **cost_fields(p, workload),
    }


_RECOMPUTE_SHORT = {"none": "-", "selective": "sel", "full": "full"}


def plans_table(
    ranked: Sequence[PricedPlan], workload: Workload, title: str, width: int | None = None
) -> Table:
    """One row per plan; degree columns that are 1 in every row (CP, EP, vp) are left out, ETP
    unless some plan splits its experts otherwise than TP, and on a terminal narrower than
    ``width`` the least useful columns go first (step time, which tok/s restates; the rank; the
    GPU count when all rows share it; ...)."""
    priced = workload.price_per_gpu_hour is not None
    optional = [
        name for name in ("cp", "ep", "vp") if any(getattr(p.plan, name) > 1 for p in ranked)
    ]
    if any(p.plan.etp != p.plan.tp for p in ranked):
        # Each expert's own tensor split, shown when some plan folds its experts over TP.
        optional.insert(optional.index("ep") + 1, "etp")
    costs = [cost_fields(p, workload) for p in ranked]
    one_count = len({p.num_gpus for p in ranked}) == 1
    columns = [
        _Column(header="#", cells=[str(i) for i in range(1, len(ranked) + 1)], drop=2),
        _Column(
            header="GPUs", cells=[str(p.num_gpus) for p in ranked], drop=3 if one_count else None
        ),
        _Column(header="TP", cells=[str(p.plan.tp) for p in ranked]),
        _Column(header="PP", cells=[str(p.plan.pp) for p in ranked]),
        *[
            _Column(
                header=n.upper() if n != "vp" else "vp",
                cells=[str(getattr(p.plan, n)) for p in ranked],
            )
            for n in optional
        ],
        _Column(header="DP", cells=[str(p.plan.dp) for p in ranked]),
        _Column(header="ZeRO", cells=[str(p.plan.zero) for p in ranked]),
        _Column(header="mbs", cells=[str(p.plan.micro_batch) for p in ranked]),
        _Column(header="recomp", cells=[_RECOMPUTE_SHORT[p.plan.recompute] for p in ranked]),
        _Column(header="GiB/GPU", cells=[f"{p.memory_per_gpu_gib:.1f}" for p in ranked], drop=6),
        _Column(header="step s", cells=[f"{p.step_time_s:.3g}" for p in ranked], drop=1),
        _Column(header="tok/s", cells=[_big(p.tokens_per_s) for p in ranked], drop=5),
        _Column(header="MFU", cells=[_pct(p.mfu) for p in ranked], drop=7),
        _Column(header="days", cells=[_days(c["time_to_train_days"]) for c in costs]),
        _Column(
            header="GPU-h", cells=[_big(c["gpu_hours"]) for c in costs], drop=4 if priced else None
        ),
        *([_Column(header="USD", cells=[_big(c["cost_usd"]) for c in costs])] if priced else []),
    ]
    return _fitted(columns, width, title)


def parts_table(p: PricedPlan) -> Table:
    table = Table(title="Where the winner's step time goes", title_justify="left")
    table.add_column("part")
    table.add_column("s/step", justify="right")
    table.add_column("share", justify="right")
    for key, seconds in p.parts_s.items():
        if seconds > 0:
            table.add_row(PART_NAMES[key], f"{seconds:.3g}", _pct(seconds / p.step_time_s))
    table.add_row("step", f"{p.step_time_s:.3g}", "")
    return table


def point_row(point: ScalePoint, workload: Workload) -> dict[str, Any]:
    best = point.best
    row: dict[str, Any] = {
        "num_gpus": point.num_gpus,
        "fits": best is not None,
        "evaluated": point.search.evaluated,
        "min_memory_per_gpu_gib": point.search.min_memory_gib,
    }
    if best is None:
        return row
    return {
        **row,
        "tokens_per_s": best.tokens_per_s,
        "speedup": point.speedup,
        "efficiency": point.efficiency,
        "marginal_efficiency": point.marginal_efficiency,
        "mfu": best.mfu,
        "memory_per_gpu_gib": best.memory_per_gpu_gib,
        "description": best.describe(),
        "plan": plan_fields(best),
        **cost_fields(best, workload),
    }


def point_summary(point: ScalePoint, workload: Workload) -> dict[str, Any]:
    """A flat row for the HTML report table."""
    best = point.best
    cost = cost_fields(best, workload) if best else {}
    return {
        "GPUs": point.num_gpus,
        "best plan": best.describe() if best else "does not fit",
        "tokens/s": best.tokens_per_s if best else None,
        "speed-up": point.speedup,
        "efficiency/GPU": point.efficiency,
        "marginal": point.marginal_efficiency,
        "days": cost.get("time_to_train_days"),
        "GPU-hours": cost.get("gpu_hours"),
        "USD": cost.get("cost_usd"),
    }


def curve_document(curve: ScaleCurve, workload: Workload, advice: Verdict) -> dict[str, Any]:
    return {
        "fabric": curve.fabric,
        "verdict": verdict_document(advice),
        "baseline_gpus": curve.baseline_gpus,
        "break_even_gpus": curve.break_even_gpus,
        "break_even_reached": curve.break_even_reached,
        "break_even_marginal_threshold": curve.marginal_threshold,
        "superlinear_reason": superlinear_reason(curve),
        "points": [point_row(p, workload) for p in curve.points],
    }


def break_even_words(curve: ScaleCurve) -> str:
    """``break-even at 16 GPUs``, or that none was reached within the counts searched."""
    if curve.break_even_reached:
        return f"break-even at {curve.break_even_gpus} GPUs"
    return f"no break-even up to {curve.points[-1].num_gpus} GPUs"


def scale_notes(curve: ScaleCurve) -> list[str]:
    """What the scale table's marks and odd-looking figures mean."""
    threshold = f"{100 * curve.marginal_threshold:.0f}% of a GPU's throughput"
    notes = [
        f"* break-even: past it each added GPU returns under {threshold}"
        if curve.break_even_reached
        else f"{break_even_words(curve)}: each added GPU still returns at least {threshold}, "
        "so more GPUs may still pay"
    ]
    superlinear = superlinear_reason(curve)
    if superlinear:
        notes.append(f"eff/GPU or marginal above 100% is superlinear scaling: {superlinear}")
    return notes


_PLAN_MIN_WIDTH = 26
"""The best-plan text wraps at spaces down to this width (two or three lines a row)."""


def scale_table(
    curve: ScaleCurve, workload: Workload, title: str, width: int | None = None
) -> Table:
    priced = workload.price_per_gpu_hour is not None
    cells: dict[str, list[str]] = {
        name: []
        for name in (
            "GPUs",
            "best plan",
            "tokens/s",
            "speed-up",
            "eff/GPU",
            "marginal",
            "MFU",
            "days",
            "GPU-h",
            "cost $",
        )
    }
    for point in curve.points:
        best = point.best
        if best is None:
            need = point.search.min_memory_gib
            why = "no valid plan" if need is None else f"does not fit (needs {need:.0f} GiB/GPU)"
            for name, column in cells.items():
                column.append(
                    str(point.num_gpus) if name == "GPUs" else why if name == "best plan" else "-"
                )
            continue
        cost = cost_fields(best, workload)
        mark = "*" if curve.break_even_reached and point.num_gpus == curve.break_even_gpus else ""
        row = {
            "GPUs": f"{point.num_gpus}{mark}",
            "best plan": best.describe(),
            "tokens/s": _big(best.tokens_per_s),
            "speed-up": f"{point.speedup:.2f}x" if point.speedup is not None else "-",
            "eff/GPU": _pct(point.efficiency),
            "marginal": _pct(point.marginal_efficiency),
            "MFU": _pct(best.mfu),
            "days": _days(cost["time_to_train_days"]),
            "GPU-h": _big(cost["gpu_hours"]),
            "cost $": _big(cost["cost_usd"]),
        }
        for name, value in row.items():
            cells[name].append(value)
    drops = {"speed-up": 1, "MFU": 2, "tokens/s": 3, "GPU-h": 4 if priced else None}
    columns = [
        _Column(
            header=name,
            cells=values,
            justify="left" if name == "best plan" else "right",
            min_width=_PLAN_MIN_WIDTH if name == "best plan" else None,
            drop=drops.get(name),
        )
        for name, values in cells.items()
        if priced or name != "cost $"
    ]
    return _fitted(columns, width, title, scale_notes(curve))


def fabrics_table(curves: Sequence[ScaleCurve], workload: Workload) -> Table:
    title = f"Days to train {_big(workload.tokens)} tokens, by fabric"
    # At least the title's width: rich wraps a table title to the table (a few narrow columns).
    table = Table(title=title, title_justify="left", min_width=len(title) + 2)
    table.add_column("GPUs", justify="right")
    for curve in curves:
        table.add_column(curve.fabric, justify="right")
    for i, point in enumerate(curves[0].points):
        cells = []
        for curve in curves:
            days = curve.points[i].time_to_train_s(workload.tokens)
            cells.append(_days(None if days is None else days / DAY_S))
        table.add_row(str(point.num_gpus), *cells)
    return table


def runs_document(cmp: RunsComparison) -> dict[str, Any]:
    return {
        "runs": cmp.runs,
        "total_gpus": cmp.total_gpus,
        "gpus_per_run": cmp.gpus_per_run,
        "side_by_side": {"days": cmp.parallel_wall_s / DAY_S, "gpu_hours": cmp.parallel_gpu_hours},
        "one_after_another": {
            "days": cmp.sequential_wall_s / DAY_S,
            "gpu_hours": cmp.sequential_gpu_hours,
        },
    }


def verdict_document(v: Verdict) -> dict[str, Any]:
    return {"choice": v.choice, "num_gpus": v.num_gpus, "reason": v.reason}


def scale_figures(curves: Sequence[ScaleCurve], workload: Workload) -> list[Any]:
    """Efficiency per GPU, throughput against ideal, and cost against time to train."""
    import plotly.graph_objects as go

    eff = go.Figure()
    tput = go.Figure()
    cost = go.Figure()
    price = workload.price_per_gpu_hour
    for curve in curves:
        pts = curve.fitting
        n = [p.num_gpus for p in pts]
        eff.add_trace(
            go.Scatter(
                x=n,
                y=[100 * (p.efficiency or 0) for p in pts],
                mode="lines+markers",
                name=curve.fabric,
            )
        )
        tput.add_trace(
            go.Scatter(
                x=n,
                y=[p.best.tokens_per_s if p.best else None for p in pts],
                mode="lines+markers",
                name=curve.fabric,
            )
        )
        days = [(p.time_to_train_s(workload.tokens) or 0) / DAY_S for p in pts]
        spend = [(p.gpu_hours(workload.tokens) or 0) * (price or 1.0) for p in pts]
        cost.add_trace(
            go.Scatter(
                x=days,
                y=spend,
                mode="lines+markers+text",
                name=curve.fabric,
                text=[str(g) for g in n],
                textposition="top center",
            )
        )
    base = curves[0].fitting[0]
    if base.best is not None:
        per_gpu = base.best.tokens_per_s / base.num_gpus
        n = [p.num_gpus for p in curves[0].fitting]
        tput.add_trace(
            go.Scatter(
                x=n,
                y=[per_gpu * g for g in n],
                mode="lines",
                name="ideal (linear)",
                line={"dash": "dot"},
            )
        )
    eff.update_layout(
        title=f"Per-GPU efficiency (relative to {curves[0].baseline_gpus} GPU)",
        xaxis={"title": "GPUs", "type": "log"},
        yaxis={"title": "%"},
    )
    tput.update_layout(
        title="Throughput",
        xaxis={"title": "GPUs", "type": "log"},
        yaxis={"title": "tokens/s", "type": "log"},
    )
    cost.update_layout(
        title=f"Cost against time to train {_big(workload.tokens)} tokens",
        xaxis={"title": "days", "type": "log"},
        yaxis={"title": "USD" if price else "GPU-hours"},
    )
    return [eff, tput, cost]


def plan_figures(ranked: Sequence[PricedPlan]) -> list[Any]:
    """Stacked step-time parts of the top plans."""
    import plotly.graph_objects as go

    fig = go.Figure()
    labels = [f"#{i} {p.describe()}" for i, p in enumerate(ranked, start=1)]
    for key, name in PART_NAMES.items():
        values = [p.parts_s.get(key, 0.0) for p in ranked]
        if any(v > 0 for v in values):
            fig.add_trace(go.Bar(y=labels, x=values, name=name, orientation="h"))
    fig.update_layout(
        barmode="stack",
        title="Step time by part",
        xaxis={"title": "seconds"},
        yaxis={"autorange": "reversed"},
    )
    return [fig]


def plan_sections(r: Any) -> list[Section]:
    """The HTML report of ``plan`` (``r`` a :class:`gpuscale.api.PlanResult`): the top plans with
    their step-time plot, the verdict."""
    workload = r.inputs.workload
    rows = [
        {
            "description": p.describe(),
            "GPUs": p.num_gpus,
            **cost_fields(p, workload),
            "tokens_per_s": p.tokens_per_s,
            "mfu": p.mfu,
            "memory_per_gpu_gib": p.memory_per_gpu_gib,
        }
        for p in r.ranked
    ]
    sections = [Section(title="Top plans", text=r.why, rows=rows, figures=plan_figures(r.ranked))]
    if r.verdict is not None:
        sections.append(Section(title="Verdict", text=r.verdict.headline))
    return sections


def scale_sections(r: Any) -> list[Section]:
    """The HTML report of ``scale`` (``r`` a :class:`gpuscale.api.ScaleResult`): verdict, the
    curve with its plots, independent runs."""
    workload, main = r.inputs.workload, r.curves[0]
    sections = [
        Section(title="Verdict", text=r.verdict.headline),
        Section(
            title="Scaling",
            text=f"{r.baseline_note}; {break_even_words(main)}",
            rows=[point_summary(p, workload) for p in main.points],
            figures=scale_figures(r.curves, workload),
        ),
    ]
    if r.runs:
        sections.append(Section(title="Independent runs", text=r.runs.summary()))
    return sections


def _assumed(console: Console, r: Any) -> None:
    for text in r.assumed.values():
        console.print(f"  assumed: {text}")


def print_plan(console: Console, r: Any) -> None:
    """``gpuscale plan`` on a terminal (``r`` a :class:`gpuscale.api.PlanResult`): the top
    plans, the winner's step, why, band, verdict."""
    workload, hardware, ranked = r.inputs.workload, r.inputs.hardware, r.ranked
    console.print(
        f"[bold]gpuscale plan[/bold] {workload.model.name} on {r.num_gpus} x {hardware.gpu} "
        f"({hardware.gpus_per_node} per node, {hardware.inter}), profile {r.inputs.profile.name}"
    )
    _assumed(console, r)
    if r.memory_assumption:
        console.print(f"  assumed: {r.memory_assumption}", highlight=False)
    console.print(
        f"  searched {r.search.evaluated:,} plans at {len(r.search.counts)} GPU counts in "
        f"{r.search_s:.2f} s; {r.fitting:,} fit"
    )
    title = f"Top plans (objective: {r.objective})"
    console.print(plans_table(ranked, workload, title, width=console.width))
    console.print(parts_table(ranked[0]))
    console.print(f"[bold]Why:[/bold] {r.why}")
    band = ranked[0].estimate["uncertainty"]
    console.print(
        f"[bold]Error band:[/bold] ±{band['relative']:.0%} on throughput "
        f"(validation residuals of {band['regime']})",
        highlight=False,
    )
    for warning in band["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    if r.verdict is not None:
        console.print(f"[bold]Verdict:[/bold] {r.verdict.headline}")


def print_scale(console: Console, r: Any) -> None:
    """``gpuscale scale`` on a terminal (``r`` a :class:`gpuscale.api.ScaleResult`): a table per
    fabric, fabrics side by side, runs, verdicts."""
    workload, hardware, curves = r.inputs.workload, r.inputs.hardware, r.curves
    console.print(
        f"[bold]gpuscale scale[/bold] {workload.model.name} on up to {r.max_gpus} x "
        f"{hardware.gpu} ({hardware.gpus_per_node} per node), profile {r.inputs.profile.name}"
    )
    _assumed(console, r)
    console.print(f"  searched {r.evaluated:,} plans in {r.search_s:.2f} s; {r.baseline_note}")
    for curve in curves:
        title = f"Best plan per GPU count over {curve.fabric}"
        console.print(scale_table(curve, workload, title, width=console.width))
    if len(curves) > 1:
        console.print(fabrics_table(curves, workload))
    if r.runs_requested:
        over = f" over {curves[0].fabric}" if len(curves) > 1 else ""
        console.print(
            f"[bold]Runs{over}:[/bold] "
            + (
                r.runs.summary()
                if r.runs
                else f"no share of {r.max_gpus} GPUs split {r.runs_requested} ways fits the model"
            )
        )
    for curve, v in zip(curves, r.verdicts, strict=True):
        where = f" over {curve.fabric}" if len(curves) > 1 else ""
        console.print(f"[bold]Verdict{where}:[/bold] {v.headline}")
