"""Options that ``plan`` and ``scale`` share, and turning them into planner inputs."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from gpuscale import catalog
from gpuscale.cli._common import err_console, profile_options
from gpuscale.costmodel.profile import Profile, load_profile_for
from gpuscale.errors import InputError, require
from gpuscale.planner import defaults
from gpuscale.planner.search import Hardware, Workload
from gpuscale.specs import Training
from gpuscale.specs.training import FINETUNES, PRECISIONS, Finetune, TrainPrecision

F = TypeVar("F", bound=Callable[..., Any])

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgtp]?)\s*$", re.IGNORECASE)


def parse_count(text: str, flag: str = "--tokens") -> float:
    """``15T``, ``300B``, ``2.5e12``, ``1_000_000`` -> a positive float."""
    match = _COUNT.match(text.replace("_", "").replace(",", ""))
    if match is None:
        raise InputError(
            f"{flag} {text!r} is not a count; use a number with an optional "
            "K, M, B or T suffix, e.g. 15T or 2.5e12"
        )
    value = float(match.group(1)) * _SUFFIX[match.group(2).lower()]
    require(
        math.isfinite(value),
        f"{flag} {text!r} is not a finite count; use e.g. 15T or 2.5e12",
    )
    require(value > 0, f"{flag} must be > 0, got {text!r}")
    return value


def common_options(func: F) -> F:
    """``MODEL --gpu`` and everything that shapes the job, for both planner commands."""
    options = [
        click.argument("model"),
        click.option("--gpu", "gpu", required=True, help="Catalog GPU id (gpuscale catalog gpus)."),
        click.option(
            "--gpus-per-node",
            type=int,
            default=None,
            help="GPUs in one NVLink/PCIe node [default: the GPU's NVLink domain, 8; 72 on "
            "GB200/GB300 NVL72].",
        ),
        click.option(
            "--nics-per-node",
            type=int,
            default=None,
            help="Network ports per node [default: one per GPU, rail-optimized, on RDMA fabrics; one per node on TCP Ethernet].",
        ),
        click.option(
            "--gbs",
            type=int,
            default=None,
            help="Global batch in sequences [default: the model size's recipe, printed].",
        ),
        click.option(
            "--seq",
            type=int,
            default=None,
            help="Sequence length [default: 4096 or the model's maximum if shorter].",
        ),
        click.option(
            "--tokens",
            default=None,
            help="Tokens to train, e.g. 15T [default: 20 per parameter, Chinchilla].",
        ),
        click.option(
            "--price",
            type=float,
            default=None,
            help="USD per GPU-hour; without it cost is in GPU-hours.",
        ),
        click.option(
            "--precision",
            type=click.Choice(PRECISIONS),
            default="bf16",
            show_default=True,
            help="Matmul precision (fp8: linear layers only).",
        ),
        click.option(
            "--finetune",
            type=click.Choice(FINETUNES),
            default="full",
            show_default=True,
            help="Train every weight, or LoRA / QLoRA adapters on a frozen base.",
        ),
        profile_options,
        click.option(
            "--html",
            "html_path",
            default=None,
            type=click.Path(dir_okay=False),
            help="Also write an HTML report with plots to this file.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs:
    """What the planner commands hand to :mod:`gpuscale.planner`, plus what was assumed."""

    workload: Workload
    hardware: Hardware
    profile: Profile
    assumed: dict[str, str]
    """Flag -> the default chosen for it and why (printed and in ``--json``)."""


def build_inputs(
    *,
    model: str,
    gpu: str,
    inter: str,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    gbs: int | None,
    seq: int | None,
    tokens: str | None,
    price: float | None,
    precision: str,
    finetune: str,
    framework: str,
    profile_file: str | None,
) -> Inputs:
    spec = catalog.model(model)
    if gpus_per_node is None:
        gpus_per_node = catalog.gpu(gpu).nvlink_domain_gpus
    hardware = Hardware(
        gpu=gpu, inter=inter, gpus_per_node=gpus_per_node, nics_per_node=nics_per_node
    )
    profile = load_profile_for(framework, profile_file)
    assumed: dict[str, str] = {}
    if seq is None:
        chosen = defaults.seq_len(spec)
        seq = int(chosen.value)
        assumed["seq"] = chosen.why
    require(
        1 <= seq <= spec.max_seq_len,
        f"--seq must be 1 to {spec.max_seq_len} ({spec.name}'s maximum context), got {seq}",
    )
    if gbs is None:
        chosen = defaults.global_batch(spec, seq)
        gbs = int(chosen.value)
        assumed["gbs"] = chosen.why
    if tokens is None:
        chosen = defaults.tokens_to_train(spec)
        budget = float(chosen.value)
        assumed["tokens"] = chosen.why
    else:
        budget = parse_count(tokens)
    training = Training(
        seq_len=seq,
        precision=cast(TrainPrecision, precision),
        finetune=cast(Finetune, finetune),
    )
    workload = Workload(
        model=spec, training=training, global_batch=gbs, tokens=budget, price_per_gpu_hour=price
    )
    return Inputs(workload=workload, hardware=hardware, profile=profile, assumed=assumed)


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A transient rich progress bar on stderr (silent when stderr is not a terminal)."""
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update
