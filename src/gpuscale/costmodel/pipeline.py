"""How a plan's pipeline ranks share the transformer layers, and which rank is the slowest.

Megatron-Core splits ``L`` layers over ``pp`` ranks evenly when it can; otherwise the first and
last ranks take fewer (``--decoder-first/last-pipeline-num-layers``, or the embedding and loss
counted as layers, ``--account-for-embedding/loss-in-pipeline-split``), because the first rank
also runs the embedding and the last the output layer and loss (Megatron-Core
``transformer_block.get_num_layers_to_build``; Narayanan et al. 2021, Sec. 2.2). Arrays over
plans, as everywhere in the cost model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscale.specs import ModelSpec, PlanBatch


@dataclass(frozen=True, slots=True)
class StageLayers:
    """Transformer layers per pipeline rank, arrays over plans (all equal when ``pp == 1``)."""

    first: np.ndarray
    middle: np.ndarray
    """Each of the ``pp - 2`` middle ranks (the largest share when the split is automatic)."""
    last: np.ndarray

    @property
    def heaviest(self) -> np.ndarray:
        """Most layers on any one rank (what bounds activation and weight memory)."""
        return np.maximum(np.maximum(self.first, self.last), self.middle)


_CACHE: list[tuple[PlanBatch, int, StageLayers]] = []
"""The last few splits, by plan-batch identity: the step, communication and memory models all
ask for the split of the same batch, and the planner prices hundreds of thousands of plans."""


def stage_layers(m: ModelSpec, plans: PlanBatch) -> StageLayers:
    """Layers on the first, middle and last ranks of every plan.

    Explicit counts (``first_stage_layers``/``last_stage_layers`` > 0), or the counts that
    embedding/loss-as-layer accounting implies, leave the rest to the middle ranks. Otherwise each virtual stage gets ``ceil(L / (pp * vp))`` layers and the
    deficit against ``L`` comes off the last rank and then the first (the ranks that also run
    the output layer and the embedding); with ``pp * vp`` dividing ``L`` that is the even split.
    """
    for cached_plans, layers, split in _CACHE:
        if cached_plans is plans and layers == m.num_layers:
            return split
    split = _split(m.num_layers, plans)
    _CACHE.insert(0, (plans, m.num_layers, split))
    del _CACHE[4:]
    return split


def _split(num_layers: int, plans: PlanBatch) -> StageLayers:
    L = num_layers
    pp, vp = plans.pp, plans.vp
    chunks = pp * vp
    if chunks.size and int(chunks.min()) > 0 and L < 2**53:
        # ceil(L / chunks) in floats, far cheaper than // on arrays: a quotient that is not an
        # integer is at least 1/chunks from one, more than its rounding error (< L/chunks *
        # 2**-53), so the float ceiling is the integer one
        full = vp * np.ceil(L / chunks).astype(np.int64)
    else:
        full = vp * (-(-L // chunks))
    deficit = pp * full - L
    # >> 1 is // 2 for every integer (an arithmetic shift floors), for less work
    last = np.maximum(full - ((deficit + 1) >> 1), 1)
    first = np.maximum(full - (deficit >> 1), 1)
    middle = full
    first_given, last_given = plans.first_stage_layers, plans.last_stage_layers
    embedding, loss = plans.embedding_in_split, plans.loss_in_split
    if embedding.any() or loss.any():
        # Embedding/loss counted as layers: each rank holds (L + e + l) / pp units, the first
        # one transformer layer fewer for the embedding, the last one fewer for the loss
        # (Megatron-Core get_num_layers_to_build); the same as explicit first/last counts.
        accounted = embedding | loss
        per_rank = (L + embedding.astype(np.int64) + loss) // pp
        first_given = np.where(accounted, per_rank - embedding, first_given)
        last_given = np.where(accounted, per_rank - loss, last_given)
    if first_given.any() or last_given.any():
        explicit = (first_given > 0) | (last_given > 0)
        given = (first_given > 0).astype(np.int64) + (last_given > 0)
        middle_ranks = np.maximum(pp - given, 1)
        rest = np.maximum(L - first_given - last_given, 0)
        explicit_middle = -(-rest // middle_ranks)
        middle = np.where(explicit, explicit_middle, full)
        first = np.where(explicit, np.where(first_given > 0, first_given, middle), first)
        last = np.where(explicit, np.where(last_given > 0, last_given, middle), last)
    single = pp == 1
    # the choices below, made only where some plan needs them
    if bool((pp <= 2).any()):
        middle = np.where(pp <= 2, np.where(single, L, 0), middle)
    if bool(single.any()):
        first = np.where(single, L, first)
        last = np.where(single, L, last)
    return StageLayers(
        first=first.astype(float),
        middle=middle.astype(float),
        last=last.astype(float),
    )
