"""Time of the math of one micro-batch on one GPU: GEMMs, attention, memory-bound kernels.

Every kernel is timed by a roofline (Williams, Waterman & Patterson 2009, CACM 52(4)):
``max(FLOPs / (peak * efficiency), bytes / (HBM bandwidth * efficiency), launch floor)``. The
matmul efficiency falls for small GEMMs along the profile's curve (Calculon, Isaev et al. SC'23,
Sec. 4.2 uses the same per-size efficiency tables).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuscale.costmodel.flops import Gemm, attention_core_flops, layer_gemms, lm_head_gemm
from gpuscale.costmodel.fusion import (
    compiled_passes,
    torchao_tensorwise_casts,
    transformer_engine_casts,
)
from gpuscale.costmodel.lora_compute import lora_adapter_s
from gpuscale.costmodel.model_states import nf4_bytes_per_param
from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.ring_attention import merge_bytes, ring_shapes
from gpuscale.specs import Device, ModelSpec, PlanBatch, Training
from gpuscale.specs.plan import RECOMPUTE_CODE
from gpuscale.specs.training import LOW_PRECISIONS

UNFUSED_SOFTMAX_BACKWARD_PASSES = 3.0
"""Softmax backward outside a fused attention reads P and dP and writes dS = P * (dP - rowsum)
(Dao et al. 2022, FlashAttention, Appendix B.2, Algorithm 3, line 4): three passes over the
2-byte s x s tensor."""

UNFUSED_DROPOUT_PASSES = 2.0 + 0.5
"""Passes over the 2-byte s x s attention probabilities of a dropout kernel, each way: one read
and one write of 2-byte values and one 1-byte ``bool`` mask (``torch.native_dropout``; forward
writes the mask, backward reads it)."""

ACTIVATION_RECOMPUTE_PASSES = 3.0
"""Recomputing a gated activation reads the first MLP GEMM's ``2f``-wide output and writes the
``f``-wide input of the second: ``3f`` per routed copy, 3 passes of the MLP width ``k x f`` that
``block_s`` counts in."""

TE_LOSS_FORWARD_PASSES = 1.0
"""Transformer Engine's cross-entropy forward (``online_softmax_kernel``): one read of the logits."""

TE_LOSS_BACKWARD_PASSES = 2.0
"""... and its backward (``cross_entropy_backward_kernel``): one read, one in-place write."""

BYTES = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    # One E8M0 scale per 32 elements (OCP Microscaling Formats spec v1.0, Sec. 5).
    "mxfp8": 1.0 + 1.0 / 32.0,
    # 4-bit values, one E4M3 scale per 16 elements (NVIDIA, 'Introducing NVFP4', 2025).
    "nvfp4": 0.5 + 1.0 / 16.0,
}


@dataclass(frozen=True, slots=True)
class LayerCompute:
    """Seconds of math of one transformer layer and of the output layer + loss, per
    micro-batch, arrays over plans (they depend on tp, cp, micro-batch, recompute, ep and
    sequence parallelism only, so the step prices each combination once)."""

    layer_forward_s: np.ndarray
    layer_backward_s: np.ndarray
    """Input and weight gradients, plus the recomputed forward."""
    layer_recompute_s: np.ndarray
    head_forward_s: np.ndarray
    """Output layer (LM head) and cross-entropy on the last pipeline rank."""
    head_backward_s: np.ndarray
    attention_forward_s: np.ndarray
    """Attention kernels of one layer's forward (the windows that hide ring attention's KV)."""
    attention_backward_s: np.ndarray
    layer_gemm_s: np.ndarray
    """Matmul seconds of one layer: forward, backward and the recomputed forward."""


@dataclass(frozen=True, slots=True)
class MicrobatchCompute:
    """Seconds of math per micro-batch on the slowest pipeline stage, arrays over plans."""

    forward_s: np.ndarray
    backward_s: np.ndarray
    """Includes the recomputed forward when activations are recomputed."""
    recompute_s: np.ndarray
    """The part of ``backward_s`` spent recomputing the forward."""
    layers_per_stage: np.ndarray
    """Transformer layers on the slowest pipeline rank."""
    all_stages_s: np.ndarray
    """Forward + backward of one micro-batch summed over every pipeline rank (equals the
    slowest rank's when ``pp == 1``): with the slowest rank's time it sets the bubble."""
    layer_attention_forward_s: np.ndarray
    """Attention kernels of one layer, forward and backward (see :class:`LayerCompute`)."""
    layer_attention_backward_s: np.ndarray
    gemm_fraction: np.ndarray
    """Share of a layer's math time spent in matmuls (the kernels a collective running beside
    them slows most on Hopper, see :mod:`gpuscale.costmodel.communication`)."""


def gemm_traffic_bytes(g: Gemm, precision: str, weight_bytes: float | None = None) -> np.ndarray:
    """Bytes one of ``g`` moves through HBM: its input, its output (16-bit from FP8/MXFP8/NVFP4
    GEMMs) and its weights, stored at ``weight_bytes`` per element where given (fewer for
    weight-only int8/int4 serving) or in ``precision``."""
    in_bytes = BYTES.get(precision, 2.0)
    out_bytes = 2.0 if precision in LOW_PRECISIONS else in_bytes
    w_bytes = in_bytes if weight_bytes is None else weight_bytes
    return in_bytes * g.tokens * g.k + out_bytes * g.tokens * g.n + w_bytes * g.k * g.n


def gemm_time(
    g: Gemm,
    precision: str,
    device: Device,
    profile: Profile,
    launch_s: float,
    weight_bytes: float | None = None,
    te_cast: bool = True,
) -> np.ndarray:
    """Time of ``g``: roofline of its math at ``precision`` and of its traffic (activations in
    and out, and weights stored at ``weight_bytes`` per element: fewer for weight-only int8/int4
    serving). FP8 training adds the cast of the input (Micikevicius et al. 2022,
    arXiv:2209.05433, Sec. 3) as Transformer Engine runs it, unless ``te_cast`` is off (the
    caller prices another recipe's casts: :func:`float8_cast_s`)."""
    peak = device.peak(precision) * 1e12
    curve = profile.gemm_curve(device.id, device.generation, precision)
    math = g.flops / (peak * curve(g.flops))
    in_bytes = BYTES.get(precision, 2.0)
    low = precision in LOW_PRECISIONS
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    memory = gemm_traffic_bytes(g, precision, weight_bytes) / hbm
    time = np.maximum(np.maximum(math, memory), launch_s)
    if low and weight_bytes is None and te_cast:
        # Transformer Engine's fused cast-transpose reads the 16-bit input once and writes it in
        # the low precision twice (as is, and transposed for the weight-gradient GEMM): 2 + 1 + 1
        # bytes per element for FP8 (block scales included for MXFP8/NVFP4); backward (2x this
        # GEMM's time) does the same for the output gradient. The quantized weight copy is
        # cached across a step's micro-batches (TE ``is_first_microbatch``).
        time = time + (2.0 + 2.0 * in_bytes) * g.tokens * g.k / hbm
    return time * g.count


def low_precision_cast_s(
    gemms: list[Gemm], training: Training, profile: Profile, hbm: float, m: ModelSpec
) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward seconds of the casts that feed low-precision ``gemms``
    (costmodel/fusion.py): of each distinct input (the fused QKV and gate/up GEMMs share theirs,
    as Transformer Engine's fused modules and torch.compile's common-subexpression elimination
    share the cast; eager torchao casts it once per separate linear), of the output gradient and
    of the weight; Transformer Engine's fused
    cast-transpose, or torchao's tensorwise casts where the profile runs them
    (``fp8_torchao_tensorwise``)."""
    if training.precision not in LOW_PRECISIONS:
        return np.zeros(1), np.zeros(1)
    separate = {"qkv": 1.0, "mlp_up": 1.0}
    if training.precision == "fp8" and profile.const("fp8_torchao_tensorwise") > 0:
        casts = torchao_tensorwise_casts(
            compiled=training.compile, fp8_all_gather=training.fp8_all_gather
        )
        if not training.compile:
            # Eager: each of torchtitan's separate wq/wk/wv and w1/w3 Float8Linear modules
            # casts the shared input and saves its own transposed copy
            # (torchtitan/models/llama3/model.py, torchao float8_linear.py).
            gated = m.mlp == "gated" and not m.is_moe
            separate = {"qkv": 3.0, "mlp_up": 2.0 if gated else 1.0}
    else:
        casts = transformer_engine_casts(BYTES[training.precision])
    fwd = sum(
        (
            (
                casts.input_forward * separate.get(g.name, 1.0) * g.tokens * g.k
                + casts.weight_forward * g.k * g.n
            )
            * g.count
            for g in gemms
        ),
        start=np.zeros(1),
    )
    bwd = sum(
        (
            (
                casts.input_backward * separate.get(g.name, 1.0) * g.tokens * g.k
                + casts.grad_output * g.tokens * g.n
                + casts.weight_backward * g.k * g.n
            )
            * g.count
            for g in gemms
        ),
        start=np.zeros(1),
    )
    return fwd / hbm, bwd / hbm


def microbatch_compute(
    m: ModelSpec, device: Device, training: Training, plans: PlanBatch, profile: Profile
) -> MicrobatchCompute:
    """Forward and backward time of one micro-batch on the slowest pipeline stage."""
    return stage_compute(m, plans, layer_compute(m, device, training, plans, profile))


def stage_compute(m: ModelSpec, plans: PlanBatch, lc: LayerCompute) -> MicrobatchCompute:
    """The slowest pipeline rank of every plan: its layers (uneven splits give the first and
    last ranks fewer) and, on the last rank, the output layer and loss (Megatron-Core
    ``get_num_layers_to_build``; Narayanan et al. 2021, Sec. 2.2)."""
    split = stage_layers(m, plans)
    per_layer = lc.layer_forward_s + lc.layer_backward_s
    head = lc.head_forward_s + lc.head_backward_s
    t_first = split.first * per_layer
    t_middle = split.middle * per_layer
    t_last = split.last * per_layer + head
    last_slowest = (t_last >= t_first) & (t_last >= t_middle)
    first_slowest = ~last_slowest & (t_first >= t_middle)
    layers = np.where(last_slowest, split.last, np.where(first_slowest, split.first, split.middle))
    with_head = last_slowest.astype(float)
    return MicrobatchCompute(
        forward_s=layers * lc.layer_forward_s + with_head * lc.head_forward_s,
        backward_s=layers * lc.layer_backward_s + with_head * lc.head_backward_s,
        recompute_s=layers * lc.layer_recompute_s,
        layers_per_stage=layers,
        all_stages_s=float(m.num_layers) * per_layer + head,
        layer_attention_forward_s=lc.attention_forward_s,
        layer_attention_backward_s=lc.attention_backward_s,
        gemm_fraction=np.minimum(lc.layer_gemm_s / np.maximum(per_layer, 1e-30), 1.0),
    )


MODULE_GEMMS: dict[str, tuple[str, ...]] = {
    "mla_up_proj": ("q_up", "kv_up"),
    "mlp": ("mlp_up", "mlp_down"),
    "moe": ("router", "mlp_up", "mlp_down", "mlp_shared_up", "mlp_shared_down"),
}
"""The forward GEMMs (``flops.layer_gemms`` names) each recompute module re-runs; in an MoE
model ``mlp_*`` are the experts, and ``mlp`` re-runs the leading dense blocks'
(:data:`DENSE_BLOCK_GEMMS`)."""

DENSE_BLOCK_GEMMS: tuple[str, ...] = ("mlp_dense_up", "mlp_dense_down")


def _module_recompute_s(
    m: ModelSpec,
    modules: frozenset[str],
    gemms: list[Gemm],
    training: Training,
    device: Device,
    profile: Profile,
    launch_s: float,
    block_s: Callable[[float, float, float], np.ndarray],
    dispatch: np.ndarray,
    qkv_write: np.ndarray,
) -> np.ndarray:
    """Forward time Megatron-Core's selective recompute re-runs per layer for ``modules`` beyond
    the attention core (what each frees: ``activations.module_savings``). GEMMs by name; a gated
    activation as one read of the first GEMM's ``2f`` output and one write of its ``f`` output
    per routed copy; a norm as a read and a write of the hidden width; MLA's re-formed Q, K and
    V (RoPE and the concatenation) as one write of them (``qkv_write``). Not priced: the re-run
    GEMMs' low-precision input casts. A recomputed MLP's or MoE layer's collectives run again
    too: communication.py prices them (``rerun_mlp_shares``)."""
    total = np.zeros_like(dispatch)
    names: set[str] = set()
    for module in modules:
        dense = module == "mlp" and m.is_moe
        names.update(DENSE_BLOCK_GEMMS if dense else MODULE_GEMMS.get(module, ()))
    for g in gemms:
        if g.name in names:
            total = total + gemm_time(
                g, training.precision, device, profile, launch_s, te_cast=False
            )
    share = m.moe_layer_share
    if "mla_up_proj" in modules and m.is_mla:
        total = total + qkv_write
    if "mlp" in modules:
        # the fused pre-MLP norm and the activation of the dense blocks
        total = total + (1.0 - share) * block_s(2.0, ACTIVATION_RECOMPUTE_PASSES, 2.0)
    if "moe" in modules:
        total = total + dispatch + share * block_s(0.0, ACTIVATION_RECOMPUTE_PASSES, 0.0)
    elif "moe_act" in modules:
        total = total + share * block_s(0.0, ACTIVATION_RECOMPUTE_PASSES, 1.0)
    if "layernorm" in modules:
        norms = float(m.is_mla) + share
        total = total + block_s(2.0 * norms, 0.0, norms)
    return total


def layer_compute(
    m: ModelSpec, device: Device, training: Training, plans: PlanBatch, profile: Profile
) -> LayerCompute:
    """Time of one transformer layer and of the output layer + loss per micro-batch."""
    seq = float(training.seq_len)
    tp = plans.tp.astype(float)
    tokens = plans.micro_batch * seq / plans.cp
    launch_s = profile.const("kernel_launch_us") * 1e-6
    half_peak = device.peak(device.half_precision) * 1e12

    # Linear layers run at the training precision (FP8 with Transformer Engine recipes);
    # everything else stays in 16-bit (Micikevicius et al. 2022, arXiv:2209.05433, Sec. 4).
    # Sequence parallelism splits each rank's tokens tp ways outside the TP-split matmuls.
    sp = np.where(plans.sequence_parallel | (plans.tp == 1), tp, 1.0)
    gemms = layer_gemms(m, tokens, tp, plans.ep, plans.etp, sp)
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    gemm_fwd = sum(
        (gemm_time(g, training.precision, device, profile, launch_s, te_cast=False) for g in gemms),
        start=np.zeros(len(plans)),
    )
    # FP8/MXFP8/NVFP4 casts, forward and backward (the backward casts the output gradient, not
    # the input again: its transposed copy was written in forward).
    cast_fwd, cast_bwd = low_precision_cast_s(gemms, training, profile, hbm, m)
    # Frozen base weights (LoRA/QLoRA) need no weight gradient: backward is the input gradient
    # only (Hu et al. 2021, Sec. 4.2). QLoRA dequantizes every NF4 weight to 16-bit before each
    # use, forward and backward (Dettmers et al. 2023, Sec. 3, "computation data type").
    gemm_bwd_factor = 1.0 if training.is_lora else 2.0
    dequant = np.zeros(len(plans))
    if training.finetune == "qlora":
        weight_elements = sum((g.k * g.n * g.count for g in gemms), start=np.zeros(len(plans)))
        dequant = (
            weight_elements
            * (nf4_bytes_per_param(training.double_quant) + 2.0)
            / (device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency)
        )
    gemm_fwd = gemm_fwd + dequant

    attn_flops = attention_core_flops(m, tokens, seq, tp, causal_skip=training.flash_attention)
    if training.flash_attention:
        # Ring attention splits each sequence into 2*cp load-balanced chunks and runs one kernel
        # per chunk pair (Megatron-Core/Transformer Engine context parallelism).
        chunk = np.where(plans.cp > 1, seq / (2.0 * plans.cp), seq)
        attn_fwd = attn_flops / (
            half_peak * profile.attention_at(device.id, device.generation, chunk)
        )
        if m.causal:
            # Masked kernels run slower than full ones (diagonal tiles, uneven work per block):
            # ``attention_causal_relative_efficiency`` of the profile's rate. A load-balanced
            # ring runs one causal kernel (its own chunks) of the cp equal-work steps and
            # full kernels for the rest (ring_attention.py).
            causal_share = 1.0 / plans.cp
            attn_fwd = attn_fwd * (
                causal_share / profile.const("attention_causal_relative_efficiency")
                + (1.0 - causal_share)
            )
        # FlashAttention-2 backward re-forms the scores: 2.5x the forward FLOPs (Dao 2023, Sec. 3.2),
        # and reaches a smaller share of peak than forward (five GEMMs with dQ accumulated in
        # fp32 atomics): ~0.87 of the forward rate for FA2, FA3 and cuDNN on H100 at hdim 128
        # (Shah et al. 2024, FlashAttention-3, arXiv:2407.08608, Fig. 5-6: 370 vs 322, 648 vs
        # 561, 600 vs 516 TFLOP/s at 16k).
        attn_bwd = 2.5 * attn_fwd / profile.const("attention_backward_relative_efficiency")
        attn_kernel_fwd, attn_kernel_bwd = attn_fwd, attn_bwd
        # PyTorch's context_parallel merges and accumulates each ring step in separate fp32
        # passes (costmodel/ring_attention.py, counted from its code).
        if profile.const("cp_ring_unfused_passes") > 0 and bool(np.any(plans.cp > 1)):
            shapes = ring_shapes(m, tokens, tp, profile.const("cp_kv_heads_repeated") > 0)
            merge_fwd, merge_bwd = merge_bytes(shapes, plans.cp)
            attn_fwd = attn_fwd + merge_fwd / hbm
            attn_bwd = attn_bwd + merge_bwd / hbm
        # Megatron's selective recompute re-runs the core attention even when it is fused.
        attn_recompute = attn_fwd
    else:
        # Unfused attention (Dao et al. 2022, FlashAttention, Sec. 2.2 and Appendix B.2, the
        # standard algorithm): two batched GEMMs forward (S = QK^T, O = PV) and four backward
        # (dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q), each writing or reading the
        # 2-byte s x s tensor once, and the softmax (and dropout) kernels between them. Each
        # GEMM's pass over the s x s tensor is priced on top of its math, as the forward's
        # 4-pass count (unfused_softmax_passes, renamed unfused_softmax_kernel_passes when the
        # GEMM passes were split off, so an overlay with the old meaning is refused) priced it.
        score_bytes = 2.0 * plans.micro_batch * (m.num_heads / tp) * seq * seq / plans.cp
        one_pass = score_bytes / hbm
        one_gemm = (
            0.5
            * attn_flops
            / (
                half_peak
                * profile.gemm_curve(device.id, device.generation, device.half_precision)(
                    2.0 * tokens * seq * m.head_dim
                )
            )
            + one_pass
        )
        passes_fwd = profile.const("unfused_softmax_kernel_passes")
        passes_bwd = UNFUSED_SOFTMAX_BACKWARD_PASSES
        if training.dropout:
            # Dropout on the attention probabilities runs as its own kernel outside a fused
            # attention (Korthikanti et al. 2022, Sec. 4.1: its mask and output are stored
            # beside the softmax output).
            passes_fwd = passes_fwd + UNFUSED_DROPOUT_PASSES
            passes_bwd = passes_bwd + UNFUSED_DROPOUT_PASSES
        attn_fwd = 2.0 * one_gemm + passes_fwd * one_pass
        attn_bwd = 4.0 * one_gemm + passes_bwd * one_pass
        attn_recompute = attn_fwd
        attn_kernel_fwd, attn_kernel_bwd = attn_fwd, attn_bwd

    # Memory-bound kernels (norms, residual adds, activation function, rotary, dropout): bytes
    # moved per token, as multiples of the hidden and MLP widths (profile constants).
    expert_width = m.ffn_hidden_size * m.experts_per_token
    word = 4.0 if training.precision == "fp32" else 2.0
    # A padding-free attention path copies Q, K, V and the output through gather/scatter kernels
    # around a variable-length kernel (``attention_unpad_*``; flash-attn bert_padding.py).
    unpad = 1.0 if training.flash_attention else 0.0

    def block_s(hidden_passes: float, ffn_passes: float, kernels: float) -> np.ndarray:
        return (
            word * tokens * (hidden_passes * m.hidden_size / sp + ffn_passes * expert_width / tp)
        ) / hbm + kernels * launch_s

    elementwise_fwd = block_s(
        profile.const("elementwise_hidden_passes"),
        profile.const("elementwise_ffn_passes"),
        profile.const("elementwise_kernels_per_layer"),
    )
    if training.compile:
        # torch.compile fuses the block's memory-bound ops (costmodel/fusion.py); a stack whose
        # own kernels take less time keeps them. The block is one stack's or Inductor's, never
        # a mix of the two counts (Megatron's moves fewer hidden-width bytes, Inductor's fewer
        # MLP-width bytes and kernels).
        fused = compiled_passes(m.kv_width / m.hidden_size)
        elementwise_fwd = np.minimum(
            elementwise_fwd, block_s(fused.hidden, fused.ffn, fused.kernels)
        )
    elementwise_fwd = elementwise_fwd + unpad * (
        word * tokens * profile.const("attention_unpad_hidden_passes") * m.hidden_size / tp / hbm
        + profile.const("attention_unpad_kernels") * launch_s
    )

    # Token-choice MoE dispatch: tokens are gathered into expert order before the experts and
    # scattered back (weighted by the router's probabilities) after them; the backward runs the
    # inverse copies (Megatron-Core moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher:
    # permute, sort_chunks_by_idxs by local expert when a rank holds several, and their inverses,
    # fused by Transformer Engine into one pass each). Passes of hidden-width vectors per token
    # and per routed token-slot (profile constants; the all-to-all is priced as communication).
    dispatch = np.zeros(len(plans))
    if m.is_moe:
        local_experts = m.num_experts / plans.ep
        slot_passes = profile.const("moe_dispatch_slot_passes") + np.where(
            local_experts > 1, profile.const("moe_sort_slot_passes"), 0.0
        )
        passes = profile.const("moe_dispatch_token_passes") + m.experts_per_token * slot_passes
        dispatch = m.moe_layer_share * word * tokens * passes * m.hidden_size / sp / hbm

    # LoRA adapters: skinny GEMMs plus scaling and add over the output (costmodel/lora_compute).
    lora_fwd, lora_bwd = lora_adapter_s(m, device, training, plans, profile, tokens)
    layer_fwd = gemm_fwd + cast_fwd + attn_fwd + elementwise_fwd + dispatch + lora_fwd
    # Backward: input and weight gradients (2x GEMM FLOPs), elementwise ~2x forward traffic.
    layer_bwd = (
        gemm_bwd_factor * (gemm_fwd - dequant)
        + dequant
        + cast_bwd
        + attn_bwd
        + 2.0 * elementwise_fwd
        + dispatch
        + lora_bwd
    )

    # The LM head stays in 16-bit under FP8 recipes (Transformer Engine keeps the output layer).
    low = training.precision in LOW_PRECISIONS
    head_precision = device.half_precision if low else training.precision
    head = gemm_time(lm_head_gemm(m, tokens, tp), head_precision, device, profile, launch_s)
    # Cross-entropy's memory passes over the tokens x vocab/tp logits, forward and backward, in
    # bytes per logit (profile constants: counted from each framework's loss code).
    logits = tokens * m.vocab_size / tp / hbm
    if training.loss == "te":
        # Transformer Engine's parallel cross-entropy (transformer_engine/pytorch/triton/
        # cross_entropy.py): forward reads the 16-bit logits once (online softmax; the loss
        # kernel reads per-row statistics only), backward reads them and writes the gradient
        # in place: counted from the kernels, whatever the framework's own loss costs.
        logit_word = training.activation_bytes
        loss_fwd = TE_LOSS_FORWARD_PASSES * logit_word * logits
        loss_bwd = TE_LOSS_BACKWARD_PASSES * logit_word * logits
    else:
        loss_fwd = profile.const("loss_forward_bytes_per_logit") * logits
        loss_bwd = profile.const("loss_backward_bytes_per_logit") * logits

    # Selective recompute: Megatron's re-runs the attention core only (Korthikanti et al. 2022,
    # Sec. 5); frameworks whose "selective" also re-runs some matmuls (torchtitan's layer/op SAC)
    # say what fraction of the rest of the layer they redo.
    # Under the attention policy, Megatron-Core's modules (--recompute-modules) say what.
    selective = profile.const("selective_recompute_layer_fraction") * (
        gemm_fwd + cast_fwd + elementwise_fwd
    )
    modules = training.selective_modules
    if training.selective_policy != "attention" or "core_attn" in modules:
        selective = selective + attn_recompute
    if modules:
        qkv_write = word * tokens * (m.q_width + m.kv_width + m.v_width) / tp / hbm
        selective = selective + _module_recompute_s(
            m, modules, gemms, training, device, profile, launch_s, block_s, dispatch, qkv_write
        )
    recompute = np.where(
        plans.recompute == RECOMPUTE_CODE["full"],
        layer_fwd,
        np.where(plans.recompute == RECOMPUTE_CODE["selective"], selective, 0.0),
    )
    return LayerCompute(
        layer_forward_s=layer_fwd,
        layer_backward_s=layer_bwd + recompute,
        layer_recompute_s=recompute,
        head_forward_s=head + loss_fwd,
        head_backward_s=gemm_bwd_factor * head + loss_bwd,
        attention_forward_s=attn_kernel_fwd,
        attention_backward_s=attn_kernel_bwd,
        layer_gemm_s=(1.0 + gemm_bwd_factor) * gemm_fwd
        + np.where(plans.recompute == RECOMPUTE_CODE["full"], gemm_fwd, 0.0),
    )
