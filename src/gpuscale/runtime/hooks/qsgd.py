"""QSGD: stochastic quantization to ``s`` levels per chunk, with optional error feedback.

Alistarh et al. 2017 ("QSGD: Communication-Efficient SGD via Gradient Quantization and
Encoding", NeurIPS), Sec. 3.1: ``Q_s(v)_i = ||v||_2 * sign(v_i) * xi_i / s`` where ``xi_i`` is
``floor(s |v_i| / ||v||)`` rounded up with probability equal to the fractional part, so that
``E[Q_s(v)] = v`` and ``E||Q_s(v) - v||^2 <= min(d/s^2, sqrt(d)/s) ||v||^2`` (Lemma 3.1). The
paper quantizes buckets of ``d`` consecutive entries with a norm each; ``chunk`` is that ``d``.

Wire format per rank: one signed integer per entry (int8 for ``s <= 127``, int16 up to 32767)
and one float32 norm per chunk. Ranks' norms differ, so payloads are all-gathered and every rank
decodes and sums them in rank order (bit-identical replicas). Error feedback (Karimireddy et
al. 2019, Alg. 2) needs a contractive compressor, ``E||C(p) - p||^2 <= (1 - delta) ||p||^2``,
which ``Q_s`` is not when its variance bound ``omega`` exceeds 1 (few levels, long chunks): the
residual then grows without bound. With error feedback on, the hook therefore sends
``Q_s(p) / (1 + omega)``, contractive with ``delta = 1 / (1 + omega)`` (Beznosikov et al. 2020,
"On Biased Compression for Distributed Learning", arXiv:2002.12410, Lemma 1), and keeps
``p - Q_s(p) / (1 + omega)``; for 127 levels and chunks of 512 the factor is 0.97.
"""

# No ``from __future__ import annotations``: DDP checks the hook's annotations at runtime
# (``bucket: dist.GradBucket``, ``-> torch.futures.Future[torch.Tensor]``).

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from gpuscale.errors import require
from gpuscale.runtime._compat import all_gather_single
from gpuscale.runtime.hooks._feedback import ErrorFeedback
from gpuscale.runtime.hooks._worker import CommWorker
from gpuscale.runtime.hooks.compress import private_group

MAX_LEVELS = 32767


def level_dtype(levels: int) -> torch.dtype:
    return torch.int8 if levels <= 127 else torch.int16


@dataclass(frozen=True, slots=True)
class Quantized:
    """One rank's QSGD message for a flat tensor of ``numel`` entries."""

    codes: torch.Tensor
    """Signed level per entry, ``(chunks, chunk)``, padded with zeros."""
    norms: torch.Tensor
    """float32 L2 norm per chunk, ``(chunks,)``."""
    numel: int


def variance_bound(levels: int, chunk: int) -> float:
    """``omega``: ``E||Q_s(v) - v||^2 <= omega ||v||^2`` (Alistarh et al. 2017, Lemma 3.1)."""
    return min(chunk / levels**2, chunk**0.5 / levels)


def quantize(
    flat: torch.Tensor, levels: int, chunk: int, generator: torch.Generator, shrink: float = 1.0
) -> Quantized:
    """QSGD's ``Q_s`` of ``flat`` in chunks of ``chunk`` entries (Alistarh et al. 2017, Sec. 3.1),
    times ``shrink`` (folded into the norms, so it costs no bytes)."""
    numel = flat.numel()
    rows = -(-max(numel, 1) // chunk)
    padded = torch.zeros(rows * chunk, dtype=torch.float32, device=flat.device)
    padded[:numel].copy_(flat)
    matrix = padded.view(rows, chunk)
    norms = matrix.norm(dim=1)
    scale = torch.where(norms > 0, levels / norms, torch.zeros_like(norms))
    magnitude = matrix.abs() * scale[:, None]
    floor = magnitude.floor()
    draw = torch.rand(magnitude.shape, generator=generator, device=generator.device)
    level = floor + (draw < magnitude - floor).to(floor.dtype)
    signed = (level.clamp_(max=levels) * matrix.sign()).to(level_dtype(levels))
    return Quantized(codes=signed, norms=norms * shrink, numel=numel)


def dequantize(message: Quantized, levels: int, out: torch.Tensor | None = None) -> torch.Tensor:
    """``Q_s(v)`` as a flat float tensor of ``message.numel`` entries (added into ``out``)."""
    values = (message.codes.float() * (message.norms / levels)[:, None]).view(-1)[: message.numel]
    if out is None:
        return values
    return out.add_(values.to(out.dtype))


def pack(message: Quantized) -> torch.Tensor:
    """Norms, then levels, as bytes (norms first keeps their float32 view aligned)."""
    return torch.cat([message.norms.view(torch.uint8), message.codes.view(-1).view(torch.uint8)])


def unpack(payload: torch.Tensor, levels: int, chunk: int, numel: int) -> Quantized:
    rows = -(-max(numel, 1) // chunk)
    split = rows * 4
    norms = payload[:split].view(torch.float32)
    signed = payload[split:].view(level_dtype(levels)).view(rows, chunk)
    return Quantized(codes=signed, norms=norms, numel=numel)


@dataclass(slots=True)
class QSGDState:
    """State of :func:`qsgd_hook`. Create on every rank in the same order (it makes a group)."""

    levels: int = 127
    """``s``: quantization levels per sign (int8 on the wire up to 127)."""
    chunk: int = 512
    """Entries that share one norm (QSGD's bucket size ``d``)."""
    error_feedback: bool = True
    seed: int = 0
    """Seed of the stochastic rounding; each rank draws from ``seed + rank``."""
    process_group: Any = None
    feedback: ErrorFeedback = field(init=False)
    generators: dict[str, torch.Generator] = field(init=False, default_factory=dict)
    worker: CommWorker = field(init=False)

    def __post_init__(self) -> None:
        require(
            1 <= self.levels <= MAX_LEVELS,
            f"QSGD: levels must be in 1..{MAX_LEVELS}, got {self.levels}",
        )
        require(self.chunk >= 1, f"QSGD: chunk must be >= 1, got {self.chunk}")
        if self.process_group is None:
            self.process_group = private_group()
        self.feedback = ErrorFeedback(enabled=self.error_feedback)
        self.worker = CommWorker("qsgd")

    def generator(self, device: torch.device) -> torch.Generator:
        """This rank's rounding stream on ``device``: seeded ``seed + rank``, created once."""
        key = str(device)
        if key not in self.generators:
            self.generators[key] = torch.Generator(device=device).manual_seed(
                self.seed + dist.get_rank()
            )
        return self.generators[key]


def qsgd_hook(state: QSGDState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: mean of every rank's QSGD-quantized gradient."""
    grad = bucket.buffer()
    index = bucket.index()
    world = dist.get_world_size(state.process_group)

    def chain() -> torch.Tensor:
        acc = state.feedback.accumulate(index, grad)
        shrink = (
            1.0 / (1.0 + variance_bound(state.levels, state.chunk))
            if state.feedback.enabled
            else 1.0
        )
        message = quantize(acc, state.levels, state.chunk, state.generator(acc.device), shrink)
        if state.feedback.enabled:
            state.feedback.keep(index, acc - dequantize(message, state.levels).to(acc.dtype))
        payload = pack(message)
        gathered = torch.empty(world * payload.numel(), dtype=payload.dtype, device=payload.device)
        all_gather_single(gathered, payload, group=state.process_group)
        grad.zero_()
        for rank_payload in gathered.view(world, -1):
            dequantize(
                unpack(rank_payload, state.levels, state.chunk, acc.numel()), state.levels, grad
            )
        return grad.div_(world)

    return state.worker.submit(chain)
