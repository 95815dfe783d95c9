"""A parallel execution plan: how one training step is split over the GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from gpuscale.errors import require

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")

FLAG_NAMES = {
    "micro_batch": "mbs",
    "global_batch": "gbs",
    "embedding_in_split": "embedding_as_layer",
    "loss_in_split": "loss_as_layer",
}
"""Plan fields whose flag (and JSON key, and API argument) is spelled otherwise: ``--mbs``,
``--gbs``, ``--embedding-as-layer``, ``--loss-as-layer`` everywhere."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """Degrees of parallelism and batch shape. ``tp*pp*dp*cp`` GPUs. The MoE layers have their
    own split of a pipeline stage's ``tp*dp*cp`` ranks (Megatron-Core "parallel folding", Liu et
    al. 2025, arXiv:2504.14960): each expert split ``etp`` ways, the experts ``ep`` ways, the
    rest replicas, so ``ep*etp`` divides ``tp*dp*cp``; ``etp`` defaults to ``tp`` (Megatron-Core's
    ``expert_tensor_parallel_size`` default)."""

    tp: int = 1
    """Tensor parallel (Megatron column/row split of each matmul)."""
    pp: int = 1
    """Pipeline stages."""
    dp: int = 1
    """Data parallel replicas (= FSDP/ZeRO sharding degree when ``zero > 0``)."""
    cp: int = 1
    """Context parallel (ring attention over the sequence)."""
    vp: int = 1
    """Virtual pipeline stages per GPU (interleaved 1F1B)."""
    ep: int = 1
    """Expert parallel (MoE only)."""
    etp: int = 0
    """Expert tensor parallel: ways each expert's matmuls are split (MoE only); 0 = ``tp``."""
    micro_batch: int = 1
    """Sequences per micro-batch per data-parallel replica."""
    global_batch: int = 1
    """Sequences per optimizer step, all replicas together."""
    recompute: Recompute = "none"
    zero: int = 0
    """ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also weights (= FSDP)."""
    sequence_parallel: bool = True
    """Megatron sequence parallelism inside the TP group (reduce-scatter/all-gather, not all-reduce)."""
    first_stage_layers: int = 0
    """Transformer layers on the first pipeline rank (Megatron-Core
    ``--decoder-first-pipeline-num-layers``); 0 = the even or automatic split."""
    last_stage_layers: int = 0
    """Transformer layers on the last pipeline rank (``--decoder-last-pipeline-num-layers``);
    0 = the even or automatic split."""
    embedding_in_split: bool = False
    """Count the input embedding as one layer of the first (virtual) stage when splitting
    (``--account-for-embedding-in-pipeline-split``)."""
    loss_in_split: bool = False
    """Count the output layer and loss as one layer of the last (virtual) stage
    (``--account-for-loss-in-pipeline-split``)."""

    def __post_init__(self) -> None:
        if self.etp == 0 and isinstance(self.tp, int):
            object.__setattr__(self, "etp", self.tp)
        for name in ("tp", "pp", "dp", "cp", "vp", "ep", "etp", "micro_batch", "global_batch"):
            value = getattr(self, name)
            flag = FLAG_NAMES.get(name, name)
            require(
                isinstance(value, int) and value >= 1,
                f"--{flag} must be a positive integer, got {value!r}",
                field=flag,
            )
        require(
            self.recompute in RECOMPUTE_CHOICES,
            f"--recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, got '{self.recompute}'",
            field="recompute",
        )
        require(
            self.zero in (0, 1, 2, 3),
            f"--zero must be 0, 1, 2 or 3, got {self.zero}",
            field="zero",
        )
        require(
            self.global_batch % (self.micro_batch * self.dp) == 0,
            f"--gbs ({self.global_batch}) must be divisible by --mbs x --dp "
            f"({self.micro_batch} x {self.dp} = {self.micro_batch * self.dp})",
            field="gbs",
        )
        require(
            self.vp == 1 or self.pp > 1,
            "--vp > 1 needs --pp > 1 (interleaving splits pipeline stages)",
            field="vp",
        )
        for name in ("first_stage_layers", "last_stage_layers"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 0,
                f"--{name.replace('_', '-')} must be a non-negative integer, got {value!r}",
                field=name,
            )
        uneven = self.first_stage_layers > 0 or self.last_stage_layers > 0
        accounted = self.embedding_in_split or self.loss_in_split
        require(
            self.pp > 1 or not (uneven or accounted),
            "--first-stage-layers/--last-stage-layers and embedding/loss accounting need --pp > 1",
            field="first_stage_layers" if uneven else "embedding_as_layer",
        )
        # Megatron-Core TransformerConfig rejects both ways of shaping the split at once.
        require(
            not (uneven and accounted),
            "give either --first-stage-layers/--last-stage-layers or embedding/loss-as-layer "
            "accounting, not both (Megatron-Core accepts one of them)",
            field="first_stage_layers",
        )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches each pipeline runs per optimizer step (gradient accumulation steps)."""
        return self.global_batch // (self.micro_batch * self.dp)


RECOMPUTE_CODE = {name: code for code, name in enumerate(RECOMPUTE_CHOICES)}
"""Integer codes of recompute modes inside :class:`PlanBatch` (0 none, 1 selective, 2 full)."""

_BATCH_FIELDS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "vp",
    "ep",
    "etp",
    "micro_batch",
    "global_batch",
    "recompute",
    "zero",
    "sequence_parallel",
    "first_stage_layers",
    "last_stage_layers",
    "embedding_in_split",
    "loss_in_split",
)
_BOOL_FIELDS = ("sequence_parallel", "embedding_in_split", "loss_in_split")
_TAKEN = (*_BATCH_FIELDS, "_num_gpus", "_num_microbatches")


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanBatch:
    """Many plans as parallel numpy arrays (one element per plan), so that the cost model
    evaluates hundreds of thousands of candidates in a few vectorized passes.

    ``recompute`` holds :data:`RECOMPUTE_CODE` integers; every other field mirrors :class:`Plan`.
    """

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    vp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    micro_batch: np.ndarray
    global_batch: np.ndarray
    recompute: np.ndarray
    zero: np.ndarray
    sequence_parallel: np.ndarray
    first_stage_layers: np.ndarray
    """Transformer layers on the first pipeline rank; 0 = even or automatic split."""
    last_stage_layers: np.ndarray
    embedding_in_split: np.ndarray
    loss_in_split: np.ndarray
    _num_gpus: np.ndarray = field(init=False, repr=False, compare=False)
    _num_microbatches: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived once: the cost model reads both several times per batch, and the integer
        # division alone costs as much as a few float passes over the plans.
        object.__setattr__(self, "_num_gpus", self.tp * self.pp * self.dp * self.cp)
        # A batch may hold plans not yet validated (micro_batch or dp of 0): those read as 0
        # micro-batches, as numpy's integer division gives, without a warning at construction.
        with np.errstate(divide="ignore", invalid="ignore"):
            micro = self.global_batch // (self.micro_batch * self.dp)
        object.__setattr__(self, "_num_microbatches", micro)

    @classmethod
    def from_plans(cls, plans: Sequence[Plan]) -> PlanBatch:
        columns: dict[str, np.ndarray] = {}
        for name in _BATCH_FIELDS:
            if name == "recompute":
                values = [RECOMPUTE_CODE[p.recompute] for p in plans]
                columns[name] = np.asarray(values, dtype=np.int64)
            elif name in _BOOL_FIELDS:
                columns[name] = np.asarray([getattr(p, name) for p in plans], dtype=bool)
            else:
                columns[name] = np.asarray([getattr(p, name) for p in plans], dtype=np.int64)
        return cls(**columns)

    @classmethod
    def from_arrays(cls, **arrays: np.ndarray) -> PlanBatch:
        """Broadcast the given columns to one length; absent ones take :class:`Plan` defaults."""
        defaults: dict[str, Any] = {
            "tp": 1,
            "pp": 1,
            "dp": 1,
            "cp": 1,
            "vp": 1,
            "ep": 1,
            "micro_batch": 1,
            "global_batch": 1,
            "recompute": 0,
            "zero": 0,
            "sequence_parallel": True,
            "first_stage_layers": 0,
            "last_stage_layers": 0,
            "embedding_in_split": False,
            "loss_in_split": False,
        }
        # An expert split left out follows each plan's tensor parallelism (Plan.etp = 0).
        defaults["etp"] = arrays.get("tp", defaults["tp"])
        merged = {name: np.asarray(arrays.get(name, defaults[name])) for name in _BATCH_FIELDS}
        shaped = np.broadcast_arrays(*merged.values())
        out = {}
        for name, arr in zip(merged, shaped, strict=True):
            dtype = bool if name in _BOOL_FIELDS else np.int64
            out[name] = np.ascontiguousarray(np.atleast_1d(arr), dtype=dtype)
        return cls(**out)

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @property
    def num_gpus(self) -> np.ndarray:
        return self._num_gpus

    @property
    def num_microbatches(self) -> np.ndarray:
        return self._num_microbatches

    def take(self, index: np.ndarray | slice) -> PlanBatch:
        """The plans selected by a boolean mask, an integer index array or a slice (views)."""
        # The derived columns are selected too, not recomputed: the same integers for less
        # work (the planner takes subsets of its candidates many times).
        batch = object.__new__(PlanBatch)
        for name in _TAKEN:
            object.__setattr__(batch, name, getattr(self, name)[index])
        return batch

    def plan(self, i: int) -> Plan:
        """Plan ``i`` as a :class:`Plan`."""
        values = {name: getattr(self, name)[i].item() for name in _BATCH_FIELDS}
        values["recompute"] = RECOMPUTE_CHOICES[values["recompute"]]
        return Plan(**values)


def expert_replicas(plans: PlanBatch) -> np.ndarray:
    """Copies of each expert weight: a pipeline stage's ``tp*dp*cp`` ranks over ``etp*ep``
    (``dp*cp/ep`` when ``etp = tp``; parallel folding, :class:`Plan`)."""
    return np.maximum(plans.tp * plans.dp * plans.cp // (plans.etp * plans.ep), 1)
