"""Price every candidate plan with the cost model, drop what does not fit, rank, explain.

One GPU count is a few vectorized passes: :func:`enumerate_runs` builds the candidates as
arrays, the memory model prices them all, the step model prices those whose answer can matter
(a floor from the math alone bounds the rest), and only the few best become Python objects.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.distinct import per_distinct
from gpuscale.costmodel.memory import (
    headroom_assumption,
    memory_budget_bytes,
    memory_total,
)
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.step import (
    STEP_FLOOR_COLUMNS,
    StepEstimate,
    estimate_batch,
    step_time_floor_s,
)
from gpuscale.costmodel.uncertainty import band_for
from gpuscale.errors import InputError, require
from gpuscale.planner.enumerate import PlanRuns, SearchSpace, enumerate_runs
from gpuscale.planner.words import PART_NAMES, bottleneck, describe, gpus, pct
from gpuscale.price import check_price
from gpuscale.specs import Cluster, ModelSpec, Plan, PlanBatch, Training
from gpuscale.specs.hardware import check_whole_nodes
from gpuscale.specs.units import GIB

OBJECTIVES: tuple[str, ...] = ("throughput", "cost", "time")

Progress = Callable[[int, int], None]
"""Called as ``progress(done, total)`` after each GPU count is searched."""


@dataclass(frozen=True, kw_only=True, slots=True, init=False)
class Hardware:
    """Where the job runs: a catalog GPU, the node shape and the fabric between nodes."""

    gpu: str
    inter: str
    gpus_per_node: int
    """The GPUs of one NVLink/PCIe node; left out, the GPU's NVLink domain
    (:func:`gpuscale.catalog.default_gpus_per_node`)."""
    nics_per_node: int | None
    """``None``: one NIC per GPU (rail-optimized) on RDMA fabrics, one per node on TCP Ethernet."""

    def __init__(
        self,
        *,
        gpu: str,
        inter: str = catalog.DEFAULT_INTER,
        gpus_per_node: int | None = None,
        nics_per_node: int | None = None,
    ) -> None:
        # Written out (the dataclass's own __init__ would keep a None): the node size is
        # resolved once, here, so every reader sees an int.
        catalog.gpu(gpu)
        node = catalog.node_size(gpu, gpus_per_node)
        catalog.link(inter)  # node_size refused a node of no GPU
        require(
            nics_per_node is None or nics_per_node >= 1,
            f"--nics-per-node must be a positive integer, got {nics_per_node}; "
            "leave it out for the fabric's default (one per GPU on RDMA, one per node on Ethernet)",
        )
        for name, value in (
            ("gpu", gpu),
            ("inter", inter),
            ("gpus_per_node", node),
            ("nics_per_node", nics_per_node),
        ):
            object.__setattr__(self, name, value)

    def cluster(self, num_gpus: int) -> Cluster:
        return catalog.cluster(
            self.gpu,
            num_gpus,
            gpus_per_node=self.gpus_per_node,
            inter=self.inter,
            nics_per_node=self.nics_per_node,
        )

    def with_inter(self, inter: str) -> Hardware:
        return Hardware(
            gpu=self.gpu,
            inter=inter,
            gpus_per_node=self.gpus_per_node,
            nics_per_node=self.nics_per_node,
        )


MAX_TRAIN_TOKENS = 1e15
"""Most tokens a plan trains on: ~28x the largest published pretraining budget (Qwen3, 36T
tokens, arXiv:2505.09388 Sec. 3), so a larger one is a typo; --tokens 1e40 was priced as a
10^25-GPU-hour run."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """What is trained: the model, the per-step shape, and how many tokens in all."""

    model: ModelSpec
    training: Training
    global_batch: int
    """Sequences per optimizer step."""
    tokens: float
    """Tokens to train on, for time and cost to train."""
    price_per_gpu_hour: float | None = None
    """USD; ``None`` reports cost in GPU-hours only."""

    def __post_init__(self) -> None:
        require(
            self.global_batch >= 1,
            f"--gbs must be a positive integer (sequences per step), got {self.global_batch}",
        )
        batch_tokens = self.global_batch * self.training.seq_len
        require(
            math.isfinite(self.tokens),
            f"--tokens must be a finite count, got {self.tokens:g}; accepted: e.g. 15T or 2.5e12",
            field="tokens",
        )
        require(
            self.tokens >= batch_tokens,
            f"--tokens {self.tokens:g} is less than one global batch; accepted: at least "
            f"{self.global_batch} x {self.training.seq_len} = {batch_tokens:,} tokens",
            field="tokens",
        )
        require(
            self.tokens <= MAX_TRAIN_TOKENS,
            f"--tokens {self.tokens:g} is more than any training run; accepted: at most "
            f"{MAX_TRAIN_TOKENS:g} (1000T, ~28x the largest published budget, Qwen3's 36T)",
            field="tokens",
        )
        check_price(self.price_per_gpu_hour)


@dataclass(frozen=True, kw_only=True, slots=True)
class PricedPlan:
    """One plan with what the cost model says about it."""

    plan: Plan
    num_gpus: int
    gpus_per_node: int
    step_time_s: float
    tokens_per_s: float
    """Whole job."""
    mfu: float
    memory_per_gpu_gib: float
    fits: bool
    parts_s: Mapping[str, float]
    """Seconds per step by part (keys of :data:`~gpuscale.planner.words.PART_NAMES`)."""
    estimate: Mapping[str, Any]
    """The cost model's JSON row for this plan (the ``gpuscale estimate --json`` contract)."""

    @property
    def gpu_seconds_per_token(self) -> float:
        return self.num_gpus / self.tokens_per_s

    def time_to_train_s(self, tokens: float) -> float:
        return tokens / self.tokens_per_s

    def gpu_hours(self, tokens: float) -> float:
        return self.num_gpus * self.time_to_train_s(tokens) / 3600.0

    def describe(self) -> str:
        return describe(self.plan, self.gpus_per_node)


@dataclass(frozen=True, kw_only=True, slots=True)
class CountResult:
    """The search at one GPU count."""

    num_gpus: int
    evaluated: int
    fitting: int
    top: tuple[PricedPlan, ...]
    """The fastest fitting layouts (tp, pp, cp, ep), each with its best vp, micro-batch, ZeRO
    stage and recompute; best first."""
    nearest_faster_unfit: PricedPlan | None
    """Of the plans at least 1% faster than the best fitting one, the one closest to fitting
    (what memory costs); ``None`` when no faster plan exists."""
    min_memory_gib: float | None
    """Least memory per GPU any candidate needs (``None`` when there was no candidate)."""
    memory_budget_gib: float = 0.0
    """Memory per GPU a plan may need to count as fitting: the card less the profile's
    headroom (:func:`~gpuscale.costmodel.memory.memory_budget_bytes`)."""

    @property
    def best(self) -> PricedPlan | None:
        return self.top[0] if self.top else None


def _parts(est: StepEstimate, i: int) -> dict[str, float]:
    """The additive parts of plan ``i``'s step time (they sum to ``step_time_s``)."""
    return est.parts(i)


def _priced(
    plans: PlanBatch,
    est: StepEstimate,
    i: int,
    cluster: Cluster,
    model: ModelSpec,
    profile: Profile,
    fits: bool | None = None,
) -> PricedPlan:
    """Plan ``i`` of ``plans`` with its estimate; ``fits`` overrides the estimate's (which
    compares with the card, not the budget)."""
    plan = plans.plan(i)
    row = est.row(i)
    # Every prediction carries the error band of its validation regime and its extrapolations.
    band = band_for(model, cluster, plan, profile.framework or profile.name)
    row["uncertainty"] = band.around(row["tokens_per_s"]).as_dict()
    parts = _parts(est, i)
    # the same words `gpuscale estimate` gives this plan (one bottleneck rule)
    row["bottleneck"] = bottleneck(parts, float(est.mfu[i]))
    return PricedPlan(
        plan=plan,
        num_gpus=cluster.num_gpus,
        gpus_per_node=cluster.gpus_per_node,
        step_time_s=float(est.step_time_s[i]),
        tokens_per_s=float(est.tokens_per_s[i]),
        mfu=float(est.mfu[i]),
        memory_per_gpu_gib=float(est.memory_per_gpu_bytes[i]) / GIB,
        fits=bool(est.fits[i]) if fits is None else fits,
        parts_s=parts,
        estimate=row,
    )


def _preference(plans: PlanBatch, tokens_per_s: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """One int64 sort key per plan, smaller is better: speed first (to 1 part in 1e6, so that
    numerical near-ties count as ties), then the simpler plan (less model parallelism, lower ZeRO
    stage, less recompute, less interleaving). Plans that do not fit sort last."""
    top = tokens_per_s[fits].max() if fits.any() else 1.0
    slowness = np.where(fits, np.rint((1.0 - tokens_per_s / top) * 1e6), 2**21).astype(np.int64)
    model_parallel = np.minimum(plans.tp * plans.pp * plans.cp * plans.ep, 2**20 - 1)
    return (
        (np.clip(slowness, 0, 2**21) << 32)
        | (model_parallel << 12)
        | (plans.zero << 10)
        | (plans.recompute << 8)
        | np.minimum(plans.vp, 255)
    )


def _variants(runs: PlanRuns) -> int:
    """Most plans one layout (tp, pp, cp, ep) can have: its vp, micro-batch, ZeRO, expert split
    and recompute choices (counted on the runs' heads, which hold every value but the codes)."""
    heads = runs.heads
    variants = 1
    folded = (heads.etp != heads.tp).astype(np.int64)  # MoE experts split like TP or whole
    for column in (heads.vp, heads.micro_batch, heads.zero, folded, runs.codes):
        variants *= int(np.count_nonzero(np.bincount(column)))
    return variants


def _best_layouts(plans: PlanBatch, key: np.ndarray, k: int, variants: int) -> np.ndarray:
    """Indices of the best plan of each of the ``k`` best layouts (tp, pp, cp, ep) of ``plans``,
    best first. A layout has at most ``variants`` plans, so the ``k * variants`` best plans hold
    the ``k`` best layouts; only that shortlist is sorted."""
    candidates = np.arange(len(plans))
    if candidates.size == 0:
        return candidates
    size = min(candidates.size, k * variants)
    short = (
        candidates
        if size == candidates.size
        else candidates[np.argpartition(key[candidates], size - 1)[:size]]
    )
    short = short[np.argsort(key[short], kind="stable")]
    columns = (plans.tp[short], plans.pp[short], plans.cp[short], plans.ep[short])
    layout = np.ravel_multi_index(columns, tuple(int(c.max()) + 1 for c in columns))
    _, first = np.unique(layout, return_index=True)
    return short[np.sort(first)[:k]]


CHUNK = 16_384
"""Plans per cost-model call. The cost model runs some hundred element-wise passes over its
batch; at this size each temporary (128 KiB of float64) stays in the core's cache, where a
whole 100k-plan batch streams every pass through memory (``benchmarks/search_speed.py``: about
a tenth faster; 8k-32k measure alike). Plans are independent rows, so chunking changes no
result."""

UNFIT_BATCH = 1024
"""Plans that do not fit priced in the first round of the search for the nearest faster one
(each further round doubles the count; the benchmark cases find it among the first 2,500 by
memory)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Stepped:
    """Step estimates of a batch of plans, priced :data:`CHUNK` plans at a time."""

    starts: tuple[int, ...]
    batches: tuple[PlanBatch, ...]
    estimates: tuple[StepEstimate, ...]
    tokens_per_s: np.ndarray

    @classmethod
    def of(
        cls,
        workload: Workload,
        cluster: Cluster,
        profile: Profile,
        plans: PlanBatch,
        memory: np.ndarray,
    ) -> _Stepped:
        """``memory``: each plan's memory per GPU (bytes), already priced."""
        starts = tuple(range(0, len(plans), CHUNK))
        batches = tuple(plans.take(slice(i, i + CHUNK)) for i in starts)
        estimates = tuple(
            estimate_batch(
                workload.model,
                cluster,
                workload.training,
                batch,
                profile,
                memory_bytes=memory[i : i + CHUNK],
            )
            for i, batch in zip(starts, batches, strict=True)
        )
        tps = np.concatenate([np.asarray(e.tokens_per_s, dtype=float) for e in estimates])
        return cls(starts=starts, batches=batches, estimates=estimates, tokens_per_s=tps)

    def priced(
        self, i: int, cluster: Cluster, model: ModelSpec, profile: Profile, fits: bool | None
    ) -> PricedPlan:
        k = bisect.bisect_right(self.starts, i) - 1
        return _priced(
            self.batches[k], self.estimates[k], i - self.starts[k], cluster, model, profile, fits
        )


def _memory(model: ModelSpec, training: Training, runs: PlanRuns, profile: Profile) -> np.ndarray:
    """Memory per GPU (bytes) of every plan of ``runs`` (``training_memory(...).total`` of
    ``runs.plans()``), about :data:`CHUNK` plans at a time."""
    size = max(CHUNK // runs.codes.size, 1)
    heads = runs.heads
    return np.concatenate(
        [
            memory_total(
                model, training, heads.take(slice(i, i + size)), profile, recompute=runs.codes
            )
            for i in range(0, len(heads), size)
        ]
        or [np.zeros(0)]
    )


CEILING_SLACK = 1e-9
"""Relative slack on :func:`_ceiling`: a plan is skipped only when even its ceiling raised by
this share cannot reach the bar (guards the floor's non-negative terms against rounding)."""

FIRST_ROUND = 1024
"""Fitting plans with the highest ceilings priced first; each later round prices every plan
whose ceiling can still reach the top plans found so far."""


def _ceiling(
    workload: Workload, cluster: Cluster, profile: Profile, plans: PlanBatch
) -> np.ndarray:
    """Tokens/s no plan can exceed (:func:`~gpuscale.costmodel.step.step_time_floor_s`), with
    :data:`CEILING_SLACK`, :data:`CHUNK` distinct plans at a time."""
    model, training = workload.model, workload.training

    def ceiling(batch: PlanBatch) -> np.ndarray:
        parts = []
        for i in range(0, len(batch), CHUNK):
            chunk = batch.take(slice(i, i + CHUNK))
            floor = step_time_floor_s(model, cluster, training, chunk, profile)
            parts.append(chunk.global_batch * float(training.seq_len) / floor)
        return np.concatenate(parts) * (1.0 + CEILING_SLACK)

    # The floor ignores the ZeRO stage: price it once per distinct rest of the plan. A plan
    # without a finite floor has no ceiling (it is always priced).
    found = per_distinct(plans, STEP_FLOOR_COLUMNS, ceiling)
    return np.where(np.isnan(found), np.inf, found)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Top:
    """The best layouts of the fitting plans and what locates their estimates."""

    best: np.ndarray
    """Indices into the fitting plans, best first."""
    tokens_per_s: np.ndarray
    """Of every fitting plan; exact where priced, 0 elsewhere."""
    rounds: tuple[tuple[np.ndarray, _Stepped], ...]
    """Each round's fitting-plan indices (ascending) and their estimates."""

    def priced(
        self, i: int, cluster: Cluster, model: ModelSpec, profile: Profile, fits: bool
    ) -> PricedPlan:
        for index, stepped in self.rounds:
            j = int(np.searchsorted(index, i))
            if j < index.size and index[j] == i:
                return stepped.priced(j, cluster, model, profile, fits)
        raise KeyError(i)


def _top_layouts(
    workload: Workload,
    cluster: Cluster,
    profile: Profile,
    fitting: PlanBatch,
    memory: np.ndarray,
    top_k: int,
    variants: int,
) -> _Top:
    """The ``top_k`` best layouts of ``fitting`` (plans that fit, ``memory`` theirs), as
    :func:`_best_layouts` ranks them over every fitting plan, pricing the step only where it
    can matter. A plan is skipped when its ceiling is below ``top * (1 - (s + 2) / 1e6)``,
    with ``top`` the fastest plan and ``s`` the rounded slowness of the ``k``-th layout's best
    plan (:func:`_preference`): its slowness then rounds at least two steps above ``s``, so its
    key sorts after every chosen plan, and no skipped plan can be faster than ``top``."""
    n = len(fitting)
    tps = np.zeros(n)
    done = np.zeros(n, dtype=bool)
    if n > 2 * FIRST_ROUND:
        ceiling = _ceiling(workload, cluster, profile, fitting)
        take = ceiling >= np.partition(ceiling, n - FIRST_ROUND)[n - FIRST_ROUND]
    else:  # few enough to price at once: ceilings would cost about what they save
        ceiling = np.full(n, np.inf)
        take = np.ones(n, dtype=bool)
    rounds = []
    best = np.zeros(0, dtype=np.int64)
    while take.any():
        index = np.flatnonzero(take)
        stepped = _Stepped.of(workload, cluster, profile, fitting.take(index), memory[index])
        tps[index] = stepped.tokens_per_s
        rounds.append((index, stepped))
        done |= take
        priced = np.flatnonzero(done)
        batch = fitting.take(priced)
        key = _preference(batch, tps[priced], np.ones(priced.size, dtype=bool))
        chosen = _best_layouts(batch, key, top_k, variants)
        best = priced[chosen]
        bar = -np.inf
        if chosen.size == top_k:
            slowness = int(key[chosen[-1]] >> 32)
            bar = float(tps[priced].max()) * (1.0 - (slowness + 2) * 1e-6)
        take = ~done & (ceiling >= bar)
    return _Top(best=best, tokens_per_s=tps, rounds=tuple(rounds))


def _nearest_faster_unfit(
    workload: Workload,
    cluster: Cluster,
    profile: Profile,
    plans: PlanBatch,
    memory: np.ndarray,
    unfit: np.ndarray,
    target: float,
) -> PricedPlan | None:
    """Of the plans ``unfit`` (indices), the one that needs the least memory among those faster
    than ``target`` tokens/s (the first by index among equals); ``None`` when none is.

    Plans are priced in rounds of increasing memory, every plan up to a memory threshold at
    once, so the search stops as soon as a faster one is found: every plan that needs less
    memory has been priced by then. The answer is the one of pricing all of them."""
    if unfit.size == 0:
        return None
    needs = memory[unfit]
    done = np.zeros(unfit.size, dtype=bool)
    size = UNFIT_BATCH
    while not done.all():
        if size >= unfit.size:
            take = ~done
        else:
            threshold = np.partition(needs, size - 1)[size - 1]
            take = ~done & (needs <= threshold)
        size *= 2
        if not take.any():  # the threshold's ties were all taken in an earlier round
            continue
        done |= take
        index = unfit[take]
        if index.size > 2 * UNFIT_BATCH:
            # only a plan whose ceiling beats the target can be faster than it
            index = index[_ceiling(workload, cluster, profile, plans.take(index)) > target]
            if index.size == 0:
                continue
        stepped = _Stepped.of(workload, cluster, profile, plans.take(index), memory[index])
        faster = np.flatnonzero(stepped.tokens_per_s > target)
        if faster.size:
            i = int(faster[np.argmin(memory[index][faster])])
            return stepped.priced(i, cluster, workload.model, profile, False)
    return None


def search_count(
    workload: Workload,
    hardware: Hardware,
    profile: Profile,
    num_gpus: int,
    *,
    top_k: int = 5,
    space: SearchSpace | None = None,
) -> CountResult:
    """Enumerate, price and rank every plan on exactly ``num_gpus`` GPUs.

    Memory is priced for every plan; the step in full only where it can change the answer:
    for fitting plans whose ceiling (the step's floor from the math alone) can still reach the
    top layouts (:func:`_top_layouts`), and for the others as far as the nearest faster one
    needs (:func:`_nearest_faster_unfit`). The answer is the one of pricing every plan in full
    (tests/unit/test_planner_distinct.py), for a fraction of the work."""
    cluster = hardware.cluster(num_gpus)
    model, training = workload.model, workload.training
    runs = enumerate_runs(
        model,
        num_gpus,
        global_batch=workload.global_batch,
        seq_len=training.seq_len,
        space=space,
    )
    plans = runs.plans()
    if len(plans) == 0:
        return CountResult(
            num_gpus=num_gpus,
            evaluated=0,
            fitting=0,
            top=(),
            nearest_faster_unfit=None,
            min_memory_gib=None,
        )
    # an A100 has no FP8, a V100 no BF16: refused before any pricing, as estimate_batch does
    cluster.pace_device.peak(training.precision)
    memory = _memory(model, training, runs, profile)
    # Never recommend a plan at the edge of memory: it must fit the budget, not the card.
    capacity = min(cluster.device.memory_bytes, cluster.pace_device.memory_bytes)
    budget = memory_budget_bytes(capacity, profile)
    fits = (memory <= capacity) & (memory <= budget)
    fit = np.flatnonzero(fits)
    top: tuple[PricedPlan, ...] = ()
    target = 0.0
    if fit.size:
        found = _top_layouts(
            workload, cluster, profile, plans.take(fit), memory[fit], top_k, _variants(runs)
        )
        top = tuple(found.priced(int(i), cluster, model, profile, True) for i in found.best)
        target = found.tokens_per_s[found.best[0]] * 1.01
    unfit = _nearest_faster_unfit(
        workload, cluster, profile, plans, memory, np.flatnonzero(~fits), target
    )
    return CountResult(
        num_gpus=num_gpus,
        evaluated=len(plans),
        fitting=int(fit.size),
        top=top,
        nearest_faster_unfit=unfit,
        min_memory_gib=float(memory.min()) / GIB,
        memory_budget_gib=budget / GIB,
    )


def gpu_counts(max_gpus: int, gpus_per_node: int) -> list[int]:
    """1, 2, 4, ... inside a node, then whole nodes doubling: 1, 2, 4, 8, 16, ... ``max_gpus``."""
    require(max_gpus >= 1, f"GPU count must be >= 1, got {max_gpus}")
    check_whole_nodes(max_gpus, gpus_per_node, f"GPU count ({max_gpus})", None)
    counts = []
    c = 1
    while c < min(gpus_per_node, max_gpus):
        counts.append(c)
        c *= 2
    c = min(gpus_per_node, max_gpus)
    while c <= max_gpus:
        counts.append(c)
        c *= 2
    if counts[-1] != max_gpus:
        counts.append(max_gpus)
    return counts


def search_counts(
    workload: Workload,
    hardware: Hardware,
    profile: Profile,
    counts: Sequence[int],
    *,
    top_k: int = 5,
    space: SearchSpace | None = None,
    progress: Progress | None = None,
) -> tuple[CountResult, ...]:
    """:func:`search_count` at each of ``counts``."""
    out = []
    for done, n in enumerate(counts, start=1):
        out.append(search_count(workload, hardware, profile, n, top_k=top_k, space=space))
        if progress is not None:
            progress(done, len(counts))
    return tuple(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanResult:
    """The answer of ``gpuscale plan``."""

    objective: str
    num_gpus: int
    """GPUs available; cost and time objectives may use fewer."""
    ranked: tuple[PricedPlan, ...]
    why: str
    counts: tuple[CountResult, ...]
    """The search at every GPU count up to ``num_gpus`` (the last one is ``num_gpus``)."""
    memory_assumption: str = ""
    """The memory headroom every recommended plan keeps, in words."""

    @property
    def winner(self) -> PricedPlan:
        return self.ranked[0]

    @property
    def evaluated(self) -> int:
        return sum(c.evaluated for c in self.counts)

    @property
    def at_full(self) -> CountResult:
        return self.counts[-1]


def _objective_key(objective: str, p: PricedPlan) -> tuple[float, float]:
    if objective == "cost":
        return (round(p.gpu_seconds_per_token, 12), -p.tokens_per_s)
    if objective == "time":
        return (round(1.0 / p.tokens_per_s, 12), p.num_gpus)
    return (-p.tokens_per_s, 0.0)


def search(
    workload: Workload,
    hardware: Hardware,
    profile: Profile,
    num_gpus: int,
    *,
    objective: str = "throughput",
    top_k: int = 5,
    space: SearchSpace | None = None,
    progress: Progress | None = None,
) -> PlanResult:
    """The best plans for ``num_gpus`` GPUs.

    ``throughput`` ranks plans on exactly ``num_gpus`` GPUs by tokens/s. ``time`` and ``cost``
    may use fewer of the available GPUs (1, 2, 4, ... whole nodes): ``time`` minimizes the
    time to train (more GPUs are not always faster), ``cost`` the GPU-hours per token.
    """
    require(
        objective in OBJECTIVES,
        f"--objective must be one of {', '.join(OBJECTIVES)}, got '{objective}'",
    )
    require(top_k >= 1, f"--top must be >= 1, got {top_k}")
    counts = search_counts(
        workload,
        hardware,
        profile,
        gpu_counts(num_gpus, hardware.gpus_per_node),
        top_k=top_k,
        space=space,
        progress=progress,
    )
    full = counts[-1]
    pool = list(full.top) if objective == "throughput" else [p for c in counts for p in c.top]
    if not pool:
        raise no_fit_error(workload, hardware, counts)
    ranked = tuple(sorted(pool, key=lambda p: _objective_key(objective, p))[:top_k])
    card = catalog.gpu(hardware.gpu)
    return PlanResult(
        objective=objective,
        num_gpus=num_gpus,
        ranked=ranked,
        why=explain(ranked, counts, objective, full.memory_budget_gib or card.memory_gib),
        counts=counts,
        memory_assumption=headroom_assumption(card.memory_bytes, profile),
    )


def no_fit_error(
    workload: Workload, hardware: Hardware, counts: Sequence[CountResult]
) -> InputError:
    """``no plan fits ...``: the least memory any plan needs, against the card."""
    last = counts[-1]
    card = catalog.gpu(hardware.gpu)
    if last.min_memory_gib is None:
        return InputError(
            f"no valid plan for {workload.model.name} on {last.num_gpus} GPUs: a global batch of "
            f"{workload.global_batch} sequences cannot be split into micro-batch x DP when the "
            "model's heads, layers and sequence cap TP, PP and CP; try a larger --gbs or fewer "
            "--gpus"
        )
    budget = last.memory_budget_gib or card.memory_gib
    return InputError(
        f"no plan fits {workload.model.name} on {last.num_gpus} x {card.id}: the leanest needs "
        f"{last.min_memory_gib:.1f} GiB per GPU of the {budget:.1f} GiB budget "
        f"({card.memory_gib:g} GiB less headroom); add GPUs, use a larger card, or shorten --seq"
    )


def _biggest_difference(a: PricedPlan, b: PricedPlan) -> tuple[str, float]:
    """The part of the step where ``b`` spends the most extra seconds compared with ``a``."""
    diff = {k: b.parts_s[k] - a.parts_s.get(k, 0.0) for k in b.parts_s}
    name = max(diff, key=lambda k: diff[k])
    return name, diff[name]


def explain(
    ranked: Sequence[PricedPlan], counts: Sequence[CountResult], objective: str, card_gib: float
) -> str:
    """Why the winner wins: its bottleneck, what the runner-up loses, what memory rules out."""
    win = ranked[0]
    sentences = [f"{win.describe()} on {gpus(win.num_gpus)} is {bottleneck(win.parts_s, win.mfu)}."]
    rival = next((p for p in ranked[1:] if p.num_gpus == win.num_gpus), None)
    if rival is not None:
        name, extra = _biggest_difference(win, rival)
        gap = rival.step_time_s / win.step_time_s - 1.0
        if extra > 0:
            sentences.append(
                f"The best other layout ({rival.describe()}) is "
                f"{pct(gap) if gap >= 0.005 else 'under 1%'} slower, mostly from "
                f"{PART_NAMES[name]} (+{extra:.3g} s a step)."
            )
    full = counts[-1].best
    if objective != "throughput" and full is not None and full.num_gpus != win.num_gpus:
        speed = full.tokens_per_s / win.tokens_per_s
        if objective == "cost":
            extra_cost = full.gpu_seconds_per_token / win.gpu_seconds_per_token - 1.0
            sentences.append(
                f"All {full.num_gpus} GPUs would train {speed:.2f}x as fast but "
                f"cost {pct(extra_cost)} more per token."
            )
        else:
            sentences.append(
                f"All {full.num_gpus} GPUs would reach only {speed:.2f}x this throughput."
            )
    unfit = next((c.nearest_faster_unfit for c in counts if c.num_gpus == win.num_gpus), None)
    if unfit is not None:
        sentences.append(
            f"Memory rules out faster plans: {unfit.describe()} would be "
            f"{pct(unfit.tokens_per_s / win.tokens_per_s - 1.0)} faster but needs "
            f"{unfit.memory_per_gpu_gib:.1f} GiB per GPU of a {card_gib:.1f} GiB budget."
        )
    return " ".join(sentences)
