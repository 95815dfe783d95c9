"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

import click

from gpuscale import api, catalog
from gpuscale.cli._common import (
    FINITE,
    console,
    emit_json,
    inter_option,
    json_option,
    profile_options,
)
from gpuscale.report.estimate import print_estimate
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import FINETUNES, PRECISIONS


@click.command("estimate")
@click.argument("model")
@click.option("--gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus).")
@click.option("--gpus", type=int, default=None, help="GPUs in the job [default: tp*pp*dp*cp].")
@click.option("--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True)
@inter_option()
@click.option(
    "--nics-per-node",
    type=int,
    default=None,
    help="[default: one per GPU on RDMA fabrics, one per node on TCP Ethernet]",
)
@click.option(
    "--slowest-gpu",
    default=None,
    help="Mixed cluster: the slowest card in the job, which sets the pace of every step.",
)
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline stages.")
@click.option(
    "--dp", type=int, default=None, help="Data-parallel degree [default: gpus/(tp*pp*cp)]."
)
@click.option("--cp", type=int, default=1, show_default=True, help="Context-parallel degree.")
@click.option(
    "--vp", type=int, default=1, show_default=True, help="Virtual stages per GPU (interleaving)."
)
@click.option("--ep", type=int, default=1, show_default=True, help="Expert-parallel degree (MoE).")
@click.option("--mbs", type=int, default=1, show_default=True, help="Micro-batch, sequences.")
@click.option(
    "--gbs",
    type=int,
    default=None,
    help="Global batch, sequences [default: the model size's recipe batch, as plan assumes; "
    "printed].",
)
@click.option("--seq", type=int, default=4096, show_default=True, help="Sequence length.")
@click.option(
    "--recompute", type=click.Choice(RECOMPUTE_CHOICES), default="none", show_default=True
)
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=0,
    show_default=True,
    help="ZeRO stage (3 = FSDP full shard).",
)
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True)
@click.option(
    "--finetune",
    type=click.Choice(FINETUNES),
    default="full",
    show_default=True,
    help="Full training, or LoRA/QLoRA adapters on a frozen base.",
)
@click.option("--lora-rank", type=int, default=16, show_default=True)
@click.option("--offload-optimizer", is_flag=True, help="ZeRO-Offload: optimizer step on the CPU.")
@click.option("--no-sequence-parallel", is_flag=True, help="TP all-reduces instead of RS/AG.")
@click.option("--no-flash-attention", is_flag=True, help="Unfused attention (s x s scores in HBM).")
@profile_options
@click.option(
    "--storage-gbps",
    type=FINITE,
    default=0.0,
    help="Dataset read bandwidth per node, GB/s (0: data local and prefetched).",
)
@click.option(
    "--checkpoint-every", type=int, default=0, help="Checkpoint every N steps (0: never)."
)
@click.option(
    "--checkpoint-gbps",
    type=FINITE,
    default=10.0,
    show_default=True,
    help="Aggregate checkpoint write bandwidth, GB/s.",
)
@json_option
def command(
    model: str,
    gpu: str,
    gpus: int | None,
    gpus_per_node: int,
    inter: str,
    nics_per_node: int | None,
    slowest_gpu: str | None,
    tp: int,
    pp: int,
    dp: int | None,
    cp: int,
    vp: int,
    ep: int,
    mbs: int,
    gbs: int | None,
    seq: int,
    recompute: str,
    zero: int,
    precision: str,
    finetune: str,
    lora_rank: int,
    offload_optimizer: bool,
    no_sequence_parallel: bool,
    no_flash_attention: bool,
    framework: str,
    profile_file: str | None,
    storage_gbps: float,
    checkpoint_every: int,
    checkpoint_gbps: float,
    as_json: bool,
) -> None:
    """Predict one training step of MODEL on a cluster under one parallel plan.

    MODEL is a catalog id (gpuscale catalog models) or a Hugging Face config.json.
    """
    ctx = click.get_current_context()
    typed = ctx.get_parameter_source("lora_rank") is not click.core.ParameterSource.DEFAULT
    result = api.estimate(
        model,
        gpu=gpu,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        inter=inter,
        nics_per_node=nics_per_node,
        slowest_gpu=slowest_gpu,
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        ep=ep,
        mbs=mbs,
        gbs=gbs,
        seq=seq,
        recompute=recompute,
        zero=zero,
        precision=precision,
        finetune=finetune,
        lora_rank=lora_rank if typed else None,
        offload_optimizer=offload_optimizer,
        sequence_parallel=not no_sequence_parallel,
        flash_attention=not no_flash_attention,
        framework=framework,
        profile=profile_file,
        storage_gbps=storage_gbps,
        checkpoint_every=checkpoint_every,
        checkpoint_gbps=checkpoint_gbps,
    )
    if as_json:
        emit_json(result.to_dict())
        return
    print_estimate(console, result.to_dict(), result.parts_s)
