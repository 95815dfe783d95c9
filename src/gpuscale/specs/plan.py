"""A parallel execution plan: how one training step is split over the GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscale.errors import require
from gpuscale.specs.model import ModelSpec

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")

FLAG_NAMES = {"micro_batch": "mbs", "global_batch": "gbs"}
"""Plan fields whose flag (and JSON key, and API argument) is spelled shorter: ``--mbs``,
``--gbs`` everywhere."""


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

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "cp", "vp", "ep", "micro_batch", "global_batch"):
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
    "micro_batch",
    "global_batch",
    "recompute",
    "zero",
    "sequence_parallel",
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

    @classmethod
    def from_plans(cls, plans: Sequence[Plan]) -> PlanBatch:
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


def check_plan(model: ModelSpec, plan: Plan, num_gpus: int, seq: int) -> None:
    """Refuse a plan that cannot run ``model`` on ``num_gpus`` GPUs at sequence length ``seq``
    (shared by ``estimate`` and ``calibrate run``; raises :class:`InputError` naming the flag)."""
    require(
        plan.num_gpus == num_gpus,
        f"tp x pp x dp x cp = {plan.tp} x {plan.pp} x {plan.dp} x {plan.cp} = {plan.num_gpus} "
        f"but --gpus is {num_gpus}",
    )
    require(
        model.num_heads % plan.tp == 0,
        f"--tp {plan.tp} does not divide the {model.num_heads} attention heads of {model.name}",
    )
    require(
        model.num_kv_heads % plan.tp == 0 or plan.tp % model.num_kv_heads == 0,
        f"--tp {plan.tp} and the {model.num_kv_heads} KV heads of {model.name} do not divide "
        "each other",
    )
    require(
        plan.pp <= model.num_layers,
        f"--pp {plan.pp} exceeds the {model.num_layers} layers of {model.name}",
    )
    require(
        model.num_layers % (plan.pp * plan.vp) == 0 or plan.vp == 1,
        f"--pp x --vp = {plan.pp * plan.vp} must divide the {model.num_layers} layers for "
        "interleaving",
    )
    require(seq % plan.cp == 0, f"--seq {seq} is not divisible by --cp {plan.cp}")
    require(
        plan.vp == 1 or plan.num_microbatches % plan.pp == 0,
        f"--vp {plan.vp} needs the micro-batches per step (gbs/(mbs*dp) = "
        f"{plan.num_microbatches}) to be a multiple of --pp {plan.pp} (interleaved 1F1B)",
    )
    require(
        plan.pp == 1 or model.num_layers >= plan.pp,
        f"--pp {plan.pp} leaves a stage without layers ({model.num_layers} layers)",
    )
    require(
        plan.ep == 1 or (model.is_moe and model.num_experts % plan.ep == 0),
        f"--ep {plan.ep} needs a mixture-of-experts model whose expert count it divides",
    )
    require(
        plan.ep == 1 or (plan.dp * plan.cp) % plan.ep == 0,
        f"--ep {plan.ep} must divide dp x cp = {plan.dp * plan.cp}",
    )
