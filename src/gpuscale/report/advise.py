"""``advise-comm``: the hook table, the verdict lines, and the step-per-hook plot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from gpuscale.planner.comm_hooks import HookAdvice


def ms(seconds: float) -> str:
    """Milliseconds with three significant figures or so: ``1,234``, ``56.7``, ``8.90``."""
    value = seconds * 1e3
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def print_advice(console: Console, doc: Mapping[str, Any]) -> None:
    """From the ``--json`` document of ``advise-comm``."""
    title = (
        f"{doc['model']}: DDP on {doc['gpus']} x {doc['gpu']}, {doc['nodes']} "
        f"node{'s' if doc['nodes'] != 1 else ''} of "
        f"{doc['gpus_per_node']} over {doc['inter']}\ngradients {doc['gradient_bytes'] / 1e9:.2f} GB "
        f"per step; {doc['backward_overlap_s'] * 1e3:.1f} ms of backward hides sync; times in ms"
    )
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("hook", "sync", "exposed", "codec", "step", "speed-up", "egress GB", "mean"):
        table.add_column(col, justify="left" if col == "hook" else "right", no_wrap=col == "hook")
    for r in doc["hooks"]:
        mark = "[bold]" if r["hook"] == doc["recommendation"] else ""
        end = "[/bold]" if mark else ""
        table.add_row(
            f"{mark}{r['hook']}{end}",
            ms(r["sync_s"]),
            ms(r["exposed_sync_s"]),
            ms(r["codec_s"]),
            ms(r["step_time_s"]),
            f"{mark}{r['speedup_vs_default']:.2f}x{end}",
            f"{r['node_egress_bytes'] / 1e9:.2f}",
            r["fidelity"],
        )
    console.print(table)
    if not doc["fits"]:
        console.print(
            f"[yellow]warning[/yellow] a DDP replica needs {doc['memory_per_gpu_gib']:.0f} GiB "
            f"per GPU, more than a {doc['gpu']} holds: shard it (gpuscale plan) before "
            "tuning DDP hooks"
        )
    console.print(f"verdict  {doc['verdict']}")


def hooks_figure(advice: HookAdvice, model: str) -> Any:
    """Step time per hook: what the step waits for in sync and codec on top of the rest."""
    import plotly.graph_objects as go

    names = list(advice.rows)
    rows = list(advice.rows.values())
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=[1e3 * (r.step_s - r.exposed_s - r.cost.codec_s) for r in rows],
            name="rest of the step",
        )
    )
    fig.add_trace(go.Bar(x=names, y=[1e3 * r.exposed_s for r in rows], name="exposed sync"))
    fig.add_trace(go.Bar(x=names, y=[1e3 * r.cost.codec_s for r in rows], name="encode/decode"))
    fig.update_layout(
        barmode="stack", title=f"{model}: step time per DDP hook", yaxis={"title": "ms"}
    )
    return fig
