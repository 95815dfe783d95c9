"""The flags that describe one training run on one cluster under one plan.

``gpuscale estimate`` prices such a run; ``gpuscale calibrate run`` fits a profile to a measured
one. Both take exactly these flags, defined once here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuscale import catalog
from gpuscale.cli._common import FINITE, inter_option, profile_options
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import FINETUNES, PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: list[Callable[[Any], Any]] = [
    click.argument("model"),
    click.option("--gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus)."),
    click.option("--gpus", type=int, default=None, help="GPUs in the job [default: tp*pp*dp*cp]."),
    click.option(
        "--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True
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

RUN_PARAMETERS = (
    "model",
    "gpu",
    "gpus",
    "gpus_per_node",
    "inter",
    "nics_per_node",
    "slowest_gpu",
    "tp",
    "pp",
    "dp",
    "cp",
    "vp",
    "ep",
    "mbs",
    "gbs",
    "seq",
    "recompute",
    "zero",
    "precision",
    "finetune",
    "lora_rank",
    "offload_optimizer",
    "no_sequence_parallel",
    "no_flash_attention",
    "framework",
    "profile_file",
    "storage_gbps",
    "checkpoint_every",
    "checkpoint_gbps",
)
"""The parameter names :func:`run_options` hands to the command, in order."""


def run_options(func: F) -> F:
    """``MODEL --gpu ... --tp ... --profile ...``: every flag of one run, as ``estimate`` takes it."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func
