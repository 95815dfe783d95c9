"""The smallest set-up that holds a model, and the cheapest changes of settings that hold it on
the same GPUs: memory only, no step time.

Candidates are single-node counts ``1..gpus_per_node`` and whole nodes beyond. For each count the
layouts people reach for when memory is the problem are tried at once through the vectorized
memory model: ZeRO/FSDP data parallelism, tensor parallelism inside a node, and tensor x
pipeline parallelism (with ZeRO-1 over any remaining replicas). Pipelined plans run at least
``pp`` micro-batches per step, as 1F1B needs to fill the pipeline (Narayanan et al. 2021,
Sec. 2.2), so their activation memory is the steady state's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.activation_offload import offload_wait_s
from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.inference_memory import inference_memory
from gpuscale.costmodel.memory import TrainingMemory, memory_budget_bytes, training_memory
from gpuscale.costmodel.profile import Profile
from gpuscale.errors import InputError
from gpuscale.planner.enumerate import divisors, tp_degrees
from gpuscale.specs import Device, ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CODE
from gpuscale.specs.training import Inference, Training
from gpuscale.specs.units import GIB
from gpuscale.specs.validity import activation_offload_ok

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
    ep: int = 1
    """Expert parallelism of an MoE model (over the TP x DP ranks of a stage, experts whole)."""

    def layout(self) -> str:
        """``ZeRO-3 (FSDP)``, ``TP=8``, ``TP=8 x PP=14 x DP=2 ZeRO-1``, ``one GPU``."""
        if self.family == "single":
            return "one GPU"
        experts = f", EP={self.ep}" if self.ep > 1 else ""
        if self.family == "zero3":
            return "ZeRO-3 (FSDP)" + experts
        if self.family == "data-parallel":
            return f"DP={self.dp} ZeRO-{self.zero}" + experts
        parts = [f"TP={self.tp}"] if self.tp > 1 else []
        parts += [f"PP={self.pp}"] if self.pp > 1 else []
        if self.dp > 1:
            parts.append(f"DP={self.dp}" + (f" ZeRO-{self.zero}" if self.zero else ""))
        return " x ".join(parts) + experts

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
    """Every (count, tp, pp, ZeRO) layout tried, with the micro-batch and recompute of ``base``.
    An MoE model's experts are spread as far as a stage's ranks allow, whole on each rank
    (``etp`` 1, expert parallelism folded over TP: ``ep = gcd(experts, tp x dp)``), which holds
    the least expert weight per GPU any split of them can."""
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
    experts = {}
    if model.is_moe:
        experts = {"ep": np.gcd(model.num_experts, tp_a * dp_a), "etp": np.ones_like(tp_a)}
    return PlanBatch.from_arrays(
        tp=tp_a,
        pp=pp_a,
        dp=dp_a,
        zero=zero_a,
        **experts,
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
    gpus_per_node: int | None = None,
    max_gpus: int = MAX_GPUS,
    limit: int = 3,
) -> list[FitOption]:
    """Up to ``limit`` layouts, one per family, each with the fewest GPUs that hold it;
    ``gpus_per_node`` None is the GPU's NVLink domain."""
    plans = training_candidates(model, base, catalog.node_size(device, gpus_per_node), max_gpus)
    offload_ok = activation_offload_ok(
        model, plans.pp, plans.recompute, training.activation_offload_layers
    )
    if not offload_ok.all():  # layouts that cannot keep the offload are not offered
        plans = plans.take(np.flatnonzero(offload_ok))
    memory = training_memory(model, training, plans, profile=profile).total
    fits = memory <= device.memory_bytes
    family = _family(plans.tp, plans.pp, plans.dp, plans.zero)
    columns = {"tp": plans.tp, "pp": plans.pp, "dp": plans.dp, "zero": plans.zero, "ep": plans.ep}
    return _pick(family, plans.num_gpus, memory, fits, columns, limit)


def smallest_inference_setups(
    model: ModelSpec,
    inference: Inference,
    device: Device,
    profile: Profile,
    *,
    gpus_per_node: int | None = None,
    max_gpus: int = MAX_GPUS,
    limit: int = 3,
) -> list[FitOption]:
    """Tensor parallelism inside a node, then pipeline stages across nodes; ``gpus_per_node``
    None is the GPU's NVLink domain."""
    per_node = catalog.node_size(device, gpus_per_node)
    tps = tp_degrees(model, TP_CANDIDATES[per_node >= TP_CANDIDATES])
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
    if plan.recompute == "full" or training.activation_offload_layers:
        return None  # (an offload runs without recompute: activation_offload_ok)
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


@dataclass(frozen=True, kw_only=True, slots=True)
class MemorySaver:
    """A way to hold the model on the same GPUs by changing how it trains, with its memory."""

    key: str
    """Stable id: ``loss-chunked``, ``adamw-8bit``, ``recompute-full``, ``lora``, ... or the
    ``+``-joined keys of a combination."""
    change: str
    """What to change, in words with the ``fit`` flag(s): ``8-bit AdamW (--optimizer
    adamw-8bit)``."""
    cost: str
    """What it costs in speed or in what is trained, with its source."""
    memory_bytes: float
    """Peak per GPU (device total) with the change."""
    saved_bytes: float
    """Less than the current settings need."""
    fits: bool
    """Within the planner's memory budget (the card less the profile's headroom)."""


_SAVERS: tuple[tuple[str, str, str], ...] = (
    (
        "loss-chunked",
        "chunked cross-entropy (--loss chunked)",
        "no fp32 copy of the s x vocab logits; same result (torchtune CEWithChunkedOutputLoss)",
    ),
    (
        "adamw-8bit",
        "8-bit AdamW (--optimizer adamw-8bit)",
        "states quantized block-wise; matches 32-bit Adam on LM fine-tuning (Dettmers et al. "
        "2022, arXiv:2110.02861)",
    ),
    (
        "recompute-selective",
        "selective recompute (--recompute selective)",
        "re-runs the attention core in backward, a few % more compute (Korthikanti et al. "
        "2022, Sec. 5)",
    ),
    (
        "pure-bf16",
        "pure bf16, no fp32 master copy (--pure-bf16)",
        "small updates can round away without the fp32 master (Micikevicius et al. 2018)",
    ),
    (
        "adafactor",
        "Adafactor (--optimizer adafactor)",
        "factored second moment, no first moment: different convergence (Shazeer & Stern 2018)",
    ),
    (
        "recompute-full",
        "full recompute (--recompute full)",
        "one more forward per step, about a third more compute (Korthikanti et al. 2022, Sec. 4.3)",
    ),
    (
        "activation-offload-layers",
        "activation offloading of the first {layers} layers (--activation-offload-layers {layers})",
        "those layers' saved activations cross this GPU's host link each micro-batch: {wait} "
        "(Megatron --cpu-offloading-num-layers)",
    ),
    (
        "activation-offload",
        "activation offloading (--activation-offload)",
        "saved activations cross PCIe each layer; hidden only when compute is long enough",
    ),
    (
        "offload-optimizer",
        "optimizer offload to host memory (--offload optimizer)",
        "optimizer step on the CPU, gradients over PCIe (Ren et al. 2021, ZeRO-Offload)",
    ),
    (
        "lora",
        "LoRA (--finetune lora)",
        "trains low-rank adapters, not the weights (Hu et al. 2021)",
    ),
    (
        "qlora",
        "QLoRA (--finetune qlora)",
        "4-bit NF4 base dequantized in every matmul, slower steps (Dettmers et al. 2023)",
    ),
    (
        "offload-params",
        "parameter offload to host memory (--offload params)",
        "weights stream over PCIe every step: the slowest option (ZeRO-Infinity; FSDP CPUOffload)",
    ),
)
"""Candidate changes, least intrusive first: that order is what "cheapest" means here (speed
and training semantics before trainable weights)."""


def _apply(key: str, training: Training, plan: Plan) -> tuple[Training, Plan] | None:
    """``training``/``plan`` with one change; ``None`` where it changes nothing or does not
    apply to these settings."""
    t: dict[str, object] = {}
    p: dict[str, object] = {}
    if key == "loss-chunked":
        if training.loss != "standard" or training.task != "lm":
            return None
        t["loss"] = "chunked"
    elif key in ("adamw-8bit", "adafactor"):
        if training.optimizer != "adamw" or training.paged_optimizer:
            return None
        t["optimizer"] = key
    elif key == "pure-bf16":
        # pure 16-bit is a bf16 recipe: ``fit`` refuses --pure-bf16 with other precisions
        if not training.master_weights or training.precision != "bf16":
            return None
        t["master_weights"] = False
    elif key in ("recompute-selective", "recompute-full"):
        recompute = key.removeprefix("recompute-")
        if plan.recompute in (recompute, "full") or training.activation_offload_layers:
            return None  # (an offload runs without recompute: activation_offload_ok)
        p["recompute"] = recompute
    elif key == "activation-offload":
        if training.activation_offload or training.activation_offload_layers:
            return None
        t["activation_offload"] = True
    elif key == "activation-offload-layers":
        return None  # a layer count, chosen per settings by _fewest_offloaded_layers
    elif key == "offload-optimizer":
        if training.offload_optimizer or training.paged_optimizer:
            return None
        t["offload_optimizer"] = True
    elif key == "offload-params":
        if training.offload_params or training.paged_optimizer:
            return None
        t["offload_params"] = True
    elif key in ("lora", "qlora"):
        if training.finetune in (key, "qlora"):
            return None
        t.update(finetune=key, optimizer_in_backward=False)
    try:
        return dataclasses.replace(training, **t), dataclasses.replace(plan, **p)  # type: ignore[arg-type]
    except InputError:
        return None


def cheaper_ways_to_fit(
    model: ModelSpec,
    training: Training,
    plan: Plan,
    device: Device,
    profile: Profile,
    *,
    limit: int = 4,
) -> list[MemorySaver]:
    """The least intrusive changes (:data:`_SAVERS` order) that hold the model on the GPUs of
    ``plan``, each with its memory; when no single change fits, the cheapest combination that
    does (changes added in that order). Empty when the settings fit already or nothing does."""
    budget = memory_budget_bytes(device.memory_bytes, profile)
    current = float(
        training_memory(model, training, PlanBatch.from_plans([plan]), profile).total[0]
    )
    if current <= budget:
        return []
    variants: list[tuple[str, str, str, Training, Plan]] = []
    for key, change, cost in _SAVERS:
        applied = _apply(key, training, plan)
        if applied is not None:
            variants.append((key, change, cost, *applied))
    memory = _memory_of(model, profile, [(t, p) for *_, t, p in variants])
    offloaded = _fewest_offloaded_layers(model, training, plan, profile, budget)
    if not variants and offloaded is None:
        return []
    singles = [
        MemorySaver(
            key=key,
            change=change,
            cost=cost,
            memory_bytes=float(m),
            saved_bytes=current - float(m),
            fits=bool(m <= budget),
        )
        for (key, change, cost, _, _), m in zip(variants, memory, strict=True)
    ]
    if offloaded is not None:
        _, change, cost = next(s for s in _SAVERS if s[0] == "activation-offload-layers")
        layers, m = offloaded
        t = dataclasses.replace(training, activation_offload_layers=layers)
        one = PlanBatch.from_plans([plan])
        wait = float(
            offload_wait_s(
                model, device, t, one, profile, layer_compute(model, device, t, one, profile)
            )[0]
        )
        hidden = (
            "hidden behind the other layers' compute"
            if wait == 0
            else (f"about {wait:,.2f} s a micro-batch of waiting")
        )
        singles.append(
            MemorySaver(
                key="activation-offload-layers",
                change=change.format(layers=layers),
                cost=cost.format(wait=hidden),
                memory_bytes=m,
                saved_bytes=current - m,
                fits=True,
            )
        )
    rank = {key: i for i, (key, _, _) in enumerate(_SAVERS)}
    options = [s for s in singles if s.fits]
    combo = _stack(model, training, plan, profile, singles, budget, current)
    if combo is not None and len(combo.key.split("+")) > 1:
        options.append(combo)

    def intrusiveness(saver: MemorySaver) -> int:
        return max(rank[key] for key in saver.key.split("+"))

    return sorted(options, key=intrusiveness)[:limit]


def _fewest_offloaded_layers(
    model: ModelSpec, training: Training, plan: Plan, profile: Profile, budget: float
) -> tuple[int, float] | None:
    """The fewest layers whose activations, offloaded (``--activation-offload-layers``), bring
    the peak within ``budget``, and that peak; ``None`` where the settings cannot offload
    (pipeline, recompute or another offload: ``check_activation_offload_layers``) or no count
    fits. The device peak falls as layers leave it, so a bisection finds the count; the
    fewest also fill the host least, and must fit in what a GPU may use of it."""
    if training.activation_offload or training.activation_offload_layers:
        return None
    if not activation_offload_ok(model, plan.pp, RECOMPUTE_CODE[plan.recompute], 1):
        return None

    def memory(layers: int) -> TrainingMemory:
        t = dataclasses.replace(training, activation_offload_layers=layers)
        return training_memory(model, t, PlanBatch.from_plans([plan]), profile)

    low, high = 1, model.num_layers - 1
    if float(memory(high).total[0]) > budget:
        return None
    while low < high:
        middle = (low + high) // 2
        if float(memory(middle).total[0]) <= budget:
            high = middle
        else:
            low = middle + 1
    fewest = memory(low)
    if float(fewest.host[0]) > profile.const("host_memory_gib_per_gpu") * GIB:
        return None
    return low, float(fewest.total[0])


def _with(keys: list[str], training: Training, plan: Plan) -> tuple[Training, Plan] | None:
    t, p = training, plan
    for key in keys:
        applied = _apply(key, t, p)
        if applied is None:
            return None
        t, p = applied
    return t, p


def _stack(
    model: ModelSpec,
    training: Training,
    plan: Plan,
    profile: Profile,
    singles: list[MemorySaver],
    budget: float,
    current: float,
) -> MemorySaver | None:
    """Changes stacked until the total fits: each round takes the cheapest change that lowers
    the running peak (a change can only help once another has moved the peak, e.g. recompute
    once the optimizer step no longer sets it); then every change the others make unneeded is
    dropped, the most intrusive first."""
    chosen: list[MemorySaver] = []
    t, p, running = training, plan, current
    while running > budget:
        for saver in singles:
            if saver in chosen:
                continue
            applied = _apply(saver.key, t, p)
            if applied is None:
                continue
            m = float(_memory_of(model, profile, [applied])[0])
            if m < running:
                chosen.append(saver)
                (t, p), running = applied, m
                break
        else:
            return None
    for saver in reversed(chosen[:-1]):
        rest = [c.key for c in chosen if c is not saver]
        applied = _with(rest, training, plan)
        if applied is not None:
            m = float(_memory_of(model, profile, [applied])[0])
            if m <= budget:
                chosen.remove(saver)
                running = m
    return MemorySaver(
        key="+".join(c.key for c in chosen),
        change=" + ".join(c.change for c in chosen),
        cost="; ".join(c.cost for c in chosen),
        memory_bytes=running,
        saved_bytes=current - running,
        fits=True,
    )


def _memory_of(
    model: ModelSpec, profile: Profile, variants: list[tuple[Training, Plan]]
) -> np.ndarray:
    """Peak per GPU of each (training, plan): one cost-model call each, as each variant has
    its own :class:`Training` (a handful of calls). A variant whose offloaded bytes exceed the
    host memory a GPU can use counts as infinitely large: it does not fit anywhere."""
    out = np.empty(len(variants))
    host_cap = profile.const("host_memory_gib_per_gpu") * GIB
    for i, (t, p) in enumerate(variants):
        memory = training_memory(model, t, PlanBatch.from_plans([p]), profile)
        out[i] = memory.total[0] if memory.host[0] <= host_cap else np.inf
    return out
