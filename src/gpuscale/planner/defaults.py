"""What the planner assumes when the user does not say: sequence length, batch, token budget.

Each default follows a published training recipe and is reported next to the results, so the
user sees what was assumed and can override it (``--seq``, ``--gbs``, ``--tokens``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.costmodel.params import active_params, total_params
from gpuscale.errors import require
from gpuscale.specs import ModelSpec

DEFAULT_SEQ_LEN = 4096
"""Llama 2 and Llama 3 pre-training context (Touvron et al. 2023, arXiv:2307.09288, Table 1;
Llama Team 2024, arXiv:2407.21783, Sec. 3.4.1); shorter where the model's maximum is shorter."""

# Tokens per optimizer step by model size (total parameters, upper bound exclusive).
# GPT-3 (Brown et al. 2020, arXiv:2005.14165, Table 2.1): 0.5M tokens for 125M-760M, 1M for
# 1.3B-2.7B, 2M for 6.7B-13B, 3.2M for 175B. Llama 2 (arXiv:2307.09288, Sec. 2.2) and Llama 3
# 405B's first stage (arXiv:2407.21783, Sec. 3.4.1) use 4M tokens from 7B up; above 20B both
# families agree on ~4M, so that is the large-model default.
_BATCH_TOKENS_BY_SIZE: tuple[tuple[float, float], ...] = (
    (1.0e9, 0.5e6),
    (5.0e9, 1.0e6),
    (20.0e9, 2.0e6),
    (float("inf"), 4.0e6),
)

TOKENS_PER_PARAM = 20.0
"""Compute-optimal training budget (Hoffmann et al. 2022, 'Chinchilla', arXiv:2203.15556,
Table 3: ~20 tokens per parameter)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Assumed:
    """A value the planner chose, with the reason it prints."""

    value: int | float
    why: str


def seq_len(model: ModelSpec) -> Assumed:
    value = min(DEFAULT_SEQ_LEN, model.max_seq_len)
    return Assumed(
        value=value,
        why=f"seq {value} (default: {DEFAULT_SEQ_LEN} or the model's "
        "maximum if shorter, as in Llama 2/3 pre-training)",
    )


def global_batch(model: ModelSpec, seq: int) -> Assumed:
    """Sequences per step: the recipe's token batch for this model size over ``seq``, rounded to
    the nearest power of two (so that many data-parallel degrees divide it)."""
    require(seq >= 1, f"--seq must be a positive integer, got {seq}")
    params = total_params(model)
    tokens = next(t for bound, t in _BATCH_TOKENS_BY_SIZE if params < bound)
    sequences = max(1.0, tokens / seq)
    value = 1 << max(0, round(sequences).bit_length() - 1)
    if value * 1.5 < sequences:
        value *= 2
    return Assumed(
        value=value,
        why=f"global batch {value} x {seq} = {value * seq / 1e6:.2g}M tokens "
        f"(default for {params / 1e9:.3g}B parameters: GPT-3 Table 2.1 / "
        "Llama 2-3 recipes)",
    )


def tokens_to_train(model: ModelSpec) -> Assumed:
    """Chinchilla-optimal token budget on the parameters each token uses (active, for MoE)."""
    value = TOKENS_PER_PARAM * active_params(model)
    return Assumed(
        value=value,
        why=f"{value / 1e9:,.0f}B tokens (default: {TOKENS_PER_PARAM:g} "
        "per parameter, Chinchilla compute-optimal)",
    )


def global_batch_for(model: ModelSpec, seq: int, unit: int) -> Assumed:
    """The recipe batch of :func:`global_batch` rounded to the nearest multiple of ``unit``
    sequences (``mbs x dp`` of a fixed plan; at least one ``unit``), so that ``estimate`` and
    ``plan`` assume the same batch when ``--gbs`` is left out."""
    require(unit >= 1, f"--mbs x --dp must be a positive integer, got {unit}")
    recipe = global_batch(model, seq)
    value = max(unit, unit * round(float(recipe.value) / unit))
    if value == recipe.value:
        return recipe
    return Assumed(
        value=value,
        why=f"global batch {value} x {seq} = {value * seq / 1e6:.2g}M tokens (the recipe's "
        f"{recipe.value} for {total_params(model) / 1e9:.3g}B parameters, GPT-3 Table 2.1 / "
        f"Llama 2-3, rounded to a multiple of mbs x dp = {unit})",
    )
