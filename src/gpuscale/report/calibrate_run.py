"""``calibrate run``: the model before and after the fit against the measured run, the step's
sensitivities, and the fitted values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from gpuscale.report.estimate import run_title


class CalibratedRun(Protocol):
    """What the renderer reads of :class:`gpuscale.api.calibrate_run.CalibrateRunResult`."""

    @property
    def gpus(self) -> int: ...
    @property
    def framework(self) -> str: ...
    @property
    def measured_tokens_per_s(self) -> float: ...
    @property
    def measured_memory_gib(self) -> float | None: ...
    @property
    def predicted_tokens_per_s_before(self) -> float: ...
    @property
    def predicted_tokens_per_s_after(self) -> float: ...
    @property
    def predicted_memory_gib_before(self) -> float: ...
    @property
    def predicted_memory_gib_after(self) -> float: ...
    @property
    def elasticity(self) -> Mapping[str, float]: ...
    @property
    def summary(self) -> Sequence[str]: ...
    @property
    def explanation(self) -> Sequence[str]: ...
    @property
    def written(self) -> str | None: ...
    def to_dict(self) -> dict[str, Any]: ...


def print_calibrated_run(console: Console, r: CalibratedRun) -> None:
    per_gpu = 1.0 / r.gpus
    table = Table(
        title=f"{run_title(r.to_dict())}: calibrated to one run",
        title_justify="left",
    )
    table.add_column("")
    table.add_column("tokens/s per GPU", justify="right")
    table.add_column("memory GiB", justify="right")
    memory = f"{r.measured_memory_gib:.1f}" if r.measured_memory_gib is not None else "-"
    table.add_row(
        "model before",
        f"{r.predicted_tokens_per_s_before * per_gpu:,.0f}",
        f"{r.predicted_memory_gib_before:.1f}",
    )
    table.add_row("measured", f"{r.measured_tokens_per_s * per_gpu:,.0f}", memory)
    table.add_row(
        "model after",
        f"{r.predicted_tokens_per_s_after * per_gpu:,.0f}",
        f"{r.predicted_memory_gib_after:.1f}",
    )
    console.print(table)
    sensitivity = ", ".join(f"{k} {v:.2f}" for k, v in r.elasticity.items())
    console.print(f"sensitivity of the step (|d ln step / d ln quantity|): {sensitivity}")
    for line in r.summary:
        console.print(f"fitted      {line}")
    for line in r.explanation:
        console.print(f"why         {line}")
    if r.written:
        console.print(
            f"wrote {r.written}: use it with --framework {r.framework} --profile {r.written}"
        )
    else:
        console.print("(add -o FILE to write the profile)")


def print_notes(console: Console, assumed: Mapping[str, str], warnings: Sequence[str]) -> None:
    """What the fit assumed (a flag left out) and its warnings, on stderr in every mode."""
    for name, why in assumed.items():
        console.print(f"assumed: --{name.replace('_', '-')} {why}")
    for warning in warnings:
        console.print(f"[yellow]warning[/yellow] {warning}")
