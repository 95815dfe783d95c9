"""What ``gpuscale fit`` checks before it models anything: options typed where they have no
effect, and settings that are valid alone but not together. Each failure is one line that names
the flag the user typed and what is accepted."""

from __future__ import annotations

import click
from click.core import ParameterSource

from gpuscale.errors import InputError, require
from gpuscale.specs import ModelSpec

TRAIN_ONLY = (
    "mbs",
    "grad_accum",
    "precision",
    "pure_bf16",
    "optimizer",
    "finetune",
    "lora_rank",
    "lora_targets",
    "no_double_quant",
    "paged_optimizer",
    "offload",
    "optimizer_in_backward",
    "activation_offload",
    "recompute",
    "no_flash",
    "loss",
    "dropout",
    "dp",
    "cp",
    "zero",
)
"""Options (click parameter names) that only shape a training job."""
INFER_ONLY = ("batch", "context", "weight_dtype", "kv_dtype")
"""Options that only shape a serving job."""
ADAPTER_ONLY = ("lora_rank", "lora_targets")
QLORA_ONLY = ("no_double_quant",)


def given_options(ctx: click.Context) -> dict[str, str]:
    """The options the user typed (not left at their defaults): parameter name -> flag."""
    typed = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
    return {
        p.name: p.opts[0]
        for p in ctx.command.params
        if isinstance(p, click.Option) and p.name and ctx.get_parameter_source(p.name) in typed
    }


def reject_misplaced(given: dict[str, str], *, mode: str, finetune: str) -> None:
    """An option typed where it has no effect is an error, not a silent default."""
    rules = (
        (
            mode == "infer",
            TRAIN_ONLY,
            "--mode train",
            "--mode infer takes --tp, --pp, --seq, --batch, --context, --weights and --kv-dtype",
        ),
        (mode == "train", INFER_ONLY, "--mode infer", "add --mode infer, or leave {it} out"),
        (
            finetune == "full",
            ADAPTER_ONLY,
            "--finetune lora or qlora",
            "add --finetune lora or qlora, or leave {it} out",
        ),
        (
            finetune != "qlora",
            QLORA_ONLY,
            "--finetune qlora",
            "add --finetune qlora, or leave {it} out",
        ),
    )
    for applies, names, where, accepted in rules:
        wrong = [given[n] for n in names if n in given]
        if applies and wrong:
            verb, it = ("applies", "it") if len(wrong) == 1 else ("apply", "them")
            raise InputError(f"{', '.join(wrong)} {verb} to {where}; {accepted.format(it=it)}")


def positive(flag: str, value: int) -> None:
    require(value >= 1, f"{flag} must be a positive integer, got {value}")


def within_context(spec: ModelSpec, flag: str, tokens: int) -> None:
    require(
        1 <= tokens <= spec.max_seq_len,
        f"{flag} must be 1 to {spec.max_seq_len} ({spec.name}'s maximum context), got {tokens}",
    )


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def check_shape(spec: ModelSpec, *, seq_len: int, tp: int, pp: int, gpus_per_node: int) -> None:
    """What both modes share: sequence length, TP over heads, PP over layers, node size."""
    within_context(spec, "--seq", seq_len)
    positive("--gpus-per-node", gpus_per_node)
    positive("--tp", tp)
    positive("--pp", pp)
    require(
        spec.num_heads % tp == 0,
        f"--tp {tp} does not divide the {spec.num_heads} attention heads; accepted: "
        f"{_divisors(spec.num_heads)}",
    )
    require(
        pp <= spec.num_layers,
        f"--pp {pp} exceeds the model's {spec.num_layers} layers; accepted: 1 to {spec.num_layers}",
    )


def check_training(
    *,
    seq_len: int,
    mbs: int,
    grad_accum: int,
    dp: int,
    cp: int,
    zero: int,
    lora_rank: int,
    precision: str,
    pure_bf16: bool,
    optimizer_in_backward: bool,
) -> None:
    """Training settings that are each valid alone but not together."""
    for flag, value in (
        ("--mbs", mbs),
        ("--grad-accum", grad_accum),
        ("--dp", dp),
        ("--cp", cp),
        ("--lora-rank", lora_rank),
    ):
        positive(flag, value)
    # Context parallelism splits every sequence into cp equal chunks (Megatron-LM CP; ring
    # attention, Liu et al. 2023), as estimate checks too.
    require(
        seq_len % cp == 0,
        f"--seq {seq_len} is not divisible by --cp {cp}; accepted: a --cp that divides {seq_len}",
    )
    require(
        zero == 0 or dp * cp > 1,
        f"--zero {zero} shards over the data-parallel ranks, and --dp x --cp is 1; accepted: "
        "--zero with --dp (or --cp) of 2 or more, or --zero 0",
    )
    # Stepping each parameter as its gradient arrives frees the gradient at once, so there is
    # nothing to accumulate into (torchtune rejects optimizer_in_bwd with
    # gradient_accumulation_steps > 1 for the same reason).
    require(
        not (optimizer_in_backward and grad_accum > 1),
        f"--optimizer-in-backward cannot accumulate gradients, got --grad-accum {grad_accum}; "
        "accepted: --grad-accum 1 with it, or leave it out",
    )
    # Pure 16-bit training without fp32 master weights is a bf16 recipe (torchtune, LitGPT
    # "bf16-true"): fp16 needs fp32 masters and loss scaling, fp32 has no master copy, and fp8
    # recipes keep bf16 weights with fp32 masters.
    require(
        not pure_bf16 or precision == "bf16",
        f"--pure-bf16 needs --precision bf16, got {precision}; accepted: --pure-bf16 with "
        "--precision bf16, or leave it out",
    )
