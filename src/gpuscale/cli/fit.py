"""``gpuscale fit``: does a model fit, what is the memory made of, and what is the smallest
set-up that holds it."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, json_option
from gpuscale.cli._fit_checks import (
    check_shape,
    check_training,
    given_options,
    positive,
    reject_misplaced,
    within_context,
)
from gpuscale.costmodel.inference_memory import inference_memory
from gpuscale.costmodel.memory import training_memory
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_profile_for
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.fit import (
    MAX_GPUS,
    FitOption,
    cheaper_ways_to_fit,
    smallest_inference_setups,
    smallest_training_setups,
)
from gpuscale.specs import Device, ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CHOICES, Recompute
from gpuscale.specs.training import (
    ALL_LINEAR,
    FINETUNES,
    KV_DTYPES,
    LORA_TARGETS,
    LOSSES,
    OPTIMIZERS,
    PRECISIONS,
    WEIGHT_DTYPES,
    Inference,
    Training,
)

GIB = float(2**30)
DEFAULT_GPU = "h100-sxm"
OFFLOADS = ("none", "optimizer", "params")

TRAIN_ROWS = (
    ("weights", "weights"),
    ("gradients", "gradients"),
    ("optimizer", "optimizer states (+ fp32 master)"),
    ("activations", "activations"),
    ("overlap", "grads/activations overlap credit"),
    ("overhead", "framework (context, NCCL, allocator)"),
)
INFER_ROWS = (
    ("weights", "weights"),
    ("kv_cache", "KV cache"),
    ("activations", "activations"),
    ("overhead", "framework (context, NCCL, allocator)"),
)


def _targets(text: str) -> tuple[str, ...]:
    if text.strip().lower() in ("all", "all-linear"):
        return ALL_LINEAR
    names = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    for name in names:
        if name not in LORA_TARGETS:
            raise InputError(
                f"--lora-targets: unknown layer '{name}'; accepted: "
                f"{', '.join(LORA_TARGETS)} or 'all'"
            )
    return names


def _settings_line(model: ModelSpec, mode: str, device: Device, n: int, details: str) -> str:
    params = total_params(model) / 1e9
    return (
        f"{model.name} ({params:,.2f}B params) · {mode} · {details} · "
        f"{n}x {device.name} ({device.memory_gib:g} GiB)"
    )


def _verdict(total: float, capacity: float, n: int, device: Device) -> tuple[bool, str]:
    gib, cap = total / GIB, capacity / GIB
    where = "one" if n == 1 else f"each of {n}"
    if total <= capacity:
        return True, (
            f"fits: {gib:,.1f} GiB of the {cap:,.1f} GiB of {where} {device.name} "
            f"({cap - gib:,.1f} GiB to spare)"
        )
    return False, (
        f"does not fit: needs {gib:,.1f} GiB per GPU, {gib / cap:,.1f}x the "
        f"{cap:,.1f} GiB of {where} {device.name} (short by {gib - cap:,.1f} GiB)"
    )


def _short(device: Device) -> str:
    return device.name.removeprefix("NVIDIA ").removeprefix("AMD ")


def _suggestion(options: list[FitOption], device: Device, gpus_per_node: int) -> str:
    if not options:
        return f"no layout of up to {MAX_GPUS} GPUs holds it with these settings"
    return "needs " + "; or ".join(o.describe(gpus_per_node, _short(device)) for o in options)


def _table(
    rows: tuple[tuple[str, str], ...],
    values: dict[str, float],
    capacity: float,
    host: float,
) -> Table:
    table = Table()
    table.add_column("component")
    table.add_column("GiB per GPU", justify="right")
    table.add_column("share", justify="right")
    total = values["total"]
    for key, label in rows:
        value = values[key]
        if key == "overlap":
            if value == 0:
                continue
            if value < 0:
                label = "optimizer step / loading (activations freed)"
            value = -value
        table.add_row(label, f"{value / GIB:,.2f}", f"{100 * value / total:.0f}%")
    table.add_section()
    table.add_row(
        "total (device, as nvidia-smi shows)", f"{total / GIB:,.2f}", "100%", style="bold"
    )
    if "reserved" in values:
        # Which counter is which (costmodel/memory.py, TrainingMemory).
        table.add_row(
            "  reserved (torch max_memory_reserved)", f"{values['reserved'] / GIB:,.2f}", ""
        )
        table.add_row(
            "  allocated (torch max_memory_allocated)", f"{values['allocated'] / GIB:,.2f}", ""
        )
    table.add_row("device capacity", f"{capacity / GIB:,.2f}", "")
    if host > 0:
        table.add_row("in host memory (offloaded/paged)", f"{host / GIB:,.2f}", "")
    return table


def _report(
    as_json: bool,
    document: dict[str, Any],
    heading: str,
    table: Table,
    verdict: str,
    suggestion: str | None,
    notes: list[str],
) -> None:
    if as_json:
        emit_json(document)
        return
    console.print(heading, highlight=False)
    console.print(table)
    style = "green" if document["fits"] else "red"
    console.print(f"[bold {style}]{verdict}[/]")
    if suggestion:
        console.print(f"smallest set-up that fits: {suggestion}")
    for note in notes:
        console.print(f"[dim]{note}[/]")


@click.command("fit")
@click.argument("model")
@click.option("--gpu", "gpu_id", default=DEFAULT_GPU, show_default=True, help="Catalog GPU id.")
@click.option("--mode", type=click.Choice(["train", "infer"]), default="train", show_default=True)
@click.option(
    "--gpus-per-node",
    type=int,
    default=8,
    show_default=True,
    help="GPUs per node, for the smallest-set-up search.",
)
@click.option(
    "--profile",
    "profile_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Calibration profile YAML (from gpuscale calibrate) laid over the generic profile: "
    "its keys win, the rest comes from generic.",
)
@click.option(
    "--seq",
    type=int,
    default=None,
    help="Tokens per sequence (default: the model's context, at most 4096); in --mode infer "
    "the default --context.",
)
@click.option("--mbs", type=int, default=1, show_default=True, help="[train] Micro-batch size.")
@click.option(
    "--grad-accum",
    type=int,
    default=1,
    show_default=True,
    help="[train] Micro-batches per optimizer step.",
)
@click.option(
    "--precision",
    type=click.Choice(PRECISIONS),
    default="bf16",
    show_default=True,
    help="[train] Matmul precision.",
)
@click.option(
    "--pure-bf16",
    is_flag=True,
    help="[train] No fp32 master weights: weights, grads and optimizer states in 16 bits.",
)
@click.option(
    "--optimizer",
    type=click.Choice(OPTIMIZERS),
    default="adamw",
    show_default=True,
    help="[train]",
)
@click.option(
    "--finetune",
    type=click.Choice(FINETUNES),
    default="full",
    show_default=True,
    help="[train] Every weight, or adapters on a frozen 16-bit (lora) or 4-bit (qlora) base.",
)
@click.option(
    "--lora-rank", type=int, default=16, show_default=True, help="[lora, qlora] Adapter rank."
)
@click.option(
    "--lora-targets",
    default="all",
    show_default=True,
    help=f"[lora, qlora] Comma list of {', '.join(LORA_TARGETS)}, or 'all' (linear layers).",
)
@click.option("--no-double-quant", is_flag=True, help="[qlora] fp32 quantization constants.")
@click.option(
    "--paged-optimizer",
    is_flag=True,
    help="[train] bitsandbytes paged optimizer (states may spill to host).",
)
@click.option(
    "--offload",
    type=click.Choice(OFFLOADS),
    default="none",
    show_default=True,
    help="[train] CPU offload of optimizer states (ZeRO-Offload) or also parameters.",
)
@click.option(
    "--optimizer-in-backward",
    is_flag=True,
    help="[train] Step each parameter during backward; no full gradient buffer.",
)
@click.option("--activation-offload", is_flag=True, help="[train] Offload saved activations.")
@click.option(
    "--recompute",
    type=click.Choice(RECOMPUTE_CHOICES),
    default="none",
    show_default=True,
    help="[train] Activation recomputation.",
)
@click.option("--no-flash", is_flag=True, help="[train] Unfused attention (keeps s x s scores).")
@click.option(
    "--loss",
    type=click.Choice(LOSSES),
    default="standard",
    show_default=True,
    help="[train] Cross-entropy: fp32 logits (standard), 16-bit logits upcast per "
    "chunk (chunked: torchtune, LitGPT), or fused with the head (fused: Liger).",
)
@click.option("--dropout", is_flag=True, help="[train] Dropout active (1-byte masks).")
@click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel degree.")
@click.option("--pp", type=int, default=1, show_default=True, help="Pipeline stages.")
@click.option("--dp", type=int, default=1, show_default=True, help="[train] Data-parallel degree.")
@click.option("--cp", type=int, default=1, show_default=True, help="[train] Context parallel.")
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=0,
    show_default=True,
    help="[train] ZeRO stage over the data-parallel group (3 = FSDP).",
)
@click.option("--batch", type=int, default=1, show_default=True, help="[infer] Sequences.")
@click.option(
    "--context",
    type=int,
    default=None,
    help="[infer] Tokens per sequence in the KV cache (default: as --seq).",
)
@click.option(
    "--weights",
    "weight_dtype",
    type=click.Choice(WEIGHT_DTYPES),
    default="bf16",
    show_default=True,
    help="[infer] Weight storage.",
)
@click.option(
    "--kv-dtype",
    type=click.Choice(KV_DTYPES),
    default="bf16",
    show_default=True,
    help="[infer] KV-cache storage.",
)
@json_option
def command(
    model: str,
    gpu_id: str,
    mode: str,
    gpus_per_node: int,
    profile_file: str | None,
    seq: int | None,
    mbs: int,
    grad_accum: int,
    precision: str,
    pure_bf16: bool,
    optimizer: str,
    finetune: str,
    lora_rank: int,
    lora_targets: str,
    no_double_quant: bool,
    paged_optimizer: bool,
    offload: str,
    optimizer_in_backward: bool,
    activation_offload: bool,
    recompute: str,
    no_flash: bool,
    loss: str,
    dropout: bool,
    tp: int,
    pp: int,
    dp: int,
    cp: int,
    zero: int,
    batch: int,
    context: int | None,
    weight_dtype: str,
    kv_dtype: str,
    as_json: bool,
) -> None:
    """Does MODEL (catalog id or config.json) fit on --gpu? Memory breakdown per GPU, verdict,
    and the smallest set-up that fits."""
    reject_misplaced(given_options(click.get_current_context()), mode=mode, finetune=finetune)
    spec = catalog.model(model)
    device = catalog.gpu(gpu_id)
    profile = load_profile_for("generic", profile_file)
    seq_len = seq if seq is not None else int(defaults.seq_len(spec).value)
    check_shape(spec, seq_len=seq_len, tp=tp, pp=pp, gpus_per_node=gpus_per_node)
    if mode == "infer":
        context_len = context if context is not None else seq_len
        positive("--batch", batch)
        within_context(spec, "--context", context_len)
        serving: dict[str, Any] = {
            "weight_dtype": weight_dtype,
            "kv_dtype": kv_dtype,
            "batch": batch,
            "context_len": context_len,
        }
        _infer(
            spec,
            device,
            profile,
            gpus_per_node,
            tp,
            pp,
            Inference(**serving),
            as_json,
        )
        return
    check_training(
        seq_len=seq_len,
        mbs=mbs,
        grad_accum=grad_accum,
        dp=dp,
        cp=cp,
        zero=zero,
        lora_rank=lora_rank,
        precision=precision,
        pure_bf16=pure_bf16,
        optimizer_in_backward=optimizer_in_backward,
    )
    settings: dict[str, Any] = {
        "seq_len": seq_len,
        "precision": precision,
        "optimizer": optimizer,
        "master_weights": not pure_bf16,
        "finetune": finetune,
        "lora_rank": lora_rank,
        "lora_targets": _targets(lora_targets),
        "double_quant": not no_double_quant,
        "paged_optimizer": paged_optimizer,
        "offload_optimizer": offload != "none",
        "offload_params": offload == "params",
        "optimizer_in_backward": optimizer_in_backward,
        "activation_offload": activation_offload,
        "loss": loss,
        "flash_attention": not no_flash,
        "dropout": dropout,
    }
    training = Training(**settings)
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        zero=zero if dp * cp > 1 else 0,
        micro_batch=mbs,
        global_batch=mbs * dp * grad_accum,
        recompute=cast(Recompute, recompute),
    )
    memory = training_memory(spec, training, PlanBatch.from_plans([plan]), profile).row(0)
    fits, verdict = _verdict(memory["total"], device.memory_bytes, plan.num_gpus, device)
    options = smallest_training_setups(
        spec, training, device, plan, profile, gpus_per_node=gpus_per_node
    )
    method = {
        "full": "full fine-tune",
        "lora": f"LoRA r{lora_rank}",
        "qlora": f"QLoRA r{lora_rank}",
    }[finetune]
    weights = (
        "fp32"
        if precision == "fp32"
        else (f"pure {precision}" if pure_bf16 else f"{precision} + fp32 master")
    )
    details = (
        f"{method}, {weights}, {optimizer} · seq {seq_len} · mbs {mbs} · recompute {recompute}"
    )
    notes = []
    if not fits and plan.recompute != "full":
        recomputed = Plan(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            zero=plan.zero,
            micro_batch=mbs,
            global_batch=plan.global_batch,
            recompute="full",
        )
        full = training_memory(spec, training, PlanBatch.from_plans([recomputed]), profile).row(0)
        if full["total"] <= device.memory_bytes:
            notes.append(
                f"with --recompute full it fits on this set-up ({full['total'] / GIB:,.1f} GiB)"
            )
        else:
            cheaper = smallest_training_setups(
                spec, training, device, recomputed, profile, gpus_per_node=gpus_per_node, limit=1
            )
            if cheaper and (not options or cheaper[0].gpus < options[0].gpus):
                notes.append(
                    "with --recompute full: " + _suggestion(cheaper, device, gpus_per_node)
                )
    savers = cheaper_ways_to_fit(spec, training, plan, device, profile)
    document = {
        "model": spec.name,
        "params": total_params(spec),
        "gpu": device.id,
        "mode": "train",
        "training": {
            "seq_len": seq_len,
            "micro_batch": mbs,
            "grad_accum": grad_accum,
            "precision": precision,
            "master_weights": not pure_bf16,
            "optimizer": optimizer,
            "finetune": finetune,
            "lora_rank": lora_rank if finetune != "full" else None,
            "lora_targets": list(training.lora_targets) if finetune != "full" else None,
            "offload": offload,
            "paged_optimizer": paged_optimizer,
            "recompute": recompute,
        },
        "plan": {"gpus": plan.num_gpus, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "zero": plan.zero},
        "profile": profile.name,
        "breakdown_gib": {k: memory[k] / GIB for k, _ in TRAIN_ROWS},
        "allocated_gib": memory["allocated"] / GIB,
        "reserved_gib": memory["reserved"] / GIB,
        "host_gib": memory["host"] / GIB,
        "total_gib": memory["total"] / GIB,
        "capacity_gib": device.memory_gib,
        "fits": fits,
        "headroom_gib": (device.memory_bytes - memory["total"]) / GIB,
        "verdict": verdict,
        "smallest": [_option_json(o, gpus_per_node, device) for o in options],
        "savers": [dataclasses.asdict(s) for s in savers],
        "notes": notes,
    }
    notes += [
        f"fits {plan.num_gpus} GPU(s) with {s.change}: {s.memory_bytes / GIB:,.1f} GiB ({s.cost})"
        for s in savers
    ]
    table = _table(TRAIN_ROWS, memory, device.memory_bytes, memory["host"])
    _report(
        as_json,
        document,
        _settings_line(spec, "train", device, plan.num_gpus, details),
        table,
        verdict,
        None if fits and plan.num_gpus == 1 else _suggestion(options, device, gpus_per_node),
        notes,
    )


def _option_json(option: FitOption, gpus_per_node: int, device: Device) -> dict[str, Any]:
    return {
        "layout": option.family,
        "description": option.describe(gpus_per_node, _short(device)),
        "layout_text": option.layout(),
        "gpus": option.gpus,
        "tp": option.tp,
        "pp": option.pp,
        "dp": option.dp,
        "zero": option.zero,
        "memory_per_gpu_gib": option.memory_bytes / GIB,
    }


def _infer(
    spec: ModelSpec,
    device: Device,
    profile: Profile,
    gpus_per_node: int,
    tp: int,
    pp: int,
    inference: Inference,
    as_json: bool,
) -> None:
    memory = inference_memory(spec, inference, tp, pp, profile).row(0)
    n = tp * pp
    fits, verdict = _verdict(memory["total"], device.memory_bytes, n, device)
    options = smallest_inference_setups(
        spec, inference, device, profile, gpus_per_node=gpus_per_node
    )
    details = (
        f"{inference.weight_dtype} weights, {inference.kv_dtype} KV · batch "
        f"{inference.batch} · context {inference.context_len}"
    )
    document = {
        "model": spec.name,
        "params": total_params(spec),
        "gpu": device.id,
        "mode": "infer",
        "inference": {
            "weight_dtype": inference.weight_dtype,
            "kv_dtype": inference.kv_dtype,
            "batch": inference.batch,
            "context_len": inference.context_len,
        },
        "plan": {"gpus": n, "tp": tp, "pp": pp},
        "profile": profile.name,
        "breakdown_gib": {k: memory[k] / GIB for k, _ in INFER_ROWS},
        "total_gib": memory["total"] / GIB,
        "capacity_gib": device.memory_gib,
        "fits": fits,
        "headroom_gib": (device.memory_bytes - memory["total"]) / GIB,
        "verdict": verdict,
        "smallest": [_option_json(o, gpus_per_node, device) for o in options],
        "notes": [],
    }
    table = _table(INFER_ROWS, memory, device.memory_bytes, 0.0)
    _report(
        as_json,
        document,
        _settings_line(spec, "infer", device, n, details),
        table,
        verdict,
        None if fits and n == 1 else _suggestion(options, device, gpus_per_node),
        [],
    )
