"""Training memory per GPU, vectorized over many plans.

The peak of the worst GPU (the first pipeline stage, which holds the most micro-batches in
flight, or the last, which holds the logits, whichever is larger) is the sum of

- model states (:mod:`gpuscale.costmodel.model_states`) after tensor, pipeline, expert and ZeRO
  partitioning (Rajbhandari et al. 2020, ZeRO, Sec. 5: stage 1 shards optimizer states over the
  data-parallel group, stage 2 also gradients, stage 3 also weights; FSDP = stage 3), plus the
  units a stage-3 rank gathers (the computed unit and the prefetched next one; Zhao et al. 2023,
  PyTorch FSDP, arXiv:2304.11277, Sec. 3.2.1);
- activations (:mod:`gpuscale.costmodel.activations`);
- framework overhead: the CUDA context, NCCL buffers and caching-allocator slack, named
  constants of the calibration profile (``memory_*`` in ``generic.yaml``).

Gradients and activations peak at different times when no gradient buffer persists across the
step (one micro-batch, no DDP buckets or Megatron grad buffer, i.e. a single GPU or FSDP without
accumulation): backward frees each layer's activations as it creates that layer's gradients. The
peak then holds the larger of the two, and :attr:`TrainingMemory.overlap` is the credit.

CPU offload (Ren et al. 2021, ZeRO-Offload, arXiv:2101.06840, Sec. 4) moves gradients and
optimizer states to the host; parameter offload (ZeRO-Infinity; FSDP ``CPUOffload``) moves the
weights too and keeps only the gathered units on the device. Paged optimizers (bitsandbytes)
keep their states in CUDA unified memory that is evicted to the host under pressure. All three
appear in :attr:`TrainingMemory.host`, not in the device total.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields

import numpy as np

from gpuscale.costmodel.activations import StageActivations, stage_activations_runs
from gpuscale.costmodel.model_states import (
    DTYPE_BYTES,
    block_linear_weights,
    grad_buffer_bytes,
    param_split,
    trainable_bytes,
)
from gpuscale.costmodel.params import layer_params
from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.ring_attention import ring_shapes, ring_workspace_bytes
from gpuscale.specs import ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import expert_replicas
from gpuscale.specs.training import Training

GIB = float(2**30)


@dataclass(frozen=True, slots=True)
class TrainingMemory:
    """Bytes per GPU of the worst GPU of every plan; each field is an array over the plans.

    ``weights + gradients + optimizer + activations - overlap = allocated`` (live tensors, what
    ``torch.cuda.max_memory_allocated`` reports) and ``allocated + overhead = total`` (what the
    device must hold, as ``nvidia-smi`` shows it).
    """

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    """Master weights (if any) and optimizer states."""
    activations: np.ndarray
    """Saved for backward, all micro-batches in flight, plus the backward working set."""
    overlap: np.ndarray
    """Reconciles the columns with the peak: the credit when gradients and activations do not
    peak together (see module docstring), less the optimizer step's intermediates or the
    loading transient where one of those moments is the peak instead (activations are freed
    by then), so it can be negative."""
    allocated: np.ndarray
    reserved: np.ndarray
    """``allocated`` times the allocator's fragmentation (``torch.cuda.max_memory_reserved``)."""
    overhead: np.ndarray
    """``total - allocated``: allocator slack, CUDA context, NCCL buffers."""
    total: np.ndarray
    host: np.ndarray
    """Bytes kept in host memory per GPU (offloaded or paged states); not part of ``total``."""
    stage: np.ndarray
    """Which stage is the worst: 0 first, 1 last."""

    def __len__(self) -> int:
        return int(self.total.shape[0])

    def row(self, i: int) -> dict[str, float]:
        """Plan ``i`` as ``{field: bytes}``."""
        return {f.name: float(getattr(self, f.name)[i]) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class _States:
    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    host: np.ndarray
    unit: np.ndarray
    """One gathered layer unit of FSDP/ZeRO-3 with reshard-after-forward (else zero)."""
    step_temp: np.ndarray
    """Intermediates of the optimizer step (foreach AdamW: one copy of the states updated)."""
    load: np.ndarray
    """Live bytes while the model is loaded (the 16-bit base of a quantized model built on
    the device; zero when weights stream in)."""


def _model_states(
    model: ModelSpec, training: Training, plans: PlanBatch, profile: Profile
) -> tuple[_States, _States]:
    """Model states of the first and of the last pipeline stage (the same GPU when ``pp == 1``);
    the stage-independent arrays are computed once for both."""
    ps = param_split(model, training)
    per = trainable_bytes(model, training)
    if training.master_weights and training.precision != "fp32":
        per = dataclasses.replace(per, gradients=grad_buffer_bytes(training, profile))
    word = DTYPE_BYTES["fp32"] if training.precision == "fp32" else DTYPE_BYTES["bf16"]
    pw = per.weights
    pp = plans.pp
    inv_tp = 1.0 / plans.tp
    inv_tpe = 1.0 / (plans.etp * plans.ep)
    shard = (plans.dp * plans.cp).astype(float)
    inv_shard = 1.0 / shard
    inv_shard_expert = 1.0 / expert_replicas(plans)
    layers = stage_layers(model, plans).heaviest  # uneven splits: costmodel/pipeline.py
    single = pp == 1

    def factors(on: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Multipliers of the dense and expert parts: 1/shard where ZeRO shards them."""
        return np.where(on, inv_shard, 1.0), np.where(on, inv_shard_expert, 1.0)

    zero3 = plans.zero == 3
    f3, f3e = factors(zero3)
    f2, f2e = factors(plans.zero >= 2)
    f1, f1e = factors(plans.zero >= 1)

    # Per-GPU bytes or parameters of the blocks a stage holds (split by TP, experts by EP too).
    dense_tp = ps.trainable_layer_dense * inv_tp
    expert_tpe = ps.trainable_layer_expert * inv_tpe
    lt = layers * dense_tp
    lte = layers * expert_tpe
    lf = layers * (ps.frozen_layer_dense_bytes * inv_tp)
    lfe = layers * (ps.frozen_layer_expert_bytes * inv_tpe)
    trainable_layer = dense_tp + expert_tpe

    # A stage-3 rank gathers the unit it computes and prefetches the next (Zhao et al. 2023,
    # Sec. 3.3.2). The root unit -- everything outside the blocks: embedding, final norm, head --
    # is not resharded after forward, since backward needs it first (FSDP1 and FSDP2 both skip
    # the root's post-forward reshard), so it stays gathered for the whole step. Float8
    # all-gathers move (and keep gathered) the blocks' linear weights in 1 byte.
    fp8 = 1.0
    if training.fp8_all_gather and not training.is_lora:
        share = block_linear_weights(model) / max(layer_params(model), 1)
        fp8 = (share * DTYPE_BYTES["fp8"] + (1.0 - share) * word) / word
    layer_unit = (ps.trainable_layer_dense * pw * fp8 + ps.frozen_layer_dense_bytes) * inv_tp + (
        ps.trainable_layer_expert * pw * fp8 + ps.frozen_layer_expert_bytes
    ) * inv_tpe
    # Without reshard-after-forward (off by default under pipeline parallelism, torchtitan
    # ``parallelize_llama``) every layer of the stage stays gathered from its forward to its
    # backward; and torch.distributed.pipelining runs the non-last micro-batches' backward
    # with ``set_requires_gradient_sync(False)``, so FSDP2 accumulates each parameter's
    # unsharded gradient, upcast to the reduce dtype (``to_accumulated_grad_if_needed``).
    reshard = single if training.reshard_after_forward is None else training.reshard_after_forward
    kept_layers = np.where(reshard, 0.0, layers * layer_unit)
    unit = np.where(reshard, layer_unit, 0.0)
    grad_word = DTYPE_BYTES["fp32"] if training.master_weights else word
    accumulated = np.where(
        ~single & ~np.asarray(reshard) & (plans.num_microbatches > 1),
        layers * trainable_layer * grad_word,
        0.0,
    )
    grad_unit = trainable_layer * per.gradients
    stage3 = zero3 & (shard > 1)
    # torch.optim AdamW(foreach=True), PyTorch's default on CUDA: ``_foreach_sqrt`` of the
    # second moments allocates a list as large as the states of this GPU before the update.
    foreach = (
        training.optimizer == "adamw"
        and training.foreach_optimizer
        and not training.offload_optimizer
        and not training.optimizer_in_backward
        and not training.paged_optimizer
    )
    state_word = DTYPE_BYTES["fp32"] if (training.master_weights or word == 4.0) else word
    # With the embedding and head as units of their own, the embedding is resharded after its
    # forward; the head, computed last, is still gathered when backward starts.
    embedding = 0.0 if training.separate_embedding_units else 1.0
    tied_t = 0 if training.is_lora else ps.tied_table
    tied_f = ps.tied_table * word if training.is_lora else 0.0
    outside_parts = {
        "t": (ps.trainable_first, ps.trainable_last, tied_t),
        "f": (ps.frozen_first_bytes, ps.frozen_last_bytes, tied_f),
        "root": (
            embedding * (ps.trainable_first * pw + ps.frozen_first_bytes),
            ps.trainable_last * pw + ps.frozen_last_bytes,
            embedding * ps.tied_table * word,
        ),
        "load": (ps.frozen_first_bytes, ps.frozen_last_bytes, ps.tied_table * word),
    }
    any_single = bool(single.any())

    # Transformer Engine's FP8 weight cache: an FP8 copy and its transpose of every linear weight
    # the GPU holds, kept across the step's micro-batches (TE ``is_first_microbatch``).
    fp8_cache = None
    if training.precision == "fp8" and training.fp8_weight_cache and not training.is_lora:
        linear = block_linear_weights(model)
        expert_linear = ps.trainable_layer_expert * (linear / max(layer_params(model), 1))
        dense_linear = linear - expert_linear
        per_layer = dense_linear * inv_tp + expert_linear * inv_tpe
        fp8_cache = np.where(zero3, 0.0, layers * per_layer * 2 * DTYPE_BYTES["fp8"])

    out = []
    for stage in ("first", "last"):

        def outside(key: str, stage: str = stage) -> np.ndarray:
            first, last, tied = outside_parts[key]
            own = first if stage == "first" else last
            if not any_single:  # the same values as the choice below, without it
                return own * inv_tp
            return np.where(single, first + last - tied, own) * inv_tp

        t_dense = lt + outside("t")
        f_dense = lf + outside("f")
        weights = (t_dense * pw + f_dense) * f3 + (lte * pw + lfe) * f3e
        gradients = (t_dense * f2 + lte * f2e) * per.gradients
        optimizer_params = t_dense * f1 + lte * f1e
        optimizer = optimizer_params * per.optimizer
        if fp8_cache is not None:
            weights = weights + fp8_cache
        host = np.zeros_like(weights)
        stage_unit = unit
        if training.offload_params:
            resident = outside("root") + kept_layers
            weights_full = (t_dense + lte) * pw + f_dense + lfe
            host = host + weights
            weights = np.minimum(resident, weights_full)
        else:
            if stage3.any():
                resident = outside("root") + kept_layers
                weights = np.where(stage3, weights + resident, weights)
                gradients = np.where(stage3, gradients + accumulated, gradients)
            stage_unit = np.where(stage3, unit, 0.0)
        if training.offload_optimizer:
            # Each unit's gradients pass through the device on their way to the host.
            host = host + gradients + optimizer
            gradients = np.minimum(grad_unit, (t_dense + lte) * per.gradients)
            optimizer = np.zeros_like(optimizer)
        elif stage3.any():
            gradients = np.where(stage3, gradients + grad_unit, gradients)
        if training.optimizer_in_backward:
            gradients = (
                np.full_like(gradients, ps.largest_trainable_tensor * per.gradients) * inv_tp
            )
        step_temp = optimizer_params * state_word if foreach else np.zeros_like(optimizer)
        if training.grad_reduce_in_bf16 and training.master_weights:
            # A bf16 gradient buffer is copied to fp32 for the step (Megatron-Core
            # optimizer.py ``main_param.grad = model_param.main_grad.float()``; the distributed
            # optimizer's ``shard_main_param.grad = shard_model_grad.float()``, its shard).
            step_temp = step_temp + optimizer_params * DTYPE_BYTES["fp32"]
        load = np.zeros_like(weights)
        if training.finetune == "qlora" and training.load_16bit_on_device:
            load = layers * layer_params(model) * word * inv_tp + outside("load")
        if training.paged_optimizer:
            host = host + optimizer
            optimizer = np.zeros_like(optimizer)
        out.append(
            _States(
                unit=stage_unit,
                weights=weights,
                gradients=gradients,
                optimizer=optimizer,
                host=host,
                step_temp=step_temp,
                load=load,
            )
        )
    return out[0], out[1]


def _gradients_transient(plans: PlanBatch) -> np.ndarray:
    """True where no gradient buffer outlives backward (see module docstring)."""
    replicas = plans.dp * plans.cp
    return (
        (plans.num_microbatches == 1)
        & (plans.tp == 1)
        & (plans.pp == 1)
        & ((replicas == 1) | (plans.zero == 3))
    )


def _ring_workspace(
    model: ModelSpec, training: Training, plans: PlanBatch, profile: Profile
) -> np.ndarray:
    """The buffers PyTorch's ring attention (``context_parallel``; profile switch
    ``cp_ring_unfused_passes``) keeps live in a layer's backward: all-gathered or received K/V,
    fp32 dQ/dK/dV accumulators and send buffers (costmodel/ring_attention.py, counted from
    ``_templated_ring_attention_backward``). Transformer Engine's ring (the generic profile) is
    not counted here."""
    if profile.const("cp_ring_unfused_passes") <= 0 or not bool(np.any(plans.cp > 1)):
        return np.zeros(len(plans))
    tokens = plans.micro_batch * training.seq_len / plans.cp
    shapes = ring_shapes(model, tokens, plans.tp, profile.const("cp_kv_heads_repeated") > 0)
    word = DTYPE_BYTES["fp32"] if training.precision == "fp32" else DTYPE_BYTES["bf16"]
    return ring_workspace_bytes(shapes, plans.cp, word, profile.const("cp_kv_all_gather") > 0)


def _plus_cached(backward: np.ndarray, acts: StageActivations) -> np.ndarray:
    """``backward + acts.cached``, the same values for less work where the cache is zero on
    every plan (no loss on the stage) or never chosen to be (the loss on every plan)."""
    if acts.cuda_graphs:
        return backward + acts.cached
    has_loss = acts.loss > 0
    if not has_loss.any():  # adding +0.0 to the non-negative backward peak changes nothing
        return backward
    if has_loss.all():
        return backward + np.minimum(acts.workspace, acts.loss)
    return backward + acts.cached


def _peaks(
    model: ModelSpec,
    training: Training,
    runs: PlanBatch,
    codes: np.ndarray | None,
    prof: Profile,
    every_field: bool,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The first and the last stage's fields (only ``total`` unless ``every_field``) of every
    plan of ``runs`` with each recompute code of ``codes`` (``None``: its own): 2-D, one row
    per code and one column per plan of ``runs`` (a field that does not depend on the recompute
    choice may be 1-D, one element per plan of ``runs``)."""
    context = prof.const("memory_cuda_context_gib") * GIB
    nccl = prof.const("memory_nccl_buffers_gib") * GIB
    fragmentation = prof.const("memory_allocator_fragmentation")
    transient_grads = _gradients_transient(runs)
    transient = bool(transient_grads.any())
    ring = _ring_workspace(model, training, runs, prof)
    # adding +0.0 to a sum of non-negative terms leaves it as it is: skipped where no ring runs
    ring_live = bool(ring.any())
    comm_buffers = np.where(runs.num_gpus > 1, nccl, 0.0)

    per_stage = []
    # The first and the last stage (see _model_states and stage_activations_runs).
    both = zip(
        _model_states(model, training, runs, prof),
        stage_activations_runs(model, framework_allocation(training, prof), runs, codes),
        strict=True,
    )
    for states, acts in both:
        unit = states.unit
        two_units = 2.0 * unit
        gradients = states.gradients
        optimizer = states.optimizer
        # Backward peaks at the loss (its working set, one layer unit) or inside a layer (its
        # working set, two units); CUDA graphs hold both working sets (see activations).
        at_loss = acts.stored + acts.loss + unit
        in_layer = acts.stored + acts.workspace
        if ring_live:
            in_layer = in_layer + ring
        at_layer = in_layer + two_units
        if training.cuda_graphs:
            at_loss = at_layer = in_layer + acts.loss + two_units
        loss_wins = at_loss > at_layer
        units = np.where(loss_wins, unit, two_units)
        weights = states.weights + units
        activations = np.maximum(at_loss, at_layer) - units
        backward = weights + gradients + optimizer + activations
        overlap = None
        if transient or every_field:
            overlap = np.where(transient_grads, np.minimum(gradients, activations), 0.0)
            # subtracting +0.0 leaves every value as it is: skipped where nothing overlaps
            backward = backward - overlap
        # The step's peak is in backward, or in the optimizer step (activations freed, every
        # gradient and the step's intermediates live), or while loading a quantized model.
        step = states.weights + states.gradients + states.optimizer + states.step_temp
        load = states.load
        allocated = np.maximum(backward, step)
        if load.any():  # the maximum with +0.0 of a non-negative peak is that peak
            allocated = np.maximum(allocated, load)
        # The allocator's cache of layer blocks (``acts.cached``) counts where backward is the
        # peak; the optimizer step and loading reuse the freed activation blocks.
        reserved = np.maximum(_plus_cached(backward, acts), np.maximum(step, load)) * fragmentation
        overhead = reserved - allocated + context + comm_buffers
        total = allocated + overhead
        if not every_field:
            per_stage.append({"total": total})
            continue
        assert overlap is not None
        per_stage.append(
            {
                "weights": weights,
                "gradients": gradients,
                "optimizer": optimizer,
                "activations": activations,
                "overlap": overlap + backward - allocated,
                "allocated": allocated,
                "reserved": reserved,
                "overhead": overhead,
                "total": total,
                "host": states.host + acts.host,
            }
        )
    first, last = per_stage
    return first, last


def framework_allocation(training: Training, profile: Profile) -> Training:
    """``training`` with what the framework's profile says of how it saves activations
    (``low_precision_saved_inputs``: Transformer Engine keeps the low-precision input casts)."""
    if training.low_precision_saved_inputs or profile.const("low_precision_saved_inputs") == 0:
        return training
    return dataclasses.replace(training, low_precision_saved_inputs=True)


def training_memory(
    model: ModelSpec, training: Training, plans: PlanBatch, profile: Profile | None = None
) -> TrainingMemory:
    """Peak memory per GPU of every plan (numpy over the plans, no Python loop over them)."""
    prof = profile if profile is not None else load_profile("generic")
    first, last = _peaks(model, training, plans, None, prof, every_field=True)
    # one row: the plans (each with its own recompute choice)
    worst_last = last["total"] > first["total"]
    out = {name: np.where(worst_last, last[name], first[name])[0] for name in first}
    return TrainingMemory(**out, stage=worst_last.astype(np.int64)[0])


def memory_total(
    model: ModelSpec,
    training: Training,
    plans: PlanBatch,
    profile: Profile | None = None,
    *,
    recompute: np.ndarray | None = None,
) -> np.ndarray:
    """``training_memory(...).total`` alone, bit for bit, for less work (the planner prices
    every candidate's memory and needs only this). With ``recompute`` (codes of
    :data:`~gpuscale.specs.plan.RECOMPUTE_CODE`), the plans priced are every plan of ``plans``
    with each of those codes in turn, element ``i * len(recompute) + j`` being plan ``i`` with
    code ``j`` (``plans``' own recompute column is not read): everything but the stored layer
    is then priced once for all the codes."""
    prof = profile if profile is not None else load_profile("generic")
    codes = None if recompute is None else np.asarray(recompute, dtype=np.int64)
    first, last = _peaks(model, training, plans, codes, prof, every_field=False)
    worst = np.where(last["total"] > first["total"], last["total"], first["total"])
    if worst.shape[0] == 1:
        return worst[0]
    # interleave the codes' rows (plan-major order) with long strided copies
    out = np.empty(worst.size)
    rows = worst.shape[0]
    for j in range(rows):
        out[j::rows] = worst[j]
    return out


def plan_memory(
    model: ModelSpec, training: Training, plan: Plan, profile: Profile | None = None
) -> dict[str, float]:
    """:func:`training_memory` of one :class:`Plan`, as ``{field: bytes}``."""
    return training_memory(model, training, PlanBatch.from_plans([plan]), profile).row(0)


def host_overflow(host_bytes: float, profile: Profile) -> str | None:
    """The sentence saying that offloaded states and activations need more host memory than a
    GPU may use (profile ``host_memory_gib_per_gpu``); ``None`` when they fit."""
    cap = profile.const("host_memory_gib_per_gpu") * GIB
    if host_bytes <= cap:
        return None
    return (
        f"the offloaded states and activations need {host_bytes / GIB:,.1f} GiB of host memory "
        f"per GPU, more than the {cap / GIB:,.0f} GiB a GPU may use (profile "
        "host_memory_gib_per_gpu)"
    )


def memory_budget_bytes(capacity_bytes: float, profile: Profile | None = None) -> float:
    """Bytes per GPU a recommended plan may need: the card less the profile's headroom
    (``memory_headroom_fraction``, the allocator and model error a plan must leave room for)."""
    prof = profile if profile is not None else load_profile("generic")
    return capacity_bytes * (1.0 - prof.const("memory_headroom_fraction"))


def headroom_assumption(capacity_bytes: float, profile: Profile | None = None) -> str:
    """One line saying what :func:`memory_budget_bytes` assumes, for a command's output."""
    prof = profile if profile is not None else load_profile("generic")
    share = prof.const("memory_headroom_fraction")
    budget = memory_budget_bytes(capacity_bytes, prof)
    return (
        f"plans keep {share:.0%} of each GPU free: {budget / GIB:.1f} of "
        f"{capacity_bytes / GIB:.1f} GiB usable (allocator fragmentation and memory-model "
        "error; profile memory_headroom_fraction)"
    )
