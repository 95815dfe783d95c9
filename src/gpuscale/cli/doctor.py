"""``gpuscale doctor``: is this machine ready for distributed training, and if not, what next?"""

from __future__ import annotations

import click
from rich.table import Table

from gpuscale.api.measure import doctor
from gpuscale.cli._common import console, emit_json, err_console, json_option

_STYLE = {"ok": "green", "warn": "yellow", "fail": "red", "skip": "dim"}


@click.command("doctor")
@click.option("--no-bench", is_flag=True, help="Skip the short all-reduce and matmul benchmarks.")
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    help="Seconds the all-reduce check may take before its ranks are stopped.",
)
@json_option
def command(no_bench: bool, timeout: float, as_json: bool) -> int:
    """Check torch/CUDA/NCCL, GPUs, NVLink/PCIe, NCCL_* and network settings, and run a short
    all-reduce and matmul. Exits 1 only when something will break training."""

    def step(text: str) -> None:
        if not as_json:
            err_console.print(f"[dim]running {text}...[/dim]")

    result = doctor(bench=not no_bench, timeout=timeout, on_step=step)
    report, code = result.report, result.exit_code
    if as_json:
        emit_json(result.to_dict())
        return code
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
    return code
