"""``gpuscale fit``: does a model fit, what is the memory made of, and what is the smallest
set-up that holds it."""

from __future__ import annotations

import re
from typing import Any

import click

from gpuscale import api
from gpuscale.api.fitting import DEFAULT_GPU
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


def only(scope: str, *names: str, help: str | None = None, **override: Any) -> list[Decorator]:
    """Flags that apply to one kind of job only, tagged ``[scope]`` in --help: the tag is also
    the rule :func:`reject_misplaced` enforces."""
    return [flag(n, help=f"[{scope}] {help or FLAGS[n]['help']}", **override) for n in names]


@click.command("fit")
@options(
    MODEL,
    flag("gpu", default=DEFAULT_GPU),
    opt("--mode", click.Choice(["train", "infer"]), "train"),
    flag(
        "gpus_per_node",
        help="GPUs per node, for the smallest-set-up search [default: the GPU's NVLink domain, "
        "8; 72 on GB200/GB300 NVL72; 4 on H200 NVL].",
    ),
    only("train", "framework"),
    flag(
        "profile",
        help="Calibration profile YAML (from gpuscale calibrate) laid over the --framework "
        "profile (generic in --mode infer): its keys win, the rest comes from it.",
    ),
    flag(
        "seq",
        default=None,
        help="Tokens per sequence (default: the model's context, at most 4096); in --mode infer "
        "the default --context.",
    ),
    only("train", "mbs", "grad_accum", "precision", "pure_bf16", "optimizer", "finetune"),
    only("lora, qlora", "lora_rank", "lora_targets"),
    only("qlora", "double_quant"),
    only(
        "train",
        *("paged_optimizer", "offload", "optimizer_in_backward"),
        *("activation_offload", "activation_offload_layers"),
    ),
    only("train", "recompute", "recompute_modules"),
    opt(
        "--no-flash flash_attention", bool, True, "[train] Unfused attention (keeps s x s scores)."
    ),
    only("train", "loss", "dropout", "grad_reduce_in_bf16"),
    "tp",
    "pp",
    only("train", "dp", help="Data-parallel degree.", default=1),
    only("train", "cp", "vp", "ep", "etp", *PIPELINE_SPLIT, "zero"),
    only("infer", "batch", "context", "weights", "kv_dtype"),
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
