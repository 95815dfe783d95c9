"""``gpuscale fit``: does a model fit, what is the memory made of, and what is the smallest
set-up that holds it."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.api.fitting import DEFAULT_GPU, OFFLOADS
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    html_option,
    json_option,
    write_result_html,
)
from gpuscale.cli._fit_checks import given_options, reject_misplaced
from gpuscale.cli._run_options import pipeline_split_options
from gpuscale.report.fit import print_fit
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import (
    FINETUNES,
    KV_DTYPES,
    LORA_TARGETS,
    LOSSES,
    OPTIMIZERS,
    PRECISIONS,
    WEIGHT_DTYPES,
)


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
@pipeline_split_options
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
@html_option
@json_option
def command(model: str, as_json: bool, html_path: str | None, **o: Any) -> None:
    """Does MODEL (catalog id or config.json) fit on --gpu? Memory breakdown per GPU, verdict,
    and the smallest set-up that fits."""
    check_writable(html_path, "--html")
    ctx = click.get_current_context()
    reject_misplaced(given_options(ctx), mode=o["mode"], finetune=o["finetune"])
    typed = ctx.get_parameter_source("lora_rank") is not click.core.ParameterSource.DEFAULT
    lora_rank = o.pop("lora_rank")
    result = api.fit(
        model,
        gpu=o.pop("gpu_id"),
        profile=o.pop("profile_file"),
        weights=o.pop("weight_dtype"),
        double_quant=not o.pop("no_double_quant"),
        flash_attention=not o.pop("no_flash"),
        lora_rank=lora_rank if typed else None,
        **o,
    )
    write_result_html(
        html_path, f"gpuscale fit: {model} on {result.device.id}", result.verdict, result
    )
    if as_json:
        emit_json(result.to_dict())
        return
    print_fit(console, result)
