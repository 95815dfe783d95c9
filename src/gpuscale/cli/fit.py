"""``gpuscale fit``: does a model fit, what is the memory made of, and what is the smallest
set-up that holds it."""

from __future__ import annotations

import re
from typing import Any

import click

from gpuscale import api
from gpuscale.api.fitting import DEFAULT_GPU, OFFLOADS
from gpuscale.cli._common import (
    check_writable,
    console,
    emit_json,
    typed_options,
    write_result_html,
)
from gpuscale.cli._options import FLAGS, MODEL, PIPELINE_SPLIT, Decorator, flag, opt, options
from gpuscale.errors import InputError
from gpuscale.report.fit import print_fit
from gpuscale.specs.training import KV_DTYPES, LORA_TARGETS, LOSSES, OPTIMIZERS, WEIGHT_DTYPES


def only(scope: str, name: str, help: str | None = None, **override: Any) -> Decorator:
    """A shared flag that applies to one kind of job only, tagged ``[scope]`` in --help: the tag
    is also the rule :func:`reject_misplaced` enforces."""
    return flag(name, help=f"[{scope}] {help or FLAGS[name]['help']}", **override)


@click.command("fit")
@options(
    MODEL,
    flag("gpu", default=DEFAULT_GPU),
    opt("--mode", click.Choice(["train", "infer"]), "train"),
    flag("gpus_per_node", default=8, help="GPUs per node, for the smallest-set-up search."),
    flag(
        "profile",
        help="Calibration profile YAML (from gpuscale calibrate) laid over the generic profile: "
        "its keys win, the rest comes from generic.",
    ),
    flag(
        "seq",
        default=None,
        help="Tokens per sequence (default: the model's context, at most 4096); in --mode infer "
        "the default --context.",
    ),
    only("train", "mbs"),
    opt("--grad-accum", int, 1, "[train] Micro-batches per optimizer step."),
    only("train", "precision"),
    opt(
        "--pure-bf16",
        bool,
        help="[train] No fp32 master weights: weights, grads and optimizer states in 16 bits.",
    ),
    opt("--optimizer", click.Choice(OPTIMIZERS), "adamw", "[train]"),
    only("train", "finetune"),
    only("lora, qlora", "lora_rank"),
    opt(
        "--lora-targets",
        default="all",
        help=f"[lora, qlora] Comma list of {', '.join(LORA_TARGETS)}, or 'all' (linear layers).",
    ),
    opt("--no-double-quant double_quant", bool, True, "[qlora] fp32 quantization constants."),
    opt(
        "--paged-optimizer",
        bool,
        help="[train] bitsandbytes paged optimizer (states may spill to host).",
    ),
    opt(
        "--offload",
        click.Choice(OFFLOADS),
        "none",
        "[train] CPU offload of optimizer states (ZeRO-Offload) or also parameters.",
    ),
    opt(
        "--optimizer-in-backward",
        bool,
        help="[train] Step each parameter during backward; no full gradient buffer.",
    ),
    opt("--activation-offload", bool, help="[train] Offload saved activations."),
    only("train", "recompute"),
    opt(
        "--no-flash flash_attention", bool, True, "[train] Unfused attention (keeps s x s scores)."
    ),
    opt(
        "--loss",
        click.Choice(LOSSES),
        "standard",
        "[train] Cross-entropy: fp32 logits (standard), 16-bit logits upcast per "
        "chunk (chunked: torchtune, LitGPT), or fused with the head (fused: Liger).",
    ),
    opt("--dropout", bool, help="[train] Dropout active (1-byte masks)."),
    "tp",
    "pp",
    only("train", "dp", "Data-parallel degree.", default=1),
    only("train", "cp"),
    *(only("train", name) for name in PIPELINE_SPLIT),
    only("train", "zero"),
    only("infer", "batch", help="Sequences."),
    opt("--context", int, help="[infer] Tokens per sequence in the KV cache (default: as --seq)."),
    opt("--weights", click.Choice(WEIGHT_DTYPES), "bf16", "[infer] Weight storage."),
    opt("--kv-dtype", click.Choice(KV_DTYPES), "bf16", "[infer] KV-cache storage."),
    "html",
    "json",
)
def command(model: str, as_json: bool, html_path: str | None, **o: Any) -> None:
    """Does MODEL (catalog id or config.json) fit on --gpu? Memory breakdown per GPU, verdict,
    and the smallest set-up that fits."""
    check_writable(html_path, "--html")
    reject_misplaced(click.get_current_context(), mode=o["mode"], finetune=o["finetune"])
    result = api.fit(model, **o)
    title = f"gpuscale fit: {model} on {result.device.id}"
    write_result_html(html_path, title, result.verdict, result)
    if as_json:
        emit_json(result.to_dict())
        return
    print_fit(console, result)


def reject_misplaced(ctx: click.Context, *, mode: str, finetune: str) -> None:
    """An option typed where it has no effect is an error, not a silent default: one line that
    names the flags and what is accepted. Where an option applies is its ``[tag]`` in --help."""
    tags = {
        p.name: m.group(1)
        for p in ctx.command.params
        if isinstance(p, click.Option) and (m := re.match(r"\[([^]]+)\]", p.help or ""))
    }
    infer_takes = (
        "--mode infer takes --tp, --pp, --seq, --batch, --context, --weights and --kv-dtype"
    )
    rules = (  # (the rule applies, to flags tagged, which belong to, what is accepted instead)
        (mode == "infer", ("train", "lora, qlora", "qlora"), "--mode train", infer_takes),
        (mode == "train", ("infer",), "--mode infer", None),
        (finetune == "full", ("lora, qlora",), "--finetune lora or qlora", None),
        (finetune != "qlora", ("qlora",), "--finetune qlora", None),
    )
    given = typed_options(ctx)
    for applies, scopes, where, accepted in rules:
        wrong = [flag for name, flag in given.items() if tags.get(name) in scopes]
        if applies and wrong:
            verb, it = ("applies", "it") if len(wrong) == 1 else ("apply", "them")
            accepted = accepted or f"add {where}, or leave {it} out"
            raise InputError(f"{', '.join(wrong)} {verb} to {where}; {accepted}")
