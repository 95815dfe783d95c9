"""``estimate``: the step-time table, the summary lines, and the stacked step plot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuscale.costmodel.terms import PARTS
from gpuscale.specs.training import DEFAULT_RECOMPUTE_MODULES


def parts_table(parts_s: Mapping[str, float], step_s: float, title: str) -> Table:
    """One row per part of the step that takes time (compute always), then the step."""
    table = Table(title=title, title_justify="left")
    table.add_column("term (exposed time)")
    table.add_column("seconds / step", justify="right")
    table.add_column("share", justify="right")
    for key, label in PARTS.items():
        value = parts_s[key]
        if value > 0 or key == "compute":
            table.add_row(label, f"{value:.4f}", f"{value / step_s:.1%}")
    table.add_row("[bold]step[/bold]", f"[bold]{step_s:.4f}[/bold]", "100%")
    return table


def run_title(doc: Mapping[str, Any]) -> str:
    """The run of a ``--json`` document that echoes one (``estimate``, ``calibrate run``): the
    model, the cluster, the plan and the framework, in one title."""
    p = doc["plan"]
    recompute = p["recompute"]
    modules = doc.get("recompute_modules", list(DEFAULT_RECOMPUTE_MODULES))
    if recompute == "selective" and modules != list(DEFAULT_RECOMPUTE_MODULES):
        recompute += f"({','.join(modules) or 'nothing'})"
    loss = doc.get("loss", "standard")
    return (
        f"{doc['model']} on {doc['gpus']} x {doc['gpu']} ({doc['inter']}), "
        f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} vp={p['vp']} mbs={p['mbs']} "
        f"gbs={p['gbs']} recompute={recompute} zero={p['zero']}"
        f"{'' if loss == 'standard' else f' loss={loss}'}"
        f"{' bf16-grads' if doc.get('grad_reduce_in_bf16') else ''}"
        f"{f' offloaded-layers={n}' if (n := doc.get('activation_offload_layers')) else ''}"
        f"{' ep-overlap' if doc.get('ep_overlap') else ''}"
        f", {doc['framework']}"
    )


def print_estimate(console: Console, doc: Mapping[str, Any], parts_s: Mapping[str, float]) -> None:
    """The table and the lines under it, from the ``--json`` document of ``estimate``."""
    title = run_title(doc)
    for why in doc["assumed"].values():
        console.print(f"assumed     {why}", highlight=False)
    console.print(parts_table(parts_s, doc["step_time_s"], title))
    band = doc["uncertainty"]
    low, high = band["tokens_per_s_low"], band["tokens_per_s_high"]
    console.print(
        f"throughput  {doc['tokens_per_s']:,.0f} tokens/s ({doc['tokens_per_s_per_gpu']:,.0f} per "
        f"GPU; band {low:,.0f}-{high:,.0f}, ±{band['relative']:.0%} from {band['regime']})"
    )
    console.print(f"model FLOPs {doc['tflops_per_gpu']:.1f} TFLOP/s per GPU, MFU {doc['mfu']:.1%}")
    fits = "fits" if doc["fits"] else "[red]does NOT fit[/red]"
    console.print(f"memory      {doc['memory_per_gpu_gib']:.1f} GiB per GPU: {fits}")
    console.print(f"verdict     {doc['bottleneck']}")
    for warning in band["warnings"]:
        console.print(f"[yellow]warning[/yellow]     {warning}")


def answer(doc: Mapping[str, Any]) -> str:
    """The estimate in one line, from its ``--json`` document (the HTML report's answer)."""
    return (
        f"{doc['tokens_per_s']:,.0f} tokens/s ({doc['tokens_per_s_per_gpu']:,.0f} per GPU), "
        f"MFU {doc['mfu']:.1%}, {doc['memory_per_gpu_gib']:.1f} GiB per GPU; {doc['bottleneck']}"
    )


def step_figure(parts_s: Mapping[str, float], title: str) -> Any:
    """One horizontal bar, stacked by part of the step."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for key, label in PARTS.items():
        if parts_s[key] > 0:
            fig.add_trace(go.Bar(y=["step"], x=[parts_s[key]], name=label, orientation="h"))
    fig.update_layout(barmode="stack", title=title, xaxis={"title": "seconds"})
    return fig
