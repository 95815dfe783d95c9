"""One optimizer step, end to end: compute, exposed communication, pipeline bubble, optimizer,
data and checkpoint terms, then throughput, model TFLOP/s and MFU.

Step time of 1F1B (interleaved) pipelining (Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2,
Eq. 1-2): ``(m + (p-1)/v) * t_microbatch`` then the data-parallel tail and the optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscale.costmodel.activation_offload import host_link_bytes_per_s, offload_wait_s
from gpuscale.costmodel.communication import (
    CommTimes,
    communication,
    expert_params_per_gpu,
    params_per_gpu,
    trainable_fraction,
)
from gpuscale.costmodel.compute import (
    LayerCompute,
    MicrobatchCompute,
    layer_compute,
    stage_compute,
)
from gpuscale.costmodel.distinct import COMPUTE_COLUMNS, per_distinct
from gpuscale.costmodel.flops import model_flops_per_token
from gpuscale.costmodel.grad_accumulation import fsdp_accumulation_s
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.terms import COMM_KINDS, PARTS, coarse
from gpuscale.specs import Cluster, Device, JobOptions, ModelSpec, Plan, PlanBatch, Training
from gpuscale.specs.plan import expert_replicas
from gpuscale.specs.units import GIB
from gpuscale.specs.validity import check_plan, valid_mask


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """Predicted step of every plan in a batch; each field is an array over the plans."""

    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    """Whole job, all GPUs."""
    tflops_per_gpu: np.ndarray
    """Model FLOPs (no recompute, PaLM definition) per GPU per second, in TFLOP/s."""
    mfu: np.ndarray
    memory_per_gpu_bytes: np.ndarray
    fits: np.ndarray
    compute_s: np.ndarray
    recompute_s: np.ndarray
    """Part of ``compute_s`` spent recomputing activations."""
    bubble_s: np.ndarray
    optimizer_s: np.ndarray
    data_s: np.ndarray
    checkpoint_s: np.ndarray
    other_s: np.ndarray
    comm_tp_s: np.ndarray
    comm_cp_s: np.ndarray
    comm_ep_s: np.ndarray
    comm_pp_s: np.ndarray
    comm_dp_s: np.ndarray
    comm_zero_s: np.ndarray
    exposed_comm_s: np.ndarray
    """Sum of the ``comm_*_s`` terms."""
    dp_sync_unhidden_s: np.ndarray
    gradient_bytes_per_gpu: np.ndarray
    num_gpus: np.ndarray
    layers_per_stage: np.ndarray
    """Transformer layers on the slowest pipeline rank (the one that sets the pace)."""

    def __len__(self) -> int:
        return int(self.step_time_s.shape[0])

    def parts(self, i: int) -> dict[str, float]:
        """Seconds per part of plan ``i`` (:data:`~gpuscale.costmodel.terms.PARTS`, in order);
        they sum to ``step_time_s``."""
        values = {
            "compute": float(self.compute_s[i]),
            "bubble": float(self.bubble_s[i]),
            "optimizer": float(self.optimizer_s[i]),
            "data": float(self.data_s[i]),
            "checkpoint": float(self.checkpoint_s[i]),
            "other": float(self.other_s[i]),
        }
        values.update({f"comm_{k}": float(getattr(self, f"comm_{k}_s")[i]) for k in COMM_KINDS})
        return {key: values[key] for key in PARTS}

    def breakdown(self, i: int) -> dict[str, float]:
        """Seconds per ``breakdown`` term of plan ``i`` (the comm kinds summed); they sum to
        ``step_time_s``."""
        return coarse(self.parts(i))

    def row(self, i: int = 0) -> dict[str, Any]:
        """Plan ``i`` in the machine-readable contract of DESIGN.md."""
        parts = self.parts(i)
        return {
            "fits": bool(self.fits[i]),
            "memory_per_gpu_gib": float(self.memory_per_gpu_bytes[i] / GIB),
            "step_time_s": float(self.step_time_s[i]),
            "tokens_per_s": float(self.tokens_per_s[i]),
            "tokens_per_s_per_gpu": float(self.tokens_per_s[i] / self.num_gpus[i]),
            "tflops_per_gpu": float(self.tflops_per_gpu[i]),
            "mfu": float(self.mfu[i]),
            "breakdown": coarse(parts),
            "exposed_comm_parts": {k: v for k, v in parts.items() if k.startswith("comm_")},
            "recompute_s": float(self.recompute_s[i]),
        }


def blocking_host_s_per_layer(profile: Profile) -> float:
    """Host seconds per transformer layer and micro-batch (forward, recompute and backward)
    that the GPU waits for when launches are synchronous (``cuda_launch_blocking`` = 1); 0 when
    launches are asynchronous and the host runs ahead of the GPU."""
    return (
        profile.const("cuda_launch_blocking")
        * profile.const("launch_blocking_host_ms_per_layer")
        * 1e-3
    )


def check_batch(model: ModelSpec, plans: PlanBatch, seq_len: int) -> None:
    """Refuse the first plan of ``plans`` that ``model`` cannot run at ``seq_len`` (the one rule
    set of :mod:`gpuscale.specs.validity`), naming its flag."""
    ok = valid_mask(model, plans, seq_len)
    if not ok.all():
        check_plan(model, plans.plan(int(np.flatnonzero(~ok)[0])), seq_len)


def _memory_bytes(
    model: ModelSpec, training: Training, plans: PlanBatch, profile: Profile
) -> np.ndarray:
    from gpuscale.costmodel.memory import training_memory

    return np.asarray(training_memory(model, training, plans, profile=profile).total, dtype=float)


def pipeline_bubble_s(
    mb: MicrobatchCompute, plans: PlanBatch, t_microbatch: np.ndarray
) -> np.ndarray:
    """Bubble of one step when a micro-batch takes ``t_microbatch`` on the slowest rank.

    1F1B with stages of unequal time: m micro-batches at the slowest stage's pace plus one
    pass through the others, (sum_i t_i - t_max), divided by v when interleaved (Narayanan et
    al. 2021, Sec. 2.2: (p-1)/v * t for equal stages). Non-decreasing in ``t_microbatch``
    (:func:`step_time_floor_s` relies on it)."""
    compute_mb = mb.forward_s + mb.backward_s
    others = np.maximum(mb.all_stages_s - compute_mb, 0.0) / np.maximum(compute_mb, 1e-30)
    return others / plans.vp * t_microbatch


def _compute_deduplicated(
    model: ModelSpec, device: Device, training: Training, plans: PlanBatch, profile: Profile
) -> LayerCompute:
    """Layer math depends on a few plan fields only; candidate sets repeat each combination
    across pp, dp, ZeRO stage and interleaving, so price each combination once."""
    return per_distinct(
        plans, COMPUTE_COLUMNS, lambda p: layer_compute(model, device, training, p, profile)
    )


def estimate_batch(
    model: ModelSpec,
    cluster: Cluster,
    training: Training,
    plans: PlanBatch,
    profile: Profile,
    job: JobOptions | None = None,
    memory_bytes: np.ndarray | None = None,
) -> StepEstimate:
    """Predict the step of every plan in ``plans`` (numpy-vectorized over plans).

    ``memory_bytes``: peak memory per GPU already computed for these plans (the planner prices
    memory first to drop what does not fit); computed here when absent.

    The plans must be ones ``model`` can run (:func:`gpuscale.specs.validity.valid_mask`):
    :func:`~gpuscale.planner.enumerate.enumerate_plans` builds only such plans, and
    :func:`estimate_plan` and :func:`check_batch` refuse others; the kernel does not re-check
    them (at 10+ integer divisions per plan that would cost the search a tenth of its speed)."""
    job = job or JobOptions()
    device = cluster.pace_device
    device.peak(training.precision)  # an A100 has no FP8, a V100 no BF16: say so, never substitute
    n = len(plans)
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency

    lc = _compute_deduplicated(model, device, training, plans, profile)
    mb = stage_compute(model, plans, lc)
    comm: CommTimes = communication(model, cluster, training, plans, profile, mb)
    m = plans.num_microbatches.astype(float)

    compute_mb = mb.forward_s + mb.backward_s
    per_mb_comm = comm.tp_mb + comm.cp_mb + comm.ep_mb + comm.pp_mb + comm.zero3_mb
    # With CUDA_LAUNCH_BLOCKING=1 every launch waits for its kernel, so the host's per-op work
    # (Python, autograd, dispatch, launch) no longer runs ahead of the GPU: it adds to each
    # layer's time instead of hiding behind the queue (CUDA C++ Programming Guide,
    # 'Asynchronous Concurrent Execution': the variable makes launches synchronous).
    host_mb = mb.layers_per_stage * blocking_host_s_per_layer(profile)
    # FSDP2 under PP keeps each micro-batch's gradients unsharded and adds them into an fp32
    # accumulator in its backward hooks (costmodel/grad_accumulation.py): compute-stream passes.
    accumulate_mb = fsdp_accumulation_s(model, device, training, plans, profile)
    # Offloaded activations the host link cannot move while the other layers compute.
    offload_mb = offload_wait_s(model, device, training, plans, profile, lc)
    t_mb = compute_mb + per_mb_comm + host_mb + accumulate_mb + offload_mb
    bubble = pipeline_bubble_s(mb, plans, t_mb)

    # Optimizer: a memory-bound sweep over the parameters this GPU owns (sharded by ZeRO >= 1).
    # ZeRO shards dense weights' state over dp*cp ranks and experts' over their replicas.
    experts = expert_params_per_gpu(model, plans)
    replicas = plans.dp * plans.cp
    params = params_per_gpu(model, plans)
    sharded = (params - experts) / replicas + experts / expert_replicas(plans)
    owned = trainable_fraction(model, training) * np.where(plans.zero >= 1, sharded, params)
    if training.offload_optimizer or training.offload_params:
        # ZeRO-Offload: gradients go down and updated 16-bit weights come back over PCIe, and
        # the step runs in host memory (Ren et al. 2021, arXiv:2101.06840, Sec. 4.1).
        # The node's GPUs share its CPUs and DRAM; each GPU has its own PCIe link.
        host_link = host_link_bytes_per_s(device, profile)
        sharing = min(cluster.num_gpus, cluster.gpus_per_node)
        optimizer = (
            sharing
            * owned
            * profile.const("optimizer_bytes_per_param")
            / (profile.const("host_memory_gb_per_s") * 1e9)
            + owned * (2.0 + 2.0) / host_link
        )
    else:
        optimizer = owned * profile.const("optimizer_bytes_per_param") / hbm

    tokens_per_step = plans.global_batch * float(training.seq_len)
    pipeline = m * t_mb + bubble
    if job.storage_gb_per_s_per_node > 0:
        # Each node reads the tokens of its replicas; the loader prefetches during the step.
        # Stages sit on different nodes (PP outermost): a node holds gpus_per_node/(tp*cp) replicas.
        replicas_per_node = np.maximum(cluster.gpus_per_node / (plans.tp * plans.cp), 1.0)
        node_bytes = tokens_per_step / plans.dp * replicas_per_node * job.bytes_per_token
        data = np.maximum(node_bytes / (job.storage_gb_per_s_per_node * 1e9) - pipeline, 0.0)
    else:
        data = np.zeros(n)
    if job.checkpoint_every_steps > 0:
        # Weights and optimizer state: 2 + 12 bytes per parameter under mixed-precision Adam.
        ckpt_bytes = total_params(model) * 14.0
        checkpoint = np.full(
            n, ckpt_bytes / (job.checkpoint_write_gb_per_s * 1e9) / job.checkpoint_every_steps
        )
    else:
        checkpoint = np.zeros(n)
    other = np.full(n, profile.const("step_overhead_s"))
    fixed = other
    # the bubble's share of the host time and of the offload wait stays in ``bubble``
    other = other + m * (host_mb + offload_mb)

    # Every term added to the pipeline's math is >= 0: step_time_floor_s relies on it.
    step = pipeline + comm.dp_step + optimizer + data + checkpoint + fixed
    tokens_per_s = tokens_per_step / step
    num_gpus = plans.num_gpus.astype(float)
    flops = (
        model_flops_per_token(model, training.seq_len, training.is_lora)
        * tokens_per_s
        / num_gpus
        / 1e12
    )
    mem = _memory_bytes(model, training, plans, profile) if memory_bytes is None else memory_bytes
    capacity = min(cluster.device.memory_bytes, cluster.pace_device.memory_bytes)

    return StepEstimate(
        step_time_s=step,
        tokens_per_s=tokens_per_s,
        tflops_per_gpu=flops,
        mfu=flops / device.peak(training.precision),
        memory_per_gpu_bytes=mem,
        fits=mem <= capacity,
        compute_s=m * (compute_mb + accumulate_mb),
        recompute_s=m * mb.recompute_s,
        bubble_s=bubble,
        optimizer_s=optimizer,
        data_s=data,
        checkpoint_s=checkpoint,
        other_s=other,
        comm_tp_s=m * comm.tp_mb,
        comm_cp_s=m * comm.cp_mb,
        comm_ep_s=m * comm.ep_mb,
        comm_pp_s=m * comm.pp_mb,
        comm_dp_s=comm.dp_step,
        comm_zero_s=m * comm.zero3_mb,
        exposed_comm_s=m * per_mb_comm + comm.dp_step,
        dp_sync_unhidden_s=comm.dp_unhidden_s,
        gradient_bytes_per_gpu=comm.total_dp_bytes,
        num_gpus=num_gpus,
        layers_per_stage=mb.layers_per_stage,
    )


STEP_FLOOR_COLUMNS: tuple[str, ...] = (
    "tp",
    "pp",
    "cp",
    "dp",
    "ep",
    "etp",
    "vp",
    "micro_batch",
    "recompute",
    "global_batch",
    "sequence_parallel",
    "first_stage_layers",
    "last_stage_layers",
    "embedding_in_split",
    "loss_in_split",
)
"""Every plan field :func:`step_time_floor_s` reads (all but the ZeRO stage), for
:func:`~gpuscale.costmodel.distinct.per_distinct`."""


def step_time_floor_s(
    model: ModelSpec, cluster: Cluster, training: Training, plans: PlanBatch, profile: Profile
) -> np.ndarray:
    """A floor under :func:`estimate_batch`'s ``step_time_s``, from the math alone: ``m``
    micro-batches of compute, the bubble that compute leaves (:func:`pipeline_bubble_s`), and
    the fixed per-step overhead, each computed as ``estimate_batch`` computes it but without
    the communication and host time of a micro-batch. Every other term of the step is
    non-negative, the bubble does not shrink as a micro-batch gets longer, and IEEE rounding is
    monotone, so ``step_time_s >= step_time_floor_s`` bit for bit: the planner prices the step
    in full only for plans whose ceiling (``tokens / floor``) can still reach its top plans
    (tests/unit/test_planner_distinct.py checks the floor on every enumerated plan)."""
    device = cluster.pace_device
    mb = stage_compute(model, plans, _compute_deduplicated(model, device, training, plans, profile))
    m = plans.num_microbatches.astype(float)
    compute_mb = mb.forward_s + mb.backward_s
    bubble = pipeline_bubble_s(mb, plans, compute_mb)
    return m * compute_mb + bubble + profile.const("step_overhead_s")


def estimate_plan(
    model: ModelSpec,
    cluster: Cluster,
    training: Training,
    plan: Plan,
    profile: Profile,
    job: JobOptions | None = None,
    memory_bytes: float | None = None,
) -> StepEstimate:
    """:func:`estimate_batch` for one plan (a batch of one); a plan ``model`` cannot run (e.g.
    ``tp=3`` for 64 heads) is refused with an :class:`~gpuscale.errors.InputError`.
    ``memory_bytes``: the plan's peak per GPU when already priced."""
    check_plan(model, plan, training.seq_len)
    memory = None if memory_bytes is None else np.array([memory_bytes])
    plans = PlanBatch.from_plans([plan])
    return estimate_batch(model, cluster, training, plans, profile, job, memory)
