"""Run the answer: process groups from the topology and DDP communication hooks that make
gradient synchronisation cheaper on a slow network.

Needs PyTorch (``pip install 'gpuscale[torch]'``); nothing outside ``gpuscale.runtime`` and
``gpuscale.measure`` imports it.

    from gpuscale.runtime import build_groups, register_hook
    groups = build_groups()                      # from torchrun's environment
    register_hook(ddp_model, "hierarchical+bf16", groups)
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("gpuscale.runtime needs PyTorch: pip install 'gpuscale[torch]'") from exc

from gpuscale.runtime.groups import HierarchicalGroups, build_groups
from gpuscale.runtime.hooks import HOOK_NAMES, register_hook
from gpuscale.runtime.topology import NodeTopology

__all__ = ["HOOK_NAMES", "HierarchicalGroups", "NodeTopology", "build_groups", "register_hook"]
