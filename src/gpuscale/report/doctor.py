"""``doctor``: the checks as a table, the GPUs and environment found, the verdict and next steps."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from gpuscale.measure.doctor import Report

_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}


def print_doctor(console: Console, report: Report) -> None:
    table = Table(title="gpuscale doctor", title_justify="left")
    for col in ("check", "status", "finding"):
        table.add_column(col)
    for f in report.findings:
        style = _STYLE[f.status]
        table.add_row(f.area, f"[{style}]{f.status}[/{style}]", f.detail)
    console.print(table)
    gpus = report.facts.get("gpus") or []
    for g in gpus:
        console.print(
            f"GPU {g['index']}: {g['name']} {g['memory_gib']} GiB "
            f"({g.get('catalog_id') or 'not in catalog'})"
            + (f", {g['pcie']}" if "pcie" in g else "")
        )
    env = report.facts.get("environment") or {}
    console.print(
        "environment: "
        + (
            ", ".join(f"{k}={v}" for k, v in env.items())
            or "no NCCL_*/GLOO_*/network variables set"
        )
    )
    skipped = report.skipped()
    if skipped:
        console.print("could not check here: " + "; ".join(f.detail for f in skipped))
    console.print(f"verdict: [bold]{report.verdict}[/bold]")
    for i, fix in enumerate(report.next_steps(), 1):
        console.print(f"  {i}. {fix}")
