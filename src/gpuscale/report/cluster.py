"""``cluster``: the policies side by side, their metrics as CSV, and static vs adaptive plans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuscale.report.csv_rows import rows_csv

_METRICS = (
    ("avg JCT (h)", "avg_jct_s", 1 / 3600),
    ("p95 JCT (h)", "p95_jct_s", 1 / 3600),
    ("avg queue (h)", "avg_queue_s", 1 / 3600),
    ("makespan (d)", "makespan_s", 1 / 86400),
    ("GPU util", "gpu_utilization", 1.0),
    ("throughput (GPUs)", "throughput_gpus", 1.0),
    ("speed vs packed", "mean_speed", 1.0),
    ("fragmentation", "fragmentation", 1.0),
    ("completed", "jobs_completed", 1.0),
    ("failed", "jobs_failed", 1.0),
)


def print_simulation(console: Console, doc: Mapping[str, Any]) -> None:
    """``ClusterSimulation.to_dict()``: metrics as rows, policies as columns (side by side,
    and narrow enough for a terminal)."""
    c, rows = doc["cluster"], doc["policies"]
    table = Table(
        title=f"{c['name']}: {c['gpus']} GPUs, {c['nodes']} nodes; "
        f"{int(doc['trace']['jobs'])} jobs, {rows[0]['order']} queue"
    )
    table.add_column("metric", no_wrap=True)
    for row in rows:
        table.add_column(row["policy"], justify="right", no_wrap=True)
    for label, key, scale in _METRICS:
        cells = []
        for row in rows:
            value = row[key]
            cells.append(str(value) if isinstance(value, int) else f"{float(value) * scale:.3g}")
        table.add_row(label, *cells)
    console.print(table)


def simulation_answer(doc: Mapping[str, Any]) -> str:
    """The simulation in one line (the HTML report's answer): the policy that finishes jobs
    soonest on average."""
    best = min(doc["policies"], key=lambda r: r["avg_jct_s"])
    return (
        f"lowest average job completion time: {best['policy']} "
        f"({best['avg_jct_s'] / 3600:,.2f} h over {best['jobs_submitted']:,} jobs)"
    )


def simulation_csv(doc: Mapping[str, Any]) -> str:
    """``ClusterSimulation.to_dict()``'s per-policy metrics as CSV, one row per policy."""
    return rows_csv(doc["policies"])


def print_adapt(console: Console, d: Mapping[str, Any]) -> None:
    """``AdaptResult.to_dict()``: the plan before the event, after it (static and adaptive) and
    the tokens each delivers over the horizon."""
    console.print(
        f"{d['model']}: {d['event']}"
        + (f" x{d['factor']:g}" if d["event"] != "node-loss" else "")
        + f" at {d['at_s'] / 3600:g} h; horizon {d['horizon_s'] / 3600:g} h; "
        f"restart costs {d['restart_s']:.0f} s"
    )
    table = Table()
    for col in ("", "plan after the event", "tokens over the horizon"):
        table.add_column(col)
    table.add_row("before", d["plan_before"], "")
    table.add_row("static", d["plan_static"], f"{d['tokens_static']:.4g}")
    table.add_row("adaptive", d["plan_adaptive"], f"{d['tokens_adaptive']:.4g}")
    console.print(table)
    if d["gain"] is not None:
        console.print(f"adaptive / static: x{d['gain']:.2f}")
