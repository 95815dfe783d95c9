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


def stage_layers(m: ModelSpec, plans: PlanBatch) -> StageLayers:
    """Layers on the first, middle and last ranks of every plan.

    Explicit counts (``first_stage_layers``/``last_stage_layers`` > 0) leave the rest to the
    middle ranks. Otherwise each virtual stage gets ``ceil(L / (pp * vp))`` layers and the
    deficit against ``L`` comes off the last rank and then the first (the ranks that also run
    the output layer and the embedding); with ``pp * vp`` dividing ``L`` that is the even split.
    """
    L = float(m.num_layers)
    pp = plans.pp.astype(float)
    vp = plans.vp.astype(float)
    first_given = plans.first_stage_layers.astype(float)
    last_given = plans.last_stage_layers.astype(float)

    full = vp * np.ceil(L / (pp * vp))
    deficit = pp * full - L
    auto_last = np.maximum(full - np.ceil(deficit / 2.0), 1.0)
    auto_first = np.maximum(full - np.floor(deficit / 2.0), 1.0)

    explicit = (first_given > 0) | (last_given > 0)
    given = (first_given > 0).astype(float) + (last_given > 0).astype(float)
    middle_ranks = np.maximum(pp - given, 1.0)
    explicit_middle = np.maximum(np.ceil((L - first_given - last_given) / middle_ranks), 0.0)
    middle = np.where(explicit, explicit_middle, full)
    first = np.where(explicit, np.where(first_given > 0, first_given, middle), auto_first)
    last = np.where(explicit, np.where(last_given > 0, last_given, middle), auto_last)
    single = plans.pp == 1
    return StageLayers(
        first=np.where(single, L, first),
        middle=np.where(single | (plans.pp == 2), np.where(single, L, 0.0), middle),
        last=np.where(single, L, last),
    )
