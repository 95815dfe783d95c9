"""``gpuscale doctor``: is this machine ready for distributed training, and if not, what next?"""

from __future__ import annotations

import click

from gpuscale.api.measure import doctor
from gpuscale.cli._common import console, emit_json, err_console, json_option
from gpuscale.report.doctor import print_doctor


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
    print_doctor(console, report)
    return code
