"""What ``plan`` and ``scale`` share: turning what the user gave into planner inputs, with every
default chosen (sequence, batch, token budget) and why (:mod:`gpuscale.planner.defaults`)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from gpuscale import catalog
from gpuscale.costmodel.profile import Profile, load_training_profile
from gpuscale.errors import InputError, require
from gpuscale.planner import defaults
from gpuscale.planner.search import Hardware, Workload
from gpuscale.specs import Device, Link, ModelSpec, Training
from gpuscale.specs.training import Finetune, TrainPrecision

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
    model: str | Path | ModelSpec,
    gpu: str | Device,
    inter: str | Link,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    gbs: int | None,
    seq: int | None,
    tokens: str | float | None,
    price: float | None,
    precision: str,
    finetune: str,
    framework: str,
    profile_file: str | Path | None,
    compile: bool = False,
) -> Inputs:
    """Planner inputs from what the user gave; what they left out is chosen and recorded in
    ``assumed``. ``gpu`` and ``inter`` must be catalog entries (the planner names them by id);
    ``gpus_per_node`` None is the GPU's NVLink domain (8 on HGX/OAM boards, 72 on NVL72 racks)."""
    spec = catalog.model(model)
    gpus_per_node = catalog.node_size(gpu, gpus_per_node)
    hardware = Hardware(
        gpu=_catalog_id(gpu, catalog.gpus(), "gpu"),
        inter=_catalog_id(inter, catalog.links(), "inter"),
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
    )
    profile = load_training_profile(framework, None if profile_file is None else str(profile_file))
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
    elif isinstance(tokens, str):
        budget = parse_count(tokens)
    else:
        budget = float(tokens)
    training = Training(
        seq_len=seq,
        precision=cast(TrainPrecision, precision),
        finetune=cast(Finetune, finetune),
        compile=compile,
    )
    workload = Workload(
        model=spec, training=training, global_batch=gbs, tokens=budget, price_per_gpu_hour=price
    )
    return Inputs(workload=workload, hardware=hardware, profile=profile, assumed=assumed)


def _catalog_id(value: str | Device | Link, entries: Mapping[str, object], name: str) -> str:
    if isinstance(value, str):
        return value
    if entries.get(value.id) != value:
        raise InputError(
            f"{name}: the planner takes catalog entries; '{value.id}' is not one (add it to the "
            "catalog, or give a catalog id)",
            field=name,
        )
    return value.id
