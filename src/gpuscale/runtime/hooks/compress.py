"""FP16 / BF16 gradient compression for any backend, gloo on CPU included.

PyTorch's ``bf16_compress_hook`` refuses CPU tensors; this one casts, all-reduces the 16-bit
copy and casts back, on any device. Halves the bytes of every hop. For the two-level version
(compress only what crosses the network) use
:class:`~gpuscale.runtime.hooks.hierarchical.HierarchicalState` with ``cross_node_dtype``.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations at runtime
# (``bucket: dist.GradBucket``, ``-> torch.futures.Future[torch.Tensor]``).

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from gpuscale.errors import require
from gpuscale.runtime.hooks._worker import CommWorker

WIRE_DTYPES = (torch.float16, torch.bfloat16)


def private_group() -> Any:
    """A process group over all ranks used by no one else, so that the hook thread's
    collectives never interleave with DDP's own on the default group. Collective."""
    return dist.new_group(ranks=list(range(dist.get_world_size())))


@dataclass(slots=True)
class CastState:
    """State of :func:`cast_hook`. Create on every rank in the same order (it makes a group)."""

    dtype: torch.dtype
    process_group: Any = None
    """Group to average over; None makes a private copy of the whole world."""
    worker: CommWorker = field(init=False)

    def __post_init__(self) -> None:
        require(
            self.dtype in WIRE_DTYPES,
            f"cast hook: dtype must be torch.float16 or torch.bfloat16, got {self.dtype}",
        )
        if self.process_group is None:
            self.process_group = private_group()
        self.worker = CommWorker(f"cast-{self.dtype}")


def cast_hook(state: CastState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: mean gradient all-reduced in ``state.dtype``."""
    grad = bucket.buffer()
    world = dist.get_world_size(state.process_group)

    def chain() -> torch.Tensor:
        wire = grad.to(state.dtype).div_(world)
        dist.all_reduce(wire, group=state.process_group)
        return grad.copy_(wire)

    return state.worker.submit(chain)
