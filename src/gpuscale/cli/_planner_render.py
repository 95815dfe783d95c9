"""Rendering planner results: JSON-ready rows, rich tables and plotly figures (no logic)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from gpuscale.planner.scale import RunsComparison, ScaleCurve, ScalePoint
from gpuscale.planner.search import PricedPlan, Workload
from gpuscale.planner.verdict import Verdict
from gpuscale.planner.words import PART_NAMES

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


def plan_fields(p: PricedPlan) -> dict[str, Any]:
    plan = p.plan
    return {
        "tp": plan.tp,
        "pp": plan.pp,
        "dp": plan.dp,
        "cp": plan.cp,
        "vp": plan.vp,
        "ep": plan.ep,
        "micro_batch": plan.micro_batch,
        "global_batch": plan.global_batch,
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


def plans_table(ranked: Sequence[PricedPlan], workload: Workload, title: str) -> Table:
    """One row per plan; degree columns that are 1 in every row (CP, EP, vp) are left out."""
    priced = workload.price_per_gpu_hour is not None
    optional = [
        name for name in ("cp", "ep", "vp") if any(getattr(p.plan, name) > 1 for p in ranked)
    ]
    table = Table(title=title, title_justify="left")
    columns = [
        "#",
        "GPUs",
        "TP",
        "PP",
        *[n.upper() if n != "vp" else "vp" for n in optional],
        "DP",
        "ZeRO",
        "mbs",
        "recomp",
        "GiB/GPU",
        "step s",
        "tok/s",
        "MFU",
        "days",
        "GPU-h",
        *(["USD"] if priced else []),
    ]
    for name in columns:
        table.add_column(name, justify="right")
    for rank, p in enumerate(ranked, start=1):
        plan = p.plan
        cost = cost_fields(p, workload)
        row = [
            str(rank),
            str(p.num_gpus),
            str(plan.tp),
            str(plan.pp),
            *[str(getattr(plan, n)) for n in optional],
            str(plan.dp),
            str(plan.zero),
            str(plan.micro_batch),
            _RECOMPUTE_SHORT[plan.recompute],
            f"{p.memory_per_gpu_gib:.1f}",
            f"{p.step_time_s:.3g}",
            _big(p.tokens_per_s),
            _pct(p.mfu),
            _days(cost["time_to_train_days"]),
            _big(cost["gpu_hours"]),
        ]
        if priced:
            row.append(_big(cost["cost_usd"]))
        table.add_row(*row)
    return table


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
        "break_even_marginal_threshold": curve.marginal_threshold,
        "points": [point_row(p, workload) for p in curve.points],
    }


def scale_table(curve: ScaleCurve, workload: Workload, title: str) -> Table:
    priced = workload.price_per_gpu_hour is not None
    table = Table(
        title=title,
        title_justify="left",
        caption_justify="left",
        caption=f"* break-even: past it each added GPU returns under "
        f"{100 * curve.marginal_threshold:.0f}% of a GPU's throughput",
    )
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
    ):
        table.add_column(name, justify="left" if name == "best plan" else "right")
    if priced:
        table.add_column("cost $", justify="right")
    for point in curve.points:
        best = point.best
        if best is None:
            need = point.search.min_memory_gib
            why = "no valid plan" if need is None else f"does not fit (needs {need:.0f} GiB/GPU)"
            table.add_row(str(point.num_gpus), why, *["-"] * (len(table.columns) - 2))
            continue
        cost = cost_fields(best, workload)
        mark = "*" if point.num_gpus == curve.break_even_gpus else ""
        row = [
            f"{point.num_gpus}{mark}",
            best.describe(),
            _big(best.tokens_per_s),
            f"{point.speedup:.2f}x" if point.speedup is not None else "-",
            _pct(point.efficiency),
            _pct(point.marginal_efficiency),
            _pct(best.mfu),
            _days(cost["time_to_train_days"]),
            _big(cost["gpu_hours"]),
        ]
        if priced:
            row.append(_big(cost["cost_usd"]))
        table.add_row(*row)
    return table


def fabrics_table(curves: Sequence[ScaleCurve], workload: Workload) -> Table:
    table = Table(
        title=f"Days to train {_big(workload.tokens)} tokens, by fabric", title_justify="left"
    )
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
