"""Collective names across PyTorch releases.

PyTorch 2.13 renamed ``reduce_scatter_tensor``/``all_gather_into_tensor`` to ``*_single`` and
deprecated the old names; older releases (the ``torch>=2.3`` extra) have only the old ones.
"""

from __future__ import annotations

import torch.distributed as dist

reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
