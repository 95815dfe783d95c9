"""DDP communication hooks, by name.

=====================  ==========================================================  =========
name                   what crosses the network per bucket of ``S`` bytes          lossless
=====================  ==========================================================  =========
hierarchical           ``S`` per node (flat ring: ``2(n-1)/n * S`` per link)        yes
hierarchical+bf16/fp16 ``S/2`` per node; node-local sums stay in full precision      no (16-bit)
bf16 / fp16            every hop of the flat all-reduce in 16 bits                  no (16-bit)
topk                   ``8 k`` bytes per rank, all-gathered; error feedback          no
qsgd                   one byte per entry plus a norm per chunk, all-gathered       no
=====================  ==========================================================  =========
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gpuscale.errors import InputError, unknown
from gpuscale.runtime.groups import HierarchicalGroups
from gpuscale.runtime.hooks.compress import CastState, cast_hook
from gpuscale.runtime.hooks.hierarchical import HierarchicalState, hierarchical_hook
from gpuscale.runtime.hooks.qsgd import QSGDState, qsgd_hook
from gpuscale.runtime.hooks.topk import TopKState, topk_hook

_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

HOOK_NAMES: tuple[str, ...] = (
    "hierarchical",
    "hierarchical+bf16",
    "hierarchical+fp16",
    "bf16",
    "fp16",
    "topk",
    "qsgd",
)


def make_hook(
    name: str, groups: HierarchicalGroups | None = None, **options: Any
) -> tuple[Any, Callable[..., Any]]:
    """``(state, hook)`` for ``DistributedDataParallel.register_comm_hook``. Collective: may
    create process groups, so call it on every rank in the same order.

    ``options`` go to the state: ``ratio``/``error_feedback`` for ``topk``; ``levels``,
    ``chunk``, ``error_feedback``, ``seed`` for ``qsgd``.
    """
    if name not in HOOK_NAMES:
        raise unknown("communication hook", name, HOOK_NAMES)
    if name.startswith("hierarchical"):
        if groups is None:
            raise InputError(f"hook '{name}' needs groups=build_groups(...)")
        _, _, wire = name.partition("+")
        return HierarchicalState(
            groups, cross_node_dtype=_DTYPES.get(wire), **options
        ), hierarchical_hook
    if name in _DTYPES:
        return CastState(_DTYPES[name], **options), cast_hook
    if name == "topk":
        return TopKState(**options), topk_hook
    return QSGDState(**options), qsgd_hook


def register_hook(
    ddp_model: Any, name: str, groups: HierarchicalGroups | None = None, **options: Any
) -> Any:
    """Register hook ``name`` on ``ddp_model``; return its state (residuals, groups)."""
    state, hook = make_hook(name, groups, **options)
    ddp_model.register_comm_hook(state, hook)
    return state


__all__ = [
    "HOOK_NAMES",
    "CastState",
    "HierarchicalState",
    "QSGDState",
    "TopKState",
    "cast_hook",
    "hierarchical_hook",
    "make_hook",
    "qsgd_hook",
    "register_hook",
    "topk_hook",
]
