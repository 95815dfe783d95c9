"""``gpuscale advise-comm``: which DDP communication hook pays off for this model and network,
and by how much; plainly "none" when the step is not bandwidth-bound."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.api.advise import DEFAULT_GPU
from gpuscale.cli._common import console, emit_json
from gpuscale.cli._options import MODEL, flag, opt, options
from gpuscale.report.advise import print_advice


@click.command("advise-comm")
@options(
    MODEL,
    flag("gpus", required=True, help="Data-parallel GPUs (one DDP replica each)."),
    "inter",
    flag("gpu", default=DEFAULT_GPU),
    "gpus_per_node",
    "nics_per_node",
    flag("mbs", help="Micro-batch per GPU, sequences."),
    flag(
        "gbs",
        help="Global batch, sequences [default: mbs x gpus]; more means gradient accumulation.",
    ),
    *("seq", "precision", "framework", "profile"),
    *("topk_ratio", "qsgd_levels", "qsgd_chunk"),
    opt(
        "--min-gain",
        click.FloatRange(0.0, 1.0, max_open=True),
        0.02,
        "Smallest step speed-up worth a hook (0.02 = 2%).",
    ),
    "json",
)
def command(model: str, as_json: bool, **o: Any) -> None:
    """Which DDP communication hook of gpuscale.runtime pays off for MODEL trained data-parallel
    on GPUS GPUs over the INTER fabric, and by how much.

    Prices PyTorch's default all-reduce, bf16 compression, hierarchical all-reduce (with and
    without bf16 across nodes), top-k and QSGD with the cost model, and says plainly when the
    step is not bandwidth-bound.
    """
    result = api.advise_comm(model, **o)
    if as_json:
        emit_json(result.to_dict())
        return
    print_advice(console, result.to_dict())
