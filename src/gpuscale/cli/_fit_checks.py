"""What ``gpuscale fit`` checks while parsing: options typed where they have no effect (the
library checks the values themselves). Each failure is one line that names the flag the user
typed and what is accepted."""

from __future__ import annotations

import click
from click.core import ParameterSource

from gpuscale.errors import InputError

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
