"""Speculative decoding with a draft module (multi-token prediction) in one decode iteration.

Per iteration each decoding request feeds its last token and ``k`` draft tokens to the target
model, which verifies all ``k + 1`` positions in one forward (Leviathan et al. 2023,
arXiv:2211.17192, Sec. 2.3; DeepSeek-V3 arXiv:2412.19437 Sec. 5.4.3 for MTP) and emits the
longest accepted prefix plus its own next token. With each draft accepted with probability
``a`` given the ones before it, the tokens emitted per iteration are ``E = sum_{i=0..k} a^i``
(Leviathan et al. Eq. 1, ``(1 - a^(k+1)) / (1 - a)``), and TPOT = iteration time / E.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.errors import InputError

MAX_DRAFT_TOKENS = 16
"""Most draft tokens accepted as input: far above what engines run for MTP (TensorRT-LLM's
best DeepSeek-R1 setting is 3; acceptance saturates by 5, tech blog 1)."""


def tokens_per_iteration(acceptance: float, draft_tokens: int) -> float:
    """``E = sum_{i=0..k} a^i``: expected tokens one verification emits per request."""
    return float(sum(acceptance**i for i in range(draft_tokens + 1)))


def acceptance_for_length(length: float, draft_tokens: int) -> float:
    """The per-token acceptance ``a`` whose ``E(a, k)`` equals a published mean acceptance
    length (bisection; ``E`` rises monotonically from 1 at ``a = 0`` to ``k + 1`` at 1)."""
    if not 1.0 <= length <= draft_tokens + 1.0:
        raise InputError(
            f"acceptance length {length} outside [1, {draft_tokens + 1}] for {draft_tokens} "
            "draft tokens",
            field="acceptance",
        )
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if tokens_per_iteration(mid, draft_tokens) < length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Speculation:
    """Speculative decoding with a draft module of ``draft_layers`` transformer blocks run
    ``draft_tokens`` times in a chain per iteration (TensorRT-LLM "MTP Eagle": one module
    reused, tech blog 2), each draft accepted with probability ``acceptance``."""

    method: str = "mtp"
    draft_tokens: int
    acceptance: float
    draft_layers: int = 1
    source: str = ""
    """Where ``acceptance`` comes from (the published figure, or the caller's option)."""

    def __post_init__(self) -> None:
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise InputError(
                f"--draft-tokens must be 1 to {MAX_DRAFT_TOKENS}, got {self.draft_tokens}",
                field="draft_tokens",
            )
        if not 0.0 <= self.acceptance <= 1.0:
            raise InputError(
                f"--acceptance must be in [0, 1] (per-token acceptance), got {self.acceptance}",
                field="acceptance",
            )

    @property
    def queries(self) -> int:
        """Positions the target verifies per decoding request: its last token and the drafts."""
        return self.draft_tokens + 1

    @property
    def tokens_per_iteration(self) -> float:
        return tokens_per_iteration(self.acceptance, self.draft_tokens)

    def row(self) -> dict[str, object]:
        return {
            "speculative": self.method,
            "draft_tokens": self.draft_tokens,
            "acceptance": self.acceptance,
            "tokens_per_iteration": self.tokens_per_iteration,
        }
