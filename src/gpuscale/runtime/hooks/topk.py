"""Top-k sparsification with error feedback.

Each rank sends only the ``k`` largest-magnitude entries of its (gradient + residual) and keeps
the rest as its residual (Aji & Heafield 2017, "Sparse Communication for Distributed Gradient
Descent", EMNLP; Lin et al. 2018, "Deep Gradient Compression", ICLR, Sec. 3; Stich et al. 2018,
"Sparsified SGD with Memory", NeurIPS, Alg. 1). Top-k is contractive with ``delta = k/d``, so
error feedback keeps it convergent (Stich et al. 2018, Lemma A.1).

Different ranks pick different coordinates, so the sparse vectors cannot be summed by an
all-reduce; every rank all-gathers every rank's (value, index) pairs and adds them up in rank
order, which gives bit-identical replicas. Wire bytes per rank: ``8 k`` (float32 value and
int32 index), received ``(n-1)`` times.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations at runtime
# (``bucket: dist.GradBucket``, ``-> torch.futures.Future[torch.Tensor]``).

import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from gpuscale.errors import require
from gpuscale.runtime._compat import all_gather_single
from gpuscale.runtime.hooks._feedback import ErrorFeedback
from gpuscale.runtime.hooks._worker import CommWorker
from gpuscale.runtime.hooks.compress import private_group


def keep_count(numel: int, ratio: float) -> int:
    """Entries kept out of ``numel``: ``ceil(ratio * numel)``, at least one."""
    return min(numel, max(1, math.ceil(ratio * numel)))


def select_topk(acc: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(values, indices) of the ``k`` largest-magnitude entries of the flat ``acc``."""
    indices = acc.abs().topk(k, sorted=False).indices
    return acc[indices], indices


def encode(values: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """One int32 payload: float32 value bits, then int32 indices (one collective, not two)."""
    return torch.cat([values.float().view(torch.int32), indices.to(torch.int32)])


def decode_sum(payloads: torch.Tensor, world: int, k: int, out: torch.Tensor) -> torch.Tensor:
    """Sum every rank's sparse vector into ``out`` (zeroed here), in rank order.

    Each rank's indices are distinct, so every ``index_add_`` touches an entry at most once and
    the float sums happen in the same order on every rank and device.
    """
    out.zero_()
    for rank_payload in payloads.view(world, 2 * k):
        values = rank_payload[:k].view(torch.float32).to(out.dtype)
        out.index_add_(0, rank_payload[k:].long(), values)
    return out


@dataclass(slots=True)
class TopKState:
    """State of :func:`topk_hook`. Create on every rank in the same order (it makes a group)."""

    ratio: float = 0.01
    """Fraction of each bucket's entries that a rank sends."""
    error_feedback: bool = True
    process_group: Any = None
    feedback: ErrorFeedback = field(init=False)
    worker: CommWorker = field(init=False)

    def __post_init__(self) -> None:
        require(0 < self.ratio <= 1, f"top-k: ratio must be in (0, 1], got {self.ratio}")
        if self.process_group is None:
            self.process_group = private_group()
        self.feedback = ErrorFeedback(enabled=self.error_feedback)
        self.worker = CommWorker("topk")


def topk_hook(state: TopKState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: mean of every rank's top-k sparsified gradient."""
    grad = bucket.buffer()
    index = bucket.index()
    world = dist.get_world_size(state.process_group)

    def chain() -> torch.Tensor:
        acc = state.feedback.accumulate(index, grad)
        k = keep_count(acc.numel(), state.ratio)
        values, indices = select_topk(acc, k)
        if state.feedback.enabled:
            residual = acc.clone()
            residual[indices] = 0
            state.feedback.keep(index, residual)
        payload = encode(values, indices)
        gathered = torch.empty(world * payload.numel(), dtype=payload.dtype, device=payload.device)
        all_gather_single(gathered, payload, group=state.process_group)
        return decode_sum(gathered, world, k, grad).div_(world)

    return state.worker.submit(chain)
