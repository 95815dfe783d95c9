"""A parallel execution plan: how one training step is split over the GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from gpuscale.errors import require

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")


@dataclass(frozen=True, kw_only=True, slots=True)
class Plan:
    """Degrees of parallelism and batch shape. ``tp*pp*dp*cp`` GPUs; experts are split ``ep``
    ways inside the data-parallel group (``dp*cp`` must be divisible by ``ep``)."""

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
        for name in ("tp", "pp", "dp", "cp", "vp", "ep", "micro_batch", "global_batch"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 1,
                f"--{name.replace('_', '-')} must be a positive integer, got {value!r}",
            )
        require(
            self.recompute in RECOMPUTE_CHOICES,
            f"--recompute must be one of {', '.join(RECOMPUTE_CHOICES)}, got '{self.recompute}'",
        )
        require(self.zero in (0, 1, 2, 3), f"--zero must be 0, 1, 2 or 3, got {self.zero}")
        require(
            self.global_batch % (self.micro_batch * self.dp) == 0,
            f"--gbs ({self.global_batch}) must be divisible by --mbs x --dp "
            f"({self.micro_batch} x {self.dp} = {self.micro_batch * self.dp})",
        )
        require(
            self.vp == 1 or self.pp > 1,
            "--vp > 1 needs --pp > 1 (interleaving splits pipeline stages)",
        )
        for name in ("first_stage_layers", "last_stage_layers"):
            value = getattr(self, name)
            require(
                isinstance(value, int) and value >= 0,
                f"--{name.replace('_', '-')} must be a non-negative integer, got {value!r}",
            )
        uneven = self.first_stage_layers > 0 or self.last_stage_layers > 0
        accounted = self.embedding_in_split or self.loss_in_split
        require(
            self.pp > 1 or not (uneven or accounted),
            "--first-stage-layers/--last-stage-layers and embedding/loss accounting need --pp > 1",
        )
        # Megatron-Core TransformerConfig rejects both ways of shaping the split at once.
        require(
            not (uneven and accounted),
            "give either --first-stage-layers/--last-stage-layers or embedding/loss-as-layer "
            "accounting, not both (Megatron-Core accepts one of them)",
        )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> int:
        """Micro-batches each pipeline runs per optimizer step (gradient accumulation steps)."""
        return self.global_batch // (self.micro_batch * self.dp)


def pipeline_layout_error(num_layers: int, plan: Plan) -> str | None:
    """Why ``plan`` cannot split ``num_layers`` transformer layers over its pipeline, or None.

    The rules are Megatron-Core's (``TransformerConfig.__post_init__``,
    ``get_num_layers_to_build``): explicit first/last stage counts leave the rest evenly split
    over the middle ranks (and each count divisible by ``vp`` when interleaving); embedding and
    loss counted as layers need ``layers + 1 + 1`` divisible by ``pp * vp``. Without either,
    ``pp * vp`` dividing the layers gives equal stages; otherwise the split is uneven with the
    first and last ranks lighter: any deficit without interleaving, and at most two layers
    (the embedding and loss accounting Megatron-Bridge's Llama 3.1 405B PP8 x VP8 recipe uses)
    with it.
    """
    pp, vp, L = plan.pp, plan.vp, num_layers
    first, last = plan.first_stage_layers, plan.last_stage_layers
    if pp == 1:
        return None
    if first or last:
        given = (first > 0) + (last > 0)
        middle_ranks = pp - given
        rest = L - first - last
        if (
            rest < 0
            or (middle_ranks == 0 and rest != 0)
            or (middle_ranks > 0 and rest < middle_ranks)
        ):
            return (
                f"--first-stage-layers {first} and --last-stage-layers {last} leave {rest} of the "
                f"{L} layers for {middle_ranks} middle pipeline ranks (each needs at least one)"
            )
        if middle_ranks > 0 and rest % middle_ranks:
            return (
                f"the {rest} layers left after the first/last stages do not split evenly over "
                f"the {middle_ranks} middle pipeline ranks"
            )
        per_middle = rest // middle_ranks if middle_ranks else vp
        if vp > 1 and (first % vp or last % vp or per_middle % vp):
            return (
                f"with --vp {vp} the first ({first or per_middle}), last ({last or per_middle}) "
                f"and middle ({per_middle}) stage layer counts must be multiples of {vp}"
            )
        return None
    units = L + int(plan.embedding_in_split) + int(plan.loss_in_split)
    if plan.embedding_in_split or plan.loss_in_split:
        if units % (pp * vp):
            return (
                f"--pp x --vp = {pp * vp} must divide the {L} layers plus the embedding/loss "
                f"counted as layers ({units})"
            )
        return None
    if L % (pp * vp) == 0:
        return None
    full = vp * -(-L // (pp * vp))
    deficit = pp * full - L
    if vp > 1 and deficit > 2:
        return (
            f"--pp x --vp = {pp * vp} must divide the {L} layers (or {L} + 1 or + 2 with the "
            "embedding and loss counted as layers); give --first-stage-layers/"
            "--last-stage-layers for another uneven split"
        )
    if (pp - 1) * -(-L // pp) >= L:
        return f"--pp {pp} leaves a pipeline stage without layers ({L} layers)"
    return None


RECOMPUTE_CODE = {name: code for code, name in enumerate(RECOMPUTE_CHOICES)}
"""Integer codes of recompute modes inside :class:`PlanBatch` (0 none, 1 selective, 2 full)."""

_BATCH_FIELDS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "vp",
    "ep",
    "micro_batch",
    "global_batch",
    "recompute",
    "zero",
    "sequence_parallel",
    "first_stage_layers",
    "last_stage_layers",
)


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
    micro_batch: np.ndarray
    global_batch: np.ndarray
    recompute: np.ndarray
    zero: np.ndarray
    sequence_parallel: np.ndarray
    first_stage_layers: np.ndarray
    """Transformer layers on the first pipeline rank; 0 = even or automatic split (embedding
    and loss accounting are resolved into these counts by :func:`resolve_stage_layers`)."""
    last_stage_layers: np.ndarray

    @classmethod
    def from_plans(cls, plans: Sequence[Plan], num_layers: int | None = None) -> PlanBatch:
        """``num_layers`` resolves embedding/loss-as-layer accounting into first/last stage
        counts (see :func:`resolve_stage_layers`); without it that accounting is dropped."""
        if num_layers is not None:
            plans = [resolve_stage_layers(num_layers, p) for p in plans]
        columns: dict[str, np.ndarray] = {}
        for name in _BATCH_FIELDS:
            if name == "recompute":
                values = [RECOMPUTE_CODE[p.recompute] for p in plans]
                columns[name] = np.asarray(values, dtype=np.int64)
            elif name == "sequence_parallel":
                columns[name] = np.asarray([p.sequence_parallel for p in plans], dtype=bool)
            else:
                columns[name] = np.asarray([getattr(p, name) for p in plans], dtype=np.int64)
        return cls(**columns)

    @classmethod
    def from_arrays(cls, **arrays: np.ndarray) -> PlanBatch:
        """Broadcast the given columns to one length; absent ones take :class:`Plan` defaults."""
        defaults = {
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
        }
        merged = {name: np.asarray(arrays.get(name, defaults[name])) for name in _BATCH_FIELDS}
        shaped = np.broadcast_arrays(*merged.values())
        out = {}
        for name, arr in zip(merged, shaped, strict=True):
            dtype = bool if name == "sequence_parallel" else np.int64
            out[name] = np.ascontiguousarray(np.atleast_1d(arr), dtype=dtype)
        return cls(**out)

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @property
    def num_gpus(self) -> np.ndarray:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def num_microbatches(self) -> np.ndarray:
        return self.global_batch // (self.micro_batch * self.dp)

    def take(self, index: np.ndarray) -> PlanBatch:
        """The plans selected by a boolean mask or an integer index array."""
        return PlanBatch(**{name: getattr(self, name)[index] for name in _BATCH_FIELDS})

    def plan(self, i: int) -> Plan:
        """Plan ``i`` as a :class:`Plan`."""
        values = {name: getattr(self, name)[i].item() for name in _BATCH_FIELDS}
        values["recompute"] = RECOMPUTE_CHOICES[values["recompute"]]
        return Plan(**values)


def resolve_stage_layers(num_layers: int, plan: Plan) -> Plan:
    """``plan`` with embedding/loss-as-layer accounting turned into the per-rank layer counts
    it implies: each of the ``pp * vp`` virtual stages holds ``(layers + e + l) / (pp * vp)``
    units, so the first rank carries one transformer layer fewer for the embedding and the last
    one fewer for the loss (Megatron-Core ``get_num_layers_to_build``)."""
    if not (plan.embedding_in_split or plan.loss_in_split) or plan.pp == 1:
        return plan
    units = num_layers + int(plan.embedding_in_split) + int(plan.loss_in_split)
    per_rank = units // plan.pp
    return replace(
        plan,
        embedding_in_split=False,
        loss_in_split=False,
        first_stage_layers=per_rank - int(plan.embedding_in_split),
        last_stage_layers=per_rank - int(plan.loss_in_split),
    )
