"""The smallest set-up that holds a model: memory only, no step time.

Candidates are single-node counts ``1..gpus_per_node`` and whole nodes beyond. For each count the
layouts people reach for when memory is the problem are tried at once through the vectorized
memory model: ZeRO/FSDP data parallelism, tensor parallelism inside a node, and tensor x
pipeline parallelism (with ZeRO-1 over any remaining replicas). Pipelined plans run at least
``pp`` micro-batches per step, as 1F1B needs to fill the pipeline (Narayanan et al. 2021,
Sec. 2.2), so their activation memory is the steady state's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscale.costmodel.inference_memory import inference_memory
from gpuscale.costmodel.memory import training_memory
from gpuscale.costmodel.profile import Profile
from gpuscale.planner.enumerate import divisors, tp_degrees
from gpuscale.specs import Device, ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CODE
from gpuscale.specs.training import Inference, Training
from gpuscale.specs.units import GIB

TP_CANDIDATES = np.array([1, 2, 4, 8, 16], dtype=np.int64)
MAX_GPUS = 8192
"""Largest count searched. Memory per GPU stops shrinking long before this (activations and
the gathered units do not shard), so a set-up not found here needs other settings."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FitOption:
    """One layout that fits, with the memory of its fullest GPU."""

    family: str
    """``zero3``, ``tp``, ``tp-pp``, ``data-parallel`` or ``single``."""
    gpus: int
    tp: int
    pp: int
    dp: int
    zero: int
    memory_bytes: float

    def layout(self) -> str:
        """``ZeRO-3 (FSDP)``, ``TP=8``, ``TP=8 x PP=14 x DP=2 ZeRO-1``, ``one GPU``."""
        if self.family == "single":
            return "one GPU"
        if self.family == "zero3":
            return "ZeRO-3 (FSDP)"
        if self.family == "data-parallel":
            return f"DP={self.dp} ZeRO-{self.zero}"
        parts = [f"TP={self.tp}"] if self.tp > 1 else []
        parts += [f"PP={self.pp}"] if self.pp > 1 else []
        if self.dp > 1:
            parts.append(f"DP={self.dp}" + (f" ZeRO-{self.zero}" if self.zero else ""))
        return " x ".join(parts)

    def describe(self, gpus_per_node: int, gpu_name: str = "GPU") -> str:
        """``6x H100 SXM5 80GB with ZeRO-3 (FSDP) in one node``."""
        if self.family == "single":
            return f"1x {gpu_name}"
        nodes = -(-self.gpus // gpus_per_node)
        where = "in one node" if nodes == 1 else f"on {nodes} nodes"
        return f"{self.gpus}x {gpu_name} with {self.layout()} {where}"


def gpu_counts(gpus_per_node: int, max_gpus: int) -> np.ndarray:
    """``1..gpus_per_node`` then whole nodes up to ``max_gpus``."""
    within = np.arange(1, min(gpus_per_node, max_gpus) + 1)
    nodes = np.arange(2 * gpus_per_node, max_gpus + 1, gpus_per_node)
    return np.concatenate([within, nodes]).astype(np.int64)


def _family(tp: np.ndarray, pp: np.ndarray, dp: np.ndarray, zero: np.ndarray) -> np.ndarray:
    family = np.full(tp.shape, "tp-pp", dtype=object)
    family[(tp > 1) & (pp == 1)] = "tp"
    family[(tp == 1) & (pp == 1) & (dp > 1)] = "data-parallel"
    family[(tp == 1) & (pp == 1) & (dp > 1) & (zero == 3)] = "zero3"
    family[(tp == 1) & (pp == 1) & (dp == 1)] = "single"
    return family


def _pick(
    family: np.ndarray,
    gpus: np.ndarray,
    memory: np.ndarray,
    fits: np.ndarray,
    columns: dict[str, np.ndarray],
    limit: int,
) -> list[FitOption]:
    """The smallest fitting count of each family (least memory among ties), smallest first."""
    options = []
    for name in ("single", "zero3", "tp", "tp-pp", "data-parallel"):
        idx = np.flatnonzero(fits & (family == name))
        if idx.size == 0:
            continue
        best = idx[np.lexsort((memory[idx], gpus[idx]))[0]]
        options.append(
            FitOption(
                family=name,
                gpus=int(gpus[best]),
                memory_bytes=float(memory[best]),
                **{k: int(v[best]) for k, v in columns.items()},
            )
        )
    options.sort(key=lambda o: (o.gpus, o.memory_bytes))
    return options[:limit]


def training_candidates(
    model: ModelSpec, base: Plan, gpus_per_node: int, max_gpus: int
) -> PlanBatch:
    """Every (count, tp, pp, ZeRO) layout tried, with the micro-batch and recompute of ``base``."""
    accum = base.num_microbatches
    counts = gpu_counts(gpus_per_node, max_gpus)
    tps = tp_degrees(model, TP_CANDIDATES[gpus_per_node >= TP_CANDIDATES])
    pps = divisors(model.num_layers)
    n, tp_a, pp_a, zero_a = (
        a.ravel() for a in np.meshgrid(counts, tps, pps, np.array([0, 1, 3]), indexing="ij")
    )
    valid = n % (tp_a * pp_a) == 0
    dp_a = np.where(valid, n // (tp_a * pp_a), 0)
    # ZeRO needs replicas to shard over; stage 3 with pipelining is not a stack people run.
    valid &= (dp_a > 1) | (zero_a == 0)
    valid &= (pp_a == 1) | (zero_a < 3)
    tp_a, pp_a, dp_a, zero_a = tp_a[valid], pp_a[valid], dp_a[valid], zero_a[valid]
    steps = np.maximum(accum, pp_a)
    return PlanBatch.from_arrays(
        tp=tp_a,
        pp=pp_a,
        dp=dp_a,
        zero=zero_a,
        micro_batch=np.asarray(base.micro_batch),
        global_batch=base.micro_batch * dp_a * steps,
        recompute=np.asarray(RECOMPUTE_CODE[base.recompute]),
        sequence_parallel=np.asarray(base.sequence_parallel),
    )


def smallest_training_setups(
    model: ModelSpec,
    training: Training,
    device: Device,
    base: Plan,
    profile: Profile,
    *,
    gpus_per_node: int = 8,
    max_gpus: int = MAX_GPUS,
    limit: int = 3,
) -> list[FitOption]:
    """Up to ``limit`` layouts, one per family, each with the fewest GPUs that hold it."""
    plans = training_candidates(model, base, gpus_per_node, max_gpus)
    memory = training_memory(model, training, plans, profile=profile).total
    fits = memory <= device.memory_bytes
    family = _family(plans.tp, plans.pp, plans.dp, plans.zero)
    columns = {"tp": plans.tp, "pp": plans.pp, "dp": plans.dp, "zero": plans.zero}
    return _pick(family, plans.num_gpus, memory, fits, columns, limit)


def smallest_inference_setups(
    model: ModelSpec,
    inference: Inference,
    device: Device,
    profile: Profile,
    *,
    gpus_per_node: int = 8,
    max_gpus: int = MAX_GPUS,
    limit: int = 3,
) -> list[FitOption]:
    """Tensor parallelism inside a node, then pipeline stages across nodes."""
    tps = tp_degrees(model, TP_CANDIDATES[gpus_per_node >= TP_CANDIDATES])
    pps = divisors(model.num_layers)
    tp_g, pp_g = (a.ravel() for a in np.meshgrid(tps, pps))
    keep = tp_g * pp_g <= max_gpus
    tp_g, pp_g = tp_g[keep], pp_g[keep]
    memory = inference_memory(model, inference, tp_g, pp_g, profile).total
    fits = memory <= device.memory_bytes
    ones = np.ones_like(tp_g)
    family = _family(tp_g, pp_g, ones, ones * 0)
    columns = {"tp": tp_g, "pp": pp_g, "dp": ones, "zero": ones * 0}
    return _pick(family, tp_g * pp_g, memory, fits, columns, limit)


def short_name(device: Device) -> str:
    """``H100 SXM5 80GB``: the card's name without its vendor."""
    return device.name.removeprefix("NVIDIA ").removeprefix("AMD ")


def fit_verdict(total_bytes: float, device: Device, num_gpus: int) -> tuple[bool, str]:
    """Whether ``total_bytes`` per GPU fit ``device``, and the sentence that says so."""
    capacity = device.memory_bytes
    gib, cap = total_bytes / GIB, capacity / GIB
    where = "one" if num_gpus == 1 else f"each of {num_gpus}"
    if total_bytes <= capacity:
        return True, (
            f"fits: {gib:,.1f} GiB of the {cap:,.1f} GiB of {where} {device.name} "
            f"({cap - gib:,.1f} GiB to spare)"
        )
    return False, (
        f"does not fit: needs {gib:,.1f} GiB per GPU, {gib / cap:,.1f}x the "
        f"{cap:,.1f} GiB of {where} {device.name} (short by {gib - cap:,.1f} GiB)"
    )


def suggestion(options: list[FitOption], device: Device, gpus_per_node: int) -> str:
    """``needs 176x H100 ... ; or ...``, or that nothing up to :data:`MAX_GPUS` holds it."""
    if not options:
        return f"no layout of up to {MAX_GPUS} GPUs holds it with these settings"
    return "needs " + "; or ".join(o.describe(gpus_per_node, short_name(device)) for o in options)


def recompute_note(
    model: ModelSpec,
    training: Training,
    device: Device,
    plan: Plan,
    profile: Profile,
    options: list[FitOption],
    *,
    gpus_per_node: int,
) -> str | None:
    """For a plan that does not fit without full recompute: would ``--recompute full`` fit it on
    this set-up, or on a smaller one than ``options`` offers? ``None`` when it would not help."""
    if plan.recompute == "full":
        return None
    recomputed = Plan(
        tp=plan.tp,
        pp=plan.pp,
        dp=plan.dp,
        cp=plan.cp,
        zero=plan.zero,
        micro_batch=plan.micro_batch,
        global_batch=plan.global_batch,
        recompute="full",
    )
    full = training_memory(model, training, PlanBatch.from_plans([recomputed]), profile).row(0)
    if full["total"] <= device.memory_bytes:
        return f"with --recompute full it fits on this set-up ({full['total'] / GIB:,.1f} GiB)"
    cheaper = smallest_training_setups(
        model, training, device, recomputed, profile, gpus_per_node=gpus_per_node, limit=1
    )
    if cheaper and (not options or cheaper[0].gpus < options[0].gpus):
        return "with --recompute full: " + suggestion(cheaper, device, gpus_per_node)
    return None
