"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, json_option
from gpuscale.cli._run_options import run_options
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.step import StepEstimate, estimate_plan
from gpuscale.costmodel.uncertainty import band_for
from gpuscale.errors import InputError, require
from gpuscale.specs import JobOptions, Plan, Training
from gpuscale.specs.plan import check_plan

TERMS = (
    "compute",
    "comm_tp",
    "comm_cp",
    "comm_ep",
    "comm_pp",
    "comm_dp",
    "comm_zero",
    "bubble",
    "optimizer",
    "data",
    "checkpoint",
    "other",
)
LABELS = {
    "compute": "compute (incl. recompute)",
    "comm_tp": "exposed comm: tensor parallel",
    "comm_cp": "exposed comm: context parallel",
    "comm_ep": "exposed comm: expert all-to-all",
    "comm_pp": "exposed comm: pipeline send/recv",
    "comm_dp": "exposed comm: gradient sync",
    "comm_zero": "exposed comm: ZeRO-2/3, FSDP sharding",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
    "data": "data loading (exposed)",
    "checkpoint": "checkpoint (amortized)",
    "other": "other (fixed per step)",
}


def _bottleneck(row: dict[str, Any]) -> str:
    b = row["breakdown"]
    step = row["step_time_s"]
    worst = max((t for t in TERMS if t != "compute"), key=lambda t: b[t])
    share = b[worst] / step
    if share < 0.1:
        return (
            f"compute-bound: {b['compute'] / step:.0%} of the step is math; the largest other "
            f"term is {LABELS[worst]} at {share:.0%}"
        )
    return f"largest overhead: {LABELS[worst]} at {share:.0%} of the step"


@click.command("estimate")
@run_options
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
    spec = catalog.model(model)
    ctx = click.get_current_context()
    if (
        finetune == "full"
        and ctx.get_parameter_source("lora_rank") is not click.core.ParameterSource.DEFAULT
    ):
        raise InputError(
            "--lora-rank applies to --finetune lora or qlora; add one, or leave it out"
        )
    for name, value in (
        ("--tp", tp),
        ("--pp", pp),
        ("--cp", cp),
        ("--vp", vp),
        ("--ep", ep),
        ("--mbs", mbs),
        ("--seq", seq),
    ):
        require(value >= 1, f"{name} must be >= 1, got {value}")
    if dp is None:
        if gpus is None:
            raise InputError("give --gpus or --dp")
        require(
            gpus % (tp * pp * cp) == 0,
            f"--gpus {gpus} is not divisible by tp x pp x cp = {tp * pp * cp}",
        )
        dp = gpus // (tp * pp * cp)
    num_gpus = gpus if gpus is not None else tp * pp * dp * cp
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        ep=ep,
        micro_batch=mbs,
        global_batch=gbs if gbs is not None else mbs * dp,
        recompute=recompute,  # type: ignore[arg-type]
        zero=zero,
        sequence_parallel=not no_sequence_parallel,
    )
    check_plan(spec, plan, num_gpus, seq)
    cluster = catalog.cluster(
        gpu, num_gpus, gpus_per_node=gpus_per_node, inter=inter, nics_per_node=nics_per_node
    )
    if slowest_gpu is not None:
        from dataclasses import replace

        cluster = replace(cluster, slowest_device=catalog.gpu(slowest_gpu))
    training = Training(
        seq_len=seq,
        precision=precision,  # type: ignore[arg-type]
        flash_attention=not no_flash_attention,
        finetune=finetune,  # type: ignore[arg-type]
        lora_rank=lora_rank,
        offload_optimizer=offload_optimizer,
    )
    job = JobOptions(
        storage_gb_per_s_per_node=storage_gbps,
        checkpoint_every_steps=checkpoint_every,
        checkpoint_write_gb_per_s=checkpoint_gbps,
    )
    profile = load_profile_for(framework, profile_file)
    est = estimate_plan(spec, cluster, training, plan, profile, job)
    row = est.row(0)
    band = band_for(spec, cluster, plan, framework).around(row["tokens_per_s"])
    mismatch = profile.mismatch(cluster.pace_device.id, cluster.pace_device.generation)
    if mismatch:
        band = band.warn(mismatch)
    if spec.num_layers % pp:
        band = band.warn(
            f"--pp {pp} splits {spec.num_layers} layers unevenly: the busiest stage has "
            f"{-(-spec.num_layers // pp)} and sets the pace"
        )
    if seq > spec.max_seq_len:
        band = band.warn(
            f"--seq {seq} exceeds {spec.name}'s maximum context of {spec.max_seq_len} "
            "(needs position-embedding extension)"
        )
    document = {
        "model": spec.name,
        "gpu": cluster.device.id,
        "gpus": num_gpus,
        "inter": cluster.inter.id,
        "framework": framework,
        "profile": profile.name,
        "plan": {
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "vp": vp,
            "ep": ep,
            "mbs": mbs,
            "gbs": plan.global_batch,
            "recompute": recompute,
            "zero": zero,
            "sequence_parallel": plan.sequence_parallel,
        },
        **row,
        "uncertainty": band.as_dict(),
        "bottleneck": _bottleneck(row),
    }
    if as_json:
        emit_json(document)
        return
    _render(document, est)


def _render(doc: dict[str, Any], est: StepEstimate) -> None:
    p = doc["plan"]
    title = (
        f"{doc['model']} on {doc['gpus']} x {doc['gpu']} ({doc['inter']}), "
        f"tp={p['tp']} pp={p['pp']} dp={p['dp']} cp={p['cp']} vp={p['vp']} mbs={p['mbs']} "
        f"gbs={p['gbs']} recompute={p['recompute']} zero={p['zero']}, {doc['framework']}"
    )
    table = Table(title=title, title_justify="left")
    table.add_column("term")
    table.add_column("seconds / step", justify="right")
    table.add_column("share", justify="right")
    step = doc["step_time_s"]
    for term in TERMS:
        value = doc["breakdown"][term]
        if value > 0 or term == "compute":
            table.add_row(LABELS[term], f"{value:.4f}", f"{value / step:.1%}")
    table.add_row("[bold]step[/bold]", f"[bold]{step:.4f}[/bold]", "100%")
    console.print(table)
    band = doc["uncertainty"]
    low, high = band["tokens_per_s_low"], band["tokens_per_s_high"]
    console.print(
        f"throughput  {doc['tokens_per_s']:,.0f} tokens/s ({doc['tokens_per_s_per_gpu']:,.0f} per GPU; "
        f"band {low:,.0f}-{high:,.0f}, ±{band['relative']:.0%} from {band['regime']})"
    )
    console.print(f"model FLOPs {doc['tflops_per_gpu']:.1f} TFLOP/s per GPU, MFU {doc['mfu']:.1%}")
    fits = "fits" if doc["fits"] else "[red]does NOT fit[/red]"
    console.print(f"memory      {doc['memory_per_gpu_gib']:.1f} GiB per GPU: {fits}")
    console.print(f"verdict     {doc['bottleneck']}")
    for warning in band["warnings"]:
        console.print(f"[yellow]warning[/yellow]     {warning}")
