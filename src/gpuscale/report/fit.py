"""``fit``: the memory table, the verdict lines, and the memory bar plot."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from gpuscale.specs import Device
from gpuscale.specs.units import GIB


class FitAnswer(Protocol):
    """What the renderers read of :class:`gpuscale.api.fitting.FitResult`."""

    @property
    def parts(self) -> dict[str, str]: ...
    @property
    def memory_bytes(self) -> Mapping[str, float]: ...
    @property
    def device(self) -> Device: ...
    @property
    def heading(self) -> str: ...
    @property
    def fits(self) -> bool: ...
    @property
    def verdict(self) -> str: ...
    @property
    def suggestion(self) -> str | None: ...
    @property
    def notes(self) -> tuple[str, ...]: ...
    @property
    def model(self) -> str: ...


def memory_table(parts: Mapping[str, str], memory: Mapping[str, float], capacity: float) -> Table:
    """GiB per GPU by part, the total, the card, and what sits in host memory."""
    table = Table()
    table.add_column("component")
    table.add_column("GiB per GPU", justify="right")
    table.add_column("share", justify="right")
    total = memory["total"]
    for key, label in parts.items():
        value = memory[key]
        if key == "overlap":
            if value <= 0:
                continue
            value = -value
        table.add_row(label, f"{value / GIB:,.2f}", f"{100 * value / total:.0f}%")
    table.add_section()
    table.add_row("total", f"{total / GIB:,.2f}", "100%", style="bold")
    table.add_row("device capacity", f"{capacity / GIB:,.2f}", "")
    host = memory.get("host", 0.0)
    if host > 0:
        table.add_row("in host memory (offloaded/paged)", f"{host / GIB:,.2f}", "")
    return table


def print_fit(console: Console, answer: FitAnswer) -> None:
    console.print(answer.heading, highlight=False)
    console.print(memory_table(answer.parts, answer.memory_bytes, answer.device.memory_bytes))
    style = "green" if answer.fits else "red"
    console.print(f"[bold {style}]{answer.verdict}[/]")
    if answer.suggestion:
        console.print(f"smallest set-up that fits: {answer.suggestion}")
    for note in answer.notes:
        console.print(f"[dim]{note}[/]")


def memory_figure(answer: FitAnswer) -> Any:
    """One stacked bar of GiB per GPU by part, against the card's capacity."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for key, label in answer.parts.items():
        value = answer.memory_bytes[key] / GIB
        if key == "overlap":
            value = -value
        if value != 0:
            fig.add_trace(go.Bar(x=["per GPU"], y=[value], name=label))
    fig.add_hline(y=answer.device.memory_gib, line_dash="dot", annotation_text=answer.device.id)
    fig.update_layout(
        barmode="relative", title=f"{answer.model}: memory per GPU", yaxis={"title": "GiB"}
    )
    return fig
