"""Communication of each parallelism, per micro-batch and per step, and how much of it hides
behind compute.

Rank order follows Megatron-Core's default ``tp-cp-ep-dp-pp`` (TP innermost, so a TP group fills
a node first; PP outermost). A group's ``per_node`` is how many of its ranks share a node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from gpuscale.costmodel.collectives import LevelBandwidth, RingGroup, collective_time_s
from gpuscale.costmodel.compute import BYTES, MicrobatchCompute
from gpuscale.costmodel.model_states import block_linear_weights, grad_reduce_bytes, lora_params
from gpuscale.costmodel.params import (
    embedding_params,
    expert_layer_params,
    layer_params,
    total_params,
)
from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.ring_attention import GRAD_KV_BYTES, ring_shapes
from gpuscale.costmodel.zero3_persistent import post_step_gather
from gpuscale.specs import Cluster, ModelSpec, PlanBatch, Training
from gpuscale.specs.plan import RECOMPUTE_CODE, expert_replicas

PERSISTENT_GEMM_GENERATIONS = frozenset({"hopper"})
"""Generations whose cuBLAS matmuls are persistent kernels (a grid of one CTA per SM, 132 on
H100, each looping over tiles), so a collective holding even a few SMs leaves some CTAs for a
second wave (pytorch/pytorch issue #143988: FSDP on H100, "matmuls take 2x as long ... when
overlapped with a NCCL kernel", NCCL holding ~10% of the SMs; cuBLASLt's
CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET exists to size the grid around a concurrent stream). Ampere's
cuBLAS launches one CTA per output tile and the hardware fills whatever SMs are free, so a busy SM
costs its share only (``comm_compute_interference``)."""

ACT_BYTES = 2.0
"""Activations cross the wire in 16-bit (FP8 recipes keep communication in BF16); fp32 training
sends 4 bytes (see :func:`communication`)."""


@dataclass(frozen=True, slots=True)
class CommTimes:
    """Exposed communication seconds, arrays over plans. ``*_mb`` fields are per micro-batch
    (they repeat in the pipeline bubble); the rest are once per optimizer step."""

    tp_mb: np.ndarray
    cp_mb: np.ndarray
    ep_mb: np.ndarray
    pp_mb: np.ndarray
    zero3_mb: np.ndarray
    """ZeRO-3 gathers and reduce-scatters, or ZeRO-2's per-micro-batch reduce-scatter."""
    dp_step: np.ndarray
    """Gradient reduction (and ZeRO-1/2 parameter all-gather) after the last micro-batch."""
    total_dp_bytes: np.ndarray
    """Bytes of gradient each GPU reduces per step (for reports and compression advice)."""
    dp_unhidden_s: np.ndarray
    """Gradient synchronisation time before any overlap."""


def rerun_mlp_shares(
    m: ModelSpec, training: Training, plans: PlanBatch
) -> tuple[np.ndarray, np.ndarray]:
    """Per plan, the share of the blocks whose dense MLP and whose MoE layer selective
    recompute re-runs (``--recompute-modules`` ``mlp`` / ``moe`` under the ``attention``
    policy): 0 elsewhere."""
    selective = (plans.recompute == RECOMPUTE_CODE["selective"]).astype(float)
    modules = training.selective_modules
    share = m.moe_layer_share
    mlp = selective * (1.0 - share) * ("mlp" in modules)
    moe = selective * share * ("moe" in modules)
    return mlp, moe


def _per_node(stride: np.ndarray, size: np.ndarray, gpus_per_node: int) -> np.ndarray:
    """Ranks of a group of ``size`` with rank stride ``stride`` that share one node."""
    fit = np.maximum(gpus_per_node // np.maximum(stride, 1), 1)
    return np.minimum(size, fit)


def expert_params_per_gpu(m: ModelSpec, plans: PlanBatch) -> np.ndarray:
    """The part of :func:`params_per_gpu` that is expert weights: split ``etp x ep`` ways and
    replicated over the expert-data-parallel group of :func:`expert_replicas` ranks, not
    ``dp*cp`` (Megatron-Core ``_EXPERT_DATA_PARALLEL_GROUP``)."""
    if not m.is_moe:
        return np.zeros(len(plans))
    layers = stage_layers(m, plans).heaviest
    return layers * expert_layer_params(m) / (plans.etp * plans.ep)


def params_per_gpu(m: ModelSpec, plans: PlanBatch) -> np.ndarray:
    """Parameters held by the busiest GPU before ZeRO sharding: its stage's layers split by TP
    (experts split by EP), plus the embedding on the first stage and the LM head on the last
    (uneven splits give those ranks fewer layers, see :mod:`gpuscale.costmodel.pipeline`)."""
    expert = expert_layer_params(m)
    dense_layer = layer_params(m) - expert
    split = stage_layers(m, plans)
    per_layer = dense_layer / plans.tp + expert / (plans.etp * plans.ep)
    embed = m.vocab_size * m.hidden_size + (
        m.max_seq_len * m.hidden_size if m.position == "learned" else 0
    )
    # The last rank holds the output layer (a second copy of the embedding when tied).
    head = m.vocab_size * m.hidden_size
    staged = np.maximum(
        np.maximum(split.first * per_layer + embed / plans.tp, split.middle * per_layer),
        split.last * per_layer + head / plans.tp,
    )
    whole = m.num_layers * per_layer + embedding_params(m) / plans.tp
    return np.where(plans.pp == 1, whole, staged)


def trainable_fraction(m: ModelSpec, training: Training) -> float:
    """Share of the parameters that get gradients: the adapters under LoRA/QLoRA."""
    return lora_params(m, training) / total_params(m) if training.is_lora else 1.0


def exposed_comm_s(comm: ArrayLike, window: ArrayLike, interference: ArrayLike) -> np.ndarray:
    """Time a collective adds to the step when ``window`` seconds of compute can hide it: the
    part nothing hides, plus the slowdown of the compute that hides the rest, because NCCL runs
    one CTA per channel on the SMs and shares HBM bandwidth with the kernels it overlaps
    (NCCL docs, NCCL_MAX_NCHANNELS; Rashidi et al. 2021, ISCA, Sec. 3: overlapped collectives
    slow compute through shared resources)."""
    comm, window = np.asarray(comm, dtype=float), np.asarray(window, dtype=float)
    return np.maximum(comm - window, 0.0) + interference * np.minimum(comm, window)


def ep_unpaired_share(plans: PlanBatch) -> np.ndarray:
    """Share of a step's micro-batch passes that Megatron-Core's combined 1F1B schedule runs
    alone, with no pass of another micro-batch beside them (``--overlap-moe-expert-parallel-comm``).
    Without pipelining the first forward and the last backward of ``m`` micro-batches
    (``combined_1f1b_schedule_for_no_pipelining``): 1/m. With the interleaved schedule, stage
    ``r`` runs ``2 (pp - r - 1) + (vp - 1) pp + 1`` warm-up forwards before its first 1F1B pair
    (the ``+ 1``: one more forward so each pair's passes are independent) and as many backwards
    after its last (``pipeline_parallel/schedules.py``, ``get_pp_rank_microbatches``), of its
    ``m vp`` model-chunk passes each way; averaged over the stages."""
    m = plans.num_microbatches.astype(float)
    chunks = m * plans.vp
    warmup = np.where(plans.pp > 1, (plans.pp - 1.0) + (plans.vp - 1.0) * plans.pp + 1.0, 1.0)
    return np.minimum(warmup / chunks, 1.0)


def ep_overlapped_s(
    a2a_s: np.ndarray, plans: PlanBatch, compute: MicrobatchCompute, interference: np.ndarray
) -> np.ndarray:
    """Exposed expert-parallel all-to-all per micro-batch under Megatron-Core's EP A2A overlap
    (``--overlap-moe-expert-parallel-comm --delay-wgrad-compute``): in each 1F1B pair the
    forward of one micro-batch and the backward of another run layer by layer on two streams,
    each dispatch or combine of one beside the attention or expert computation of the other
    (``TransformerLayerSchedulePlan.run``: combine_bwd | pre_dispatch_fwd, dispatch_fwd ->
    dispatch_bwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd, combine_fwd | pre_dispatch_bwd). A pair's
    four all-to-alls per layer hide behind the pair's compute of that layer (the model does not
    split the layer into the schedule's phases, so this is the schedule's best case); the
    passes run alone (:func:`ep_unpaired_share`) expose theirs. ``a2a_s``: a micro-batch's
    dispatch and combine, forward and backward, over the stage's layers; ``interference``: the
    side stream's cost to the compute it runs beside (:func:`data_parallel_interference`)."""
    layers = np.maximum(compute.layers_per_stage, 1.0)
    window = (compute.forward_s + compute.backward_s) / layers
    per_layer = a2a_s / layers
    unpaired = ep_unpaired_share(plans)
    paired = layers * exposed_comm_s(per_layer, window, interference)
    return unpaired * a2a_s + (1.0 - unpaired) * paired


def data_parallel_interference(
    generation: str, profile: Profile, gemm_fraction: np.ndarray
) -> np.ndarray:
    """Interference of the collectives NCCL runs on a side stream beside whole layers (gradient
    reduction, ZeRO/FSDP gathers and reduce-scatters): on generations with persistent matmuls
    (:data:`PERSISTENT_GEMM_GENERATIONS`) those lose ``persistent_gemm_overlap_loss`` of their
    progress and the other kernels ``comm_compute_interference``, weighted by the matmuls'
    share of the layer's time; elsewhere every kernel loses the base share."""
    base = profile.const("comm_compute_interference")
    g = np.asarray(gemm_fraction, dtype=float)
    if generation not in PERSISTENT_GEMM_GENERATIONS:
        return np.full(g.shape, base)
    loss = max(profile.const("persistent_gemm_overlap_loss"), base)
    return g * loss + (1.0 - g) * base


def _partly_hidden(
    comm: np.ndarray, overlap: float | np.ndarray, interference: float
) -> np.ndarray:
    """As :func:`exposed_comm_s` when a fixed share ``overlap`` of the collective runs under compute."""
    return comm * ((1.0 - overlap) + interference * overlap)


def _all_gather_ring_s(
    m: ModelSpec,
    training: Training,
    plans: PlanBatch,
    profile: Profile,
    compute: MicrobatchCompute,
    levels: LevelBandwidth,
    gpus_per_node: int,
) -> np.ndarray:
    """Exposed seconds per layer of PyTorch's ring attention with the all-gather rotater
    (``_AllGatherRotater``; see :mod:`gpuscale.costmodel.ring_attention`): each attention call
    (forward, the recomputed forward, backward) all-gathers K and V once and waits for them after
    its first, local step; the backward sends the fp32 dK/dV accumulators to the next rank after
    every step, each hidden behind the next step's kernel and the last behind nothing. Ring steps
    carry equal query-key pairs, so one step lasts 1/cp of the layer's attention kernels."""
    tp, cp = plans.tp, plans.cp
    tokens = plans.micro_batch * training.seq_len / cp
    shapes = ring_shapes(m, tokens, tp, profile.const("cp_kv_heads_repeated") > 0)
    word = 4.0 if training.precision == "fp32" else ACT_BYTES
    per_node = _per_node(tp, cp, gpus_per_node)
    kv_bytes = 2.0 * shapes.kv_elements * word
    gather = collective_time_s("all_gather", cp * kv_bytes, cp, per_node, levels)
    grad_bytes = 2.0 * shapes.kv_elements * GRAD_KV_BYTES
    grad_hop = collective_time_s("send_recv", grad_bytes, cp, per_node, levels)
    step_fwd = compute.layer_attention_forward_s / cp
    step_bwd = compute.layer_attention_backward_s / cp
    if profile.const("cp_comm_waits_for_attention_kernel") > 0:
        # Each collective is enqueued on the NCCL stream right before the attention kernel it
        # should hide behind, which follows the step's torch.cat in the compute stream; with
        # CUDA's default 8 hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) nothing orders the two,
        # the attention grid (thousands of CTAs) takes every SM first, and an NCCL CTA does not
        # share an SM with a compute kernel (NVIDIA/nccl#689), so the collective starts at the
        # kernel's last wave (NVIDIA/nccl#1431) and the next step waits for all of it. Megatron
        # sets CUDA_DEVICE_MAX_CONNECTIONS=1 to put the communication kernel ahead
        # (NVIDIA/Megatron-LM#533); torchtitan sets neither that nor high-priority NCCL streams.
        step_fwd = step_bwd = np.zeros_like(step_fwd)
    interference = profile.const("comm_compute_interference")
    forward = exposed_comm_s(gather, step_fwd, interference)
    forwards = 1.0 + np.where(plans.recompute == RECOMPUTE_CODE["full"], 1.0, 0.0)
    backward = (
        exposed_comm_s(gather, step_bwd, interference)
        + (cp - 1) * exposed_comm_s(grad_hop, step_bwd, interference)
        + grad_hop
    )
    return forwards * forward + backward


def communication(
    m: ModelSpec,
    cluster: Cluster,
    training: Training,
    plans: PlanBatch,
    profile: Profile,
    compute: MicrobatchCompute,
) -> CommTimes:
    levels = LevelBandwidth.of(cluster, profile)
    gpn = cluster.gpus_per_node
    word = 4.0 if training.precision == "fp32" else ACT_BYTES
    tp, cp, dp, pp, ep, vp = plans.tp, plans.cp, plans.dp, plans.pp, plans.ep, plans.vp
    tokens = plans.micro_batch * training.seq_len / cp
    layers = compute.layers_per_stage
    full = plans.recompute == RECOMPUTE_CODE["full"]
    # Selective recompute of the MLP or the MoE layer (--recompute-modules mlp / moe) re-runs
    # its forward collectives in backward: the MLP half's TP pair, the MoE layer's dispatch and
    # combine (Megatron-Core checkpoints the whole module, moe_layer.py custom_forward).
    rerun_mlp, rerun_moe = rerun_mlp_shares(m, training, plans)
    interference = profile.const("comm_compute_interference")

    # Tensor parallel: per layer 2 all-reduces forward and 2 backward of the b*s*h activation
    # (Shoeybi et al. 2019, Sec. 3, the f/g operators); with sequence parallelism each becomes a
    # reduce-scatter + all-gather pair of equal total cost (Korthikanti et al. 2022, Sec. 4.2.2).
    tp_msg = tokens * m.hidden_size * word
    tp_per_node = np.minimum(tp, gpn)
    tp_ring = RingGroup.of(levels, tp, tp_per_node)
    one_ar = tp_ring.time_s("all_reduce", tp_msg)
    low = BYTES.get(training.precision, word)
    if low < word and profile.const("tp_fp8_all_gather") > 0:
        # FP8 linears cast their input before the sequence-parallel all-gather, and the output
        # gradient before the all-gather that is the backward of the output reduce-scatter
        # (torchao float8_tensor_parallel: Float8ColwiseParallel, Float8RowwiseParallel,
        # PrepareFloat8ModuleInput), so each RS + AG pair moves its AG in FP8.
        fp8_pair = tp_ring.time_s("reduce_scatter", tp_msg) + tp_ring.time_s(
            "all_gather", tp_msg * low / word
        )
        one_ar = np.where(plans.sequence_parallel, fp8_pair, one_ar)
    # Sequence parallelism also re-all-gathers the inputs of QKV and FC1 in backward for the
    # weight gradient, but Megatron launches it asynchronously under the input-gradient GEMM,
    # which is longer (Korthikanti et al. 2022, Sec. 4.2.2), so it adds no exposed time here.
    tp_passes = 4.0 + np.where(full, 2.0, 0.0) + rerun_mlp + rerun_moe
    # The profile's TP overlap decomposes the sequence-parallel all-gather/reduce-scatter pairs
    # (Transformer Engine userbuffers, AsyncTP); Megatron-LM takes --tp-comm-overlap only with
    # --sequence-parallel (arguments.py, core_v0.8.0). Without it only the backward's two
    # input-gradient all-reduces run async, launched before the weight-gradient GEMM
    # (core/tensor_parallel/layers.py, allreduce_dgrad: all_reduce(..., async_op=True)): 2 of
    # the layer's tp_passes all-reduces, never more than the profile hides.
    # Where the profile's exposed TP share lies in the forward (TE userbuffers: the 'pipeline'
    # reduce-scatters after proj and FC2, a quarter of each exposed; megatron.yaml), a full
    # recompute's second forward exposes as much again: of 2 x tp_passes halves, 4 per forward
    # carry the exposure, (1 - ov) x 8 x forwards / (2 x tp_passes): 1/12 with ov = 15/16.
    ov = profile.overlap_of("tp")
    if profile.const("tp_overlap_exposed_in_forward") > 0:
        forwards = 1.0 + np.where(full, 1.0, 0.0) + (rerun_mlp + rerun_moe) / 2.0
        ov_sp = np.maximum(0.0, 1.0 - (1.0 - ov) * 4.0 * forwards / tp_passes)
    else:
        ov_sp = np.full(len(plans), ov)
    tp_overlap = np.where(plans.sequence_parallel, ov_sp, np.minimum(ov, 2.0 / tp_passes))
    tp_mb = _partly_hidden(layers * tp_passes * one_ar, tp_overlap, interference)

    # Context parallel (ring attention): every layer passes K and V around the ring, cp-1 hops
    # forward and twice that backward (dK, dV), overlapped with the blockwise attention
    # (Liu et al. 2023, Ring Attention, arXiv:2310.01889, Sec. 3).
    kv_chunk = tokens * 2 * np.maximum(m.kv_width / tp, m.head_dim) * word
    cp_per_node = _per_node(tp, cp, gpn)
    hop = collective_time_s("send_recv", kv_chunk, cp, cp_per_node, levels)
    cp_hops = 3.0 + np.where(full, 1.0, 0.0)  # a recomputed forward passes K, V around again
    cp_mb = _partly_hidden(
        layers * cp_hops * (cp - 1) * hop, profile.overlap_of("cp"), interference
    )
    if profile.const("cp_kv_all_gather") > 0 and bool(np.any(cp > 1)):
        cp_mb = np.where(
            cp > 1,
            layers * _all_gather_ring_s(m, training, plans, profile, compute, levels, gpn),
            0.0,
        )

    # Expert parallel: dispatch and combine all-to-all per MoE layer, forward and backward
    # (Lepikhin et al. 2020, GShard, arXiv:2006.16668, Sec. 2.2).
    if m.is_moe:
        a2a_msg = tokens * m.experts_per_token * m.hidden_size * word / tp
        # EP ranks sit tp*cp apart (experts inside the data-parallel group), or etp apart when
        # folded over the tensor-parallel ranks (Megatron-Core's expert mesh, tp-ep-dp order).
        ep_stride = np.where(plans.etp == tp, tp * cp, plans.etp)
        ep_per_node = _per_node(ep_stride, ep, gpn)
        a2a = collective_time_s("all_to_all", a2a_msg, ep, ep_per_node, levels)
        if training.ep_overlap:
            # a side stream beside whole layers, as the data-parallel collectives are: on Hopper
            # its persistent matmuls lose more than the base share (no recompute re-runs the
            # MoE layer under the overlap: specs.validity.check_ep_overlap)
            side_stream = data_parallel_interference(
                cluster.pace_device.generation, profile, compute.gemm_fraction
            )
            ep_mb = ep_overlapped_s(layers * 4.0 * a2a, plans, compute, side_stream)
        else:
            ep_mb = _partly_hidden(
                layers * (4.0 + np.where(full | (rerun_moe > 0), 2.0, 0.0)) * a2a,
                profile.overlap_of("ep"),
                interference,
            )
    else:
        ep_mb = np.zeros(len(plans))

    # Pipeline: each micro-batch's activation crosses every stage boundary forward and its
    # gradient backward, v times under interleaving (Narayanan et al. 2021, Sec. 2.2.2);
    # Megatron's scatter/gather sends 1/tp of it per rank (Sec. 4.1).
    # Adjacent stages sit tp*cp*dp ranks apart: in one node when that stride is smaller than a
    # node, else one hop over the network.
    # Engines without that optimization (DeepSpeed's PipelineEngine sends the whole activation
    # from every TP rank) set ``pp_scatter_gather`` to 0.
    split_tp = np.where(profile.const("pp_scatter_gather") > 0, tp, 1)
    pp_msg = tokens * m.hidden_size * word / split_tp
    stage_pair_per_node = np.where(tp * cp * dp < gpn, 2, 1)
    hop_pp = collective_time_s("send_recv", pp_msg, 2, stage_pair_per_node, levels)
    pp_mb = np.where(
        pp > 1, _partly_hidden(2.0 * vp * hop_pp, profile.overlap_of("pp"), interference), 0.0
    )

    # On Hopper the persistent matmuls beside these collectives lose more than the base share.
    dp_interference = data_parallel_interference(
        cluster.pace_device.generation, profile, compute.gemm_fraction
    )

    # Data parallel gradient synchronisation over the dp*cp replicas of each parameter.
    # Dense weights are replicated over dp*cp ranks, expert weights over expert_replicas.
    params = params_per_gpu(m, plans)
    experts = expert_params_per_gpu(m, plans)
    trainable = trainable_fraction(m, training)
    grad_word = grad_reduce_bytes(training, profile)
    grad_bytes = params * trainable * grad_word
    weight_bytes = params * word
    if training.fp8_all_gather and not training.is_lora:
        # FSDP float8 all-gather (torchao enable_fsdp_float8_all_gather; torchtitan
        # docs/float8.md): each rank casts its shard of the blocks' linear weights to float8
        # before the ZeRO-3 gather, which moves (and copies out) 1 byte per such weight; the
        # same share memory.py keeps gathered in 1 byte.
        share = block_linear_weights(m) / max(layer_params(m), 1)
        weight_bytes = weight_bytes * (share * BYTES["fp8"] + (1.0 - share) * word) / word
    dp_group = dp * cp
    dp_per_node = _per_node(tp, dp_group, gpn)
    edp_group = expert_replicas(plans)
    edp_per_node = _per_node(plans.etp * ep, edp_group, gpn)

    # The group terms are computed once for the seven collectives over each group.
    dp_ring = RingGroup.of(levels, dp_group, dp_per_node)
    edp_ring = RingGroup.of(levels, edp_group, edp_per_node) if m.is_moe else dp_ring
    dense_params = params - experts

    def over_both(op: str, bytes_per_param: float) -> np.ndarray:
        dense = dp_ring.time_s(op, dense_params * bytes_per_param)
        if not m.is_moe:
            return dense
        return dense + edp_ring.time_s(op, experts * bytes_per_param)

    ar = over_both("all_reduce", trainable * grad_word)
    rs = over_both("reduce_scatter", trainable * grad_word)
    # After a ZeRO-1/2 step only the updated (trainable) weights are gathered; frozen LoRA bases
    # stay replicated.
    ag = over_both("all_gather", trainable * word)
    zero = plans.zero
    # FSDP's SHARD_GRAD_OP (ZeRO-2) keeps FSDP's unit structure: one all-gather per unit in the
    # forward and one reduce-scatter per unit in the backward (torch.distributed.fsdp
    # _runtime_utils _pre_forward_unshard / _post_backward_hook, one flat parameter per unit),
    # so it pays the ring latency once per unit, not once per bucket
    # (``zero2_unit_collectives`` = 1; 0 for engines that reduce in large buckets). The
    # bandwidth term is linear in bytes, so only the latency of the extra collectives is added.
    # ZeRO-1 (Megatron's distributed optimizer) reduces in buckets whatever the engine.
    extra = np.where(
        zero == 2, np.maximum(layers * profile.const("zero2_unit_collectives") - 1.0, 0.0), 0.0
    )
    rs = rs + extra * dp_ring.time_s("reduce_scatter", 0.0)
    ag = ag + extra * dp_ring.time_s("all_gather", 0.0)
    dp_sync = np.where(zero == 0, ar, np.where(zero < 3, rs + ag, 0.0))
    # Bucketed reduction overlaps the last micro-batch's backward (Li et al. 2020, PyTorch DDP,
    # VLDB 13(12), Sec. 3.2.3). The ZeRO-1/2 parameter all-gather follows the optimizer and can
    # overlap the next step's first forward (Megatron-Core --overlap-param-gather).
    hidden = profile.overlap_of("dp") * compute.backward_s
    gather_hidden = profile.overlap_of("zero") * compute.forward_s
    # ZeRO-2 keeps no full gradient buffer to accumulate into, so it reduce-scatters after
    # every micro-batch's backward (DeepSpeed engine.allreduce_gradients; FSDP SHARD_GRAD_OP),
    # where ZeRO-1 reduces once per step.
    rs_exposed = exposed_comm_s(rs, hidden, dp_interference)
    zero2_mb = np.where(zero == 2, rs_exposed, 0.0)
    dp_step = np.where(
        zero == 0,
        exposed_comm_s(ar, hidden, dp_interference),
        np.where(zero == 1, rs_exposed, 0.0)
        + np.where(
            (zero == 1) | (zero == 2), exposed_comm_s(ag, gather_hidden, dp_interference), 0.0
        ),
    )

    # ZeRO-3 / FSDP: all-gather weights for forward and again for backward, reduce-scatter
    # gradients, every micro-batch; prefetching hides it behind the layer math (Rajbhandari
    # et al. 2020, ZeRO, arXiv:1910.02054, Sec. 7.2.2; Zhao et al. 2023, PyTorch FSDP, Sec. 3.3).
    # Each collective pays the ring latency: FSDP wraps each transformer block as one unit (one
    # gather, one reduce-scatter per layer); DeepSpeed 0.3-0.5 issues one per parameter tensor
    # (``zero3_gathers_per_layer``, ``zero3_reduce_scatters_per_layer``). The bandwidth term is
    # linear, so the layer's bytes spread evenly over its collectives give the same total.
    gathers = layers * profile.const("zero3_gathers_per_layer")
    scatters = layers * profile.const("zero3_reduce_scatters_per_layer")
    # Collectives over lists of world-size views cost host time per rank: a Python loop of
    # narrow() and one copy launch per list entry in ProcessGroupNCCL (``zero3_host_us_per_rank``).
    host_s = np.where(dp_group > 1, profile.const("zero3_host_us_per_rank") * 1e-6 * dp_group, 0.0)
    # Full-size HBM passes around each collective (zero-filled gather buffers, copies out of and
    # into the flat NCCL buffer, gradient scaling): memory-bound, at the achieved HBM rate.
    hbm = cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    ag_copy = weight_bytes * profile.const("zero3_gather_copy_passes") / hbm
    rs_copy = grad_bytes * profile.const("zero3_reduce_copy_passes") / hbm
    z3_ag = gathers * (dp_ring.time_s("all_gather", weight_bytes / gathers) + host_s) + ag_copy
    z3_rs = scatters * (dp_ring.time_s("reduce_scatter", grad_bytes / scatters) + host_s) + rs_copy
    # A framework whose activation checkpointing re-runs the module hooks gathers the weights a
    # third time for the recomputed forward (``zero3_regather_on_recompute``).
    passes = 2.0 + np.where(full, profile.const("zero3_regather_on_recompute"), 0.0)
    z3_comm = passes * z3_ag + z3_rs
    z3_hidden = profile.overlap_of("zero") * (compute.forward_s + compute.backward_s)
    # FSDP2 copies on the compute stream: the all-gather copy-out (split_with_sizes_copy into
    # the unsharded parameters) runs in wait_for_unshard on the current stream, and the
    # default stream waits for the reduce-scatter copy-in (_chunk_cat into the reduce_dtype
    # buffer) before it frees the gradients (torch/distributed/_composable/fsdp/
    # _fsdp_collectives.py, foreach_all_gather_copy_out / foreach_reduce, torch 2.4-2.6), so
    # no collective can hide them (``zero3_copies_on_compute_stream``).
    serial_copies = profile.const("zero3_copies_on_compute_stream") > 0
    ag_serial = ag_copy if serial_copies else np.zeros_like(ag_copy)
    rs_serial = rs_copy if serial_copies else np.zeros_like(rs_copy)
    copies = passes * ag_serial + rs_serial
    z3_exposed = exposed_comm_s(z3_comm - copies, z3_hidden, dp_interference) + copies
    # Under pipeline parallelism torchtitan keeps FSDP2 parameters unsharded across the step's
    # micro-batches (reshard_after_forward=False when PP is on, "to avoid per-microbatch
    # all-gathers"; torchtitan parallelize_llama.apply_fsdp) and the pipeline schedule syncs
    # gradients on the last backward only (torch.distributed.pipelining PipelineStage): one
    # gather and one reduce-scatter per step instead of per micro-batch.
    once = (zero == 3) & (pp > 1) & (profile.const("fsdp_gather_once_under_pp") > 0)
    # ... and that sync runs after the last backward has returned: the schedule turns FSDP's
    # gradient sync off for every micro-batch and, on the last one, calls each parameter
    # group's post_backward (the reduce-scatters) and waits for them in the root's final
    # callback (torch/distributed/pipelining/stage.py, backward_maybe_with_nosync, FSDPModule
    # branch, torch 2.5-2.6), so no backward is left to hide them behind
    # (``fsdp_pp_reduce_after_backward``); the per-step gather still overlaps the first forward.
    after = once & (profile.const("fsdp_pp_reduce_after_backward") > 0)
    once_exposed = np.where(
        after,
        exposed_comm_s(passes * (z3_ag - ag_serial), z3_hidden, dp_interference)
        + passes * ag_serial
        + z3_rs,
        z3_exposed,
    )
    zero3_mb = np.where((zero == 3) & ~once, z3_exposed, 0.0) + zero2_mb
    dp_step = dp_step + np.where(once, once_exposed, 0.0)
    # DeepSpeed keeps tensors under stage3_param_persistence_threshold gathered, partitions
    # them at the end of backward and gathers them again after every optimizer step with one
    # blocking all-gather whose Python loop copies each rank's shard out on its own
    # (``zero3_param_persistence_threshold``; see costmodel/zero3_persistent.py): once per step,
    # one iteration and one copy launch per (tensor, rank), on the host in series like the
    # list views above (``zero3_host_us_per_rank``). Sizes are the rank's TP/EP slices, as
    # DeepSpeed compares them; the final norm is counted on every rank.
    threshold = profile.const("zero3_param_persistence_threshold")
    if threshold > 0 and bool(np.any((zero == 3) & (dp_group > 1))):
        copies, gathered = post_step_gather(m, threshold, layers, tp, ep, dp_group)
        post_step = copies * profile.const("zero3_host_us_per_rank") * 1e-6 + dp_ring.time_s(
            "all_gather", gathered * word
        )
        dp_step = dp_step + np.where((zero == 3) & (dp_group > 1), post_step, 0.0)

    return CommTimes(
        tp_mb=tp_mb,
        cp_mb=cp_mb,
        ep_mb=ep_mb,
        pp_mb=pp_mb,
        zero3_mb=zero3_mb,
        dp_step=dp_step,
        total_dp_bytes=grad_bytes,
        dp_unhidden_s=np.where(zero == 3, z3_comm, dp_sync),
    )
