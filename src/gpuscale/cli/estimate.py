"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

import click

from gpuscale import api
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    html_option,
    json_option,
    write_result_html,
)
from gpuscale.cli._run_options import run_options
from gpuscale.report.estimate import print_estimate


@click.command("estimate")
@run_options
@html_option
@json_option
def command(
    model: str,
    gpu: str,
    gpus: int | None,
    gpus_per_node: int | None,
    inter: str,
    nics_per_node: int | None,
    slowest_gpu: str | None,
    tp: int,
    pp: int,
    dp: int | None,
    cp: int,
    vp: int,
    ep: int,
    first_stage_layers: int,
    last_stage_layers: int,
    embedding_as_layer: bool,
    loss_as_layer: bool,
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
    html_path: str | None,
    as_json: bool,
) -> None:
    """Predict one training step of MODEL on a cluster under one parallel plan.

    MODEL is a catalog id (gpuscale catalog models) or a Hugging Face config.json.
    """
    check_writable(html_path, "--html")
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
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        embedding_as_layer=embedding_as_layer,
        loss_as_layer=loss_as_layer,
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
    write_result_html(
        html_path,
        f"gpuscale estimate: {result.model} on {result.gpus} x {result.gpu}",
        f"{result.tokens_per_s:,.0f} tokens/s ({result.tokens_per_s_per_gpu:,.0f} per GPU), "
        f"MFU {result.mfu:.1%}, {result.memory_per_gpu_gib:.1f} GiB per GPU; {result.bottleneck}",
        result,
    )
    if as_json:
        emit_json(result.to_dict())
        return
    print_estimate(console, result.to_dict(), result.parts_s)
