"""``gpuscale doctor``: is this machine ready for distributed training, and if not, what next?"""

from __future__ import annotations

import click

from gpuscale.api.measure import doctor
from gpuscale.cli._common import console, emit_json, err_console
from gpuscale.cli._options import opt, options
from gpuscale.report.doctor import print_doctor


@click.command("doctor")
@options(
    opt("--no-bench", bool, help="Skip the short all-reduce and matmul benchmarks."),
    opt(
        "--timeout",
        float,
        60.0,
        "Seconds the all-reduce check may take before its ranks are stopped.",
    ),
    "json",
)
def command(no_bench: bool, timeout: float, as_json: bool) -> int:
    """Check torch/CUDA/NCCL, GPUs, NVLink/PCIe, NCCL_* and network settings, and run a short
    all-reduce and matmul. Exits 1 only when something will break training."""
    step = None if as_json else lambda text: err_console.print(f"[dim]running {text}...[/dim]")
    result = doctor(bench=not no_bench, timeout=timeout, on_step=step)
    if as_json:
        emit_json(result.to_dict())
    else:
        print_doctor(console, result.report)
    return result.exit_code
