"""Options that ``plan`` and ``scale`` share (parsing only; the planner turns them into inputs
in :mod:`gpuscale.planner.inputs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuscale import catalog
from gpuscale.cli._common import profile_options
from gpuscale.specs.training import FINETUNES, PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])


def common_options(func: F) -> F:
    """``MODEL --gpu`` and everything that shapes the job, for both planner commands."""
    options = [
        click.argument("model"),
        click.option("--gpu", "gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus)."),
        click.option(
            "--gpus-per-node",
            type=int,
            default=catalog.DEFAULT_GPUS_PER_NODE,
            show_default=True,
            help="GPUs in one NVLink/PCIe node.",
        ),
        click.option(
            "--nics-per-node",
            type=int,
            default=None,
            help="Network ports per node [default: one per GPU, rail-optimized, on RDMA fabrics; one per node on TCP Ethernet].",
        ),
        click.option(
            "--gbs",
            type=int,
            default=None,
            help="Global batch in sequences [default: the model size's recipe, printed].",
        ),
        click.option(
            "--seq",
            type=int,
            default=None,
            help="Sequence length [default: 4096 or the model's maximum if shorter].",
        ),
        click.option(
            "--tokens",
            default=None,
            help="Tokens to train, e.g. 15T [default: 20 per parameter, Chinchilla].",
        ),
        click.option(
            "--price",
            type=float,
            default=None,
            help="USD per GPU-hour; without it cost is in GPU-hours.",
        ),
        click.option(
            "--precision",
            type=click.Choice(PRECISIONS),
            default="bf16",
            show_default=True,
            help="Matmul precision (fp8: linear layers only).",
        ),
        click.option(
            "--finetune",
            type=click.Choice(FINETUNES),
            default="full",
            show_default=True,
            help="Train every weight, or LoRA / QLoRA adapters on a frozen base.",
        ),
        profile_options,
        click.option(
            "--html",
            "html_path",
            default=None,
            type=click.Path(dir_okay=False),
            help="Also write an HTML report with plots to this file.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
