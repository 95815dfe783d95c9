"""``gpuscale advise-comm``: which DDP communication hook pays off for this model and network,
and by how much; plainly "none" when the step is not bandwidth-bound."""

from __future__ import annotations

import click

from gpuscale import api, catalog
from gpuscale.api.advise import DEFAULT_GPU
from gpuscale.cli._common import console, emit_json, inter_option, json_option, profile_options
from gpuscale.report.advise import print_advice
from gpuscale.specs.training import PRECISIONS


@click.command("advise-comm")
@click.argument("model")
@click.option("--gpus", type=int, required=True, help="Data-parallel GPUs (one DDP replica each).")
@inter_option()
@click.option("--gpu", default=DEFAULT_GPU, show_default=True, help="Catalog GPU id.")
@click.option("--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True)
@click.option(
    "--nics-per-node",
    type=int,
    default=None,
    help="[default: one per GPU on RDMA fabrics, one per node on TCP Ethernet]",
)
@click.option(
    "--mbs", type=int, default=1, show_default=True, help="Micro-batch per GPU, sequences."
)
@click.option(
    "--gbs",
    type=int,
    default=None,
    help="Global batch, sequences [default: mbs x gpus]; more means gradient accumulation.",
)
@click.option("--seq", type=int, default=4096, show_default=True, help="Sequence length.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True)
@profile_options
@click.option(
    "--topk-ratio",
    type=float,
    default=0.01,
    show_default=True,
    help="Fraction of gradient entries top-k sends.",
)
@click.option("--qsgd-levels", type=int, default=127, show_default=True)
@click.option("--qsgd-chunk", type=int, default=512, show_default=True)
@click.option(
    "--min-gain",
    type=click.FloatRange(0.0, 1.0, max_open=True),
    default=0.02,
    show_default=True,
    help="Smallest step speed-up worth a hook (0.02 = 2%).",
)
@json_option
def command(
    model: str,
    gpus: int,
    inter: str,
    gpu: str,
    gpus_per_node: int,
    nics_per_node: int | None,
    mbs: int,
    gbs: int | None,
    seq: int,
    precision: str,
    framework: str,
    profile_file: str | None,
    topk_ratio: float,
    qsgd_levels: int,
    qsgd_chunk: int,
    min_gain: float,
    as_json: bool,
) -> None:
    """Which DDP communication hook of gpuscale.runtime pays off for MODEL trained data-parallel
    on GPUS GPUs over the INTER fabric, and by how much.

    Prices PyTorch's default all-reduce, bf16 compression, hierarchical all-reduce (with and
    without bf16 across nodes), top-k and QSGD with the cost model, and says plainly when the
    step is not bandwidth-bound.
    """
    result = api.advise_comm(
        model,
        gpus=gpus,
        inter=inter,
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        mbs=mbs,
        gbs=gbs,
        seq=seq,
        precision=precision,
        framework=framework,
        profile=profile_file,
        topk_ratio=topk_ratio,
        qsgd_levels=qsgd_levels,
        qsgd_chunk=qsgd_chunk,
        min_gain=min_gain,
    )
    if as_json:
        emit_json(result.to_dict())
        return
    print_advice(console, result.to_dict())
