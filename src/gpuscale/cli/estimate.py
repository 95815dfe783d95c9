"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import (
    FINITE,
    console,
    emit_json,
    inter_option,
    json_option,
    profile_options,
)
from gpuscale.cli._pipeline import pipeline_split_options
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.step import StepEstimate, estimate_plan
from gpuscale.costmodel.uncertainty import band_for
from gpuscale.errors import InputError, require
from gpuscale.specs import JobOptions, ModelSpec, Plan, Training
from gpuscale.specs.plan import RECOMPUTE_CHOICES, pipeline_layout_error
from gpuscale.specs.training import FINETUNES, PRECISIONS

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


def _check_plan(model: ModelSpec, plan: Plan, num_gpus: int, seq: int) -> None:
    require(
        plan.num_gpus == num_gpus,
        f"tp x pp x dp x cp = {plan.tp} x {plan.pp} x {plan.dp} x {plan.cp} = {plan.num_gpus} "
        f"but --gpus is {num_gpus}",
    )
    require(
        model.num_heads % plan.tp == 0,
        f"--tp {plan.tp} does not divide the {model.num_heads} attention heads of {model.name}",
    )
    require(
        model.num_kv_heads % plan.tp == 0 or plan.tp % model.num_kv_heads == 0,
        f"--tp {plan.tp} and the {model.num_kv_heads} KV heads of {model.name} do not divide "
        "each other",
    )
    require(
        plan.pp <= model.num_layers,
        f"--pp {plan.pp} exceeds the {model.num_layers} layers of {model.name}",
    )
    layout = pipeline_layout_error(model.num_layers, plan)
    require(layout is None, str(layout))
    require(seq % plan.cp == 0, f"--seq {seq} is not divisible by --cp {plan.cp}")
    require(
        plan.vp == 1 or plan.num_microbatches % plan.pp == 0,
        f"--vp {plan.vp} needs the micro-batches per step (gbs/(mbs*dp) = "
        f"{plan.num_microbatches}) to be a multiple of --pp {plan.pp} (interleaved 1F1B)",
    )
    require(
        plan.ep == 1 or (model.is_moe and model.num_experts % plan.ep == 0),
        f"--ep {plan.ep} needs a mixture-of-experts model whose expert count it divides",
    )
    require(
        plan.ep == 1 or (plan.dp * plan.cp) % plan.ep == 0,
        f"--ep {plan.ep} must divide dp x cp = {plan.dp * plan.cp}",
    )


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
@click.argument("model")
@click.option("--gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus).")
@click.option("--gpus", type=int, default=None, help="GPUs in the job [default: tp*pp*dp*cp].")
@click.option(
    "--gpus-per-node",
    type=int,
    default=None,
    help="GPUs in one NVLink domain [default: the GPU's, 8; 72 on GB200/GB300 NVL72].",
)
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
@pipeline_split_options
@click.option("--mbs", type=int, default=1, show_default=True, help="Micro-batch, sequences.")
@click.option("--gbs", type=int, default=None, help="Global batch, sequences [default: mbs*dp].")
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
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        embedding_in_split=embedding_as_layer,
        loss_in_split=loss_as_layer,
    )
    _check_plan(spec, plan, num_gpus, seq)
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
    if pp > 1 and (spec.num_layers % (pp * vp) or first_stage_layers or last_stage_layers):
        band = band.warn(
            f"--pp {pp} splits {spec.num_layers} layers unevenly: the slowest stage has "
            f"{int(est.layers_per_stage[0])} and sets the pace"
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
