"""The flags that describe one training run on one cluster under one plan.

``gpuscale estimate`` prices such a run; ``gpuscale calibrate run`` fits a profile to a measured
one. Both take exactly these flags, defined once here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuscale.cli._common import FINITE, inter_option, profile_options
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import FINETUNES, PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])

PIPELINE_SPLIT_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--first-stage-layers",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Layers on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers;"
        " 0: even or automatic split).",
    ),
    click.option(
        "--last-stage-layers",
        type=click.IntRange(min=0),
        default=0,
        show_default=True,
        help="Layers on the last pipeline rank (--decoder-last-pipeline-num-layers).",
    ),
    click.option(
        "--embedding-as-layer",
        is_flag=True,
        help="Count the embedding as a layer of the first stage "
        "(--account-for-embedding-in-pipeline-split).",
    ),
    click.option(
        "--loss-as-layer",
        is_flag=True,
        help="Count the output layer and loss as a layer of the last stage "
        "(--account-for-loss-in-pipeline-split).",
    ),
]
"""``--first-stage-layers``, ``--last-stage-layers``, ``--embedding-as-layer``,
``--loss-as-layer``: how the layers split over pipeline ranks (see :class:`gpuscale.specs.Plan`);
in every run's flags and in ``fit``'s."""

_OPTIONS: list[Callable[[Any], Any]] = [
    click.argument("model"),
    click.option("--gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus)."),
    click.option("--gpus", type=int, default=None, help="GPUs in the job [default: tp*pp*dp*cp]."),
    click.option(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs in one NVLink domain [default: the GPU's, 8; 72 on GB200/GB300 NVL72].",
    ),
    inter_option(),
    click.option(
        "--nics-per-node",
        type=int,
        default=None,
        help="[default: one per GPU on RDMA fabrics, one per node on TCP Ethernet]",
    ),
    click.option(
        "--slowest-gpu",
        default=None,
        help="Mixed cluster: the slowest card in the job, which sets the pace of every step.",
    ),
    click.option("--tp", type=int, default=1, show_default=True, help="Tensor-parallel degree."),
    click.option("--pp", type=int, default=1, show_default=True, help="Pipeline stages."),
    click.option(
        "--dp", type=int, default=None, help="Data-parallel degree [default: gpus/(tp*pp*cp)]."
    ),
    click.option("--cp", type=int, default=1, show_default=True, help="Context-parallel degree."),
    click.option(
        "--vp",
        type=int,
        default=1,
        show_default=True,
        help="Virtual stages per GPU (interleaving).",
    ),
    click.option(
        "--ep", type=int, default=1, show_default=True, help="Expert-parallel degree (MoE)."
    ),
    *PIPELINE_SPLIT_OPTIONS,
    click.option("--mbs", type=int, default=1, show_default=True, help="Micro-batch, sequences."),
    click.option(
        "--gbs",
        type=int,
        default=None,
        help="Global batch, sequences [default: the model size's recipe batch, as plan assumes; "
        "printed].",
    ),
    click.option("--seq", type=int, default=4096, show_default=True, help="Sequence length."),
    click.option(
        "--recompute", type=click.Choice(RECOMPUTE_CHOICES), default="none", show_default=True
    ),
    click.option(
        "--zero",
        type=click.IntRange(0, 3),
        default=0,
        show_default=True,
        help="ZeRO stage (3 = FSDP full shard).",
    ),
    click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True),
    click.option(
        "--finetune",
        type=click.Choice(FINETUNES),
        default="full",
        show_default=True,
        help="Full training, or LoRA/QLoRA adapters on a frozen base.",
    ),
    click.option("--lora-rank", type=int, default=16, show_default=True),
    click.option(
        "--offload-optimizer", is_flag=True, help="ZeRO-Offload: optimizer step on the CPU."
    ),
    click.option("--no-sequence-parallel", is_flag=True, help="TP all-reduces instead of RS/AG."),
    click.option(
        "--no-flash-attention", is_flag=True, help="Unfused attention (s x s scores in HBM)."
    ),
    profile_options,
    click.option(
        "--storage-gbps",
        type=FINITE,
        default=0.0,
        help="Dataset read bandwidth per node, GB/s (0: data local and prefetched).",
    ),
    click.option(
        "--checkpoint-every", type=int, default=0, help="Checkpoint every N steps (0: never)."
    ),
    click.option(
        "--checkpoint-gbps",
        type=FINITE,
        default=10.0,
        show_default=True,
        help="Aggregate checkpoint write bandwidth, GB/s.",
    ),
]


def pipeline_split_options(func: F) -> F:
    """The :data:`PIPELINE_SPLIT_OPTIONS` alone (``fit``)."""
    for option in reversed(PIPELINE_SPLIT_OPTIONS):
        func = option(func)
    return func


def run_options(func: F) -> F:
    """``MODEL --gpu ... --tp ... --profile ...``: every flag of one run, as ``estimate`` takes it."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


def run_arguments(ctx: click.Context, flags: dict[str, Any]) -> dict[str, Any]:
    """The API keyword arguments of the run flags a command received (``flags`` minus the
    command's own): the negated flags turned round, ``--profile`` as ``profile``, and
    ``--lora-rank`` only when typed (its default belongs to an adapter fine-tune, so an untyped
    rank must not make a full fine-tune look like LoRA)."""
    run = dict(flags)
    run["sequence_parallel"] = not run.pop("no_sequence_parallel")
    run["flash_attention"] = not run.pop("no_flash_attention")
    run["profile"] = run.pop("profile_file")
    if ctx.get_parameter_source("lora_rank") is click.core.ParameterSource.DEFAULT:
        run["lora_rank"] = None
    return run
