"""Serving latency: time to first token (prefill), time per output token (decode), throughput.

Prefill is a forward pass over the prompt: the same GEMM rooflines as training. Decode reads
every weight (and the whole KV cache) once per generated token, so at small batch it is bound by
memory bandwidth, not FLOPs (Pope et al. 2022, "Efficiently Scaling Transformer Inference",
arXiv:2211.05102, Sec. 2-3). Tensor parallelism adds two all-reduces per layer per step, which at
decode are latency-bound (Sec. 3.3). Mixture-of-experts decode reads only the experts the batch
touches: ``E * (1 - (1 - k/E)^b)`` of them in expectation under uniform routing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.compute import gemm_time
from gpuscale.costmodel.flops import (
    Gemm,
    attention_core_flops,
    decode_keys,
    layer_gemms,
    lm_head_gemm,
)
from gpuscale.costmodel.inference_memory import inference_memory, weight_bytes_per_param
from gpuscale.costmodel.model_states import DTYPE_BYTES
from gpuscale.costmodel.profile import Profile
from gpuscale.errors import require
from gpuscale.specs import Cluster, Device, ModelSpec
from gpuscale.specs.training import Inference

SIXTEEN_BIT = 2.0


@dataclass(frozen=True, slots=True)
class InferenceEstimate:
    ttft_s: float
    """Prefill of the whole batch's prompts, the first token included."""
    tpot_s: float
    """Mean time per output token after the first (decode at the mid-generation context)."""
    e2e_s: float
    output_tokens_per_s: float
    """All sequences, the replica's GPUs together; prefill counted in the time."""
    num_gpus: int
    memory_per_gpu_bytes: float
    fits: bool
    breakdown: dict[str, float]
    """Seconds of one decode step by term, and of the prefill."""

    def row(self) -> dict[str, Any]:
        return {
            "fits": self.fits,
            "memory_per_gpu_gib": self.memory_per_gpu_bytes / 2**30,
            "ttft_ms": self.ttft_s * 1e3,
            "tpot_ms": self.tpot_s * 1e3,
            "e2e_s": self.e2e_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.num_gpus,
            "breakdown": self.breakdown,
        }


def _compute_precision(inference: Inference, device: Device) -> str:
    # W8A8 FP8 runs the GEMMs in FP8; weight-only int8/int4 dequantize into 16-bit GEMMs.
    return "fp8" if inference.weight_dtype == "fp8" else device.half_precision


def _weight_bytes(inference: Inference) -> float:
    # Serving weights are stored already quantized: no per-GEMM weight cast as in FP8 training.
    return weight_bytes_per_param(inference.weight_dtype)


def _decode_gemms(m: ModelSpec, batch: int, tp: int) -> list[Gemm]:
    gemms = layer_gemms(m, batch, tp)
    if not m.is_moe:
        return gemms
    touched = m.num_experts * (1.0 - (1.0 - m.experts_per_token / m.num_experts) ** batch)
    per_expert = batch * m.experts_per_token / touched
    out = []
    for g in gemms:
        if g.name in ("mlp_up", "mlp_down"):
            g = dataclasses.replace(
                g,
                tokens=np.full_like(g.tokens, per_expert),
                # The mean layer's routed experts run in its MoE layers only.
                count=np.full_like(g.count, touched * m.moe_layer_share),
            )
        out.append(g)
    return out


def _layer_time(
    m: ModelSpec,
    cluster: Cluster,
    inference: Inference,
    profile: Profile,
    gemms: list[Gemm],
    tokens: float,
    kv_len: float,
    causal_square: bool,
    tp: int,
) -> dict[str, float]:
    device = cluster.device
    launch = profile.const("kernel_launch_us") * 1e-6
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    precision = _compute_precision(inference, device)
    wbytes = _weight_bytes(inference)
    # The FLOP-curve roofline on every device, also where the profile holds kernel times
    # measured in replayed graphs (``costmodel.serving.gemm.serving_gemm_time``, which the
    # under-load model uses): this table is the static-batch baseline the serving model is
    # compared against, and the readings move its published runs (TensorRT-LLM 0.5/0.9, eager
    # engines) from 23.0% to 24.2% MAPE (docs/benchmarks.md, "Serving latency vs published
    # inference runs").
    gemm = float(
        sum(float(np.sum(gemm_time(g, precision, device, profile, launch, wbytes))) for g in gemms)
    )
    # Attention: prefill is compute-bound flash attention over the causal square; decode reads
    # the KV cache of every sequence once.
    flops = float(
        np.sum(
            attention_core_flops(
                m, tokens, kv_len, tp, causal_skip=causal_square, decode_rows=not causal_square
            )
        )
    )
    kv_heads = max(m.num_kv_heads / tp, 1.0)
    sequences = tokens if not causal_square else tokens / kv_len
    # A decode row reads only the keys its layer attends to (windows, chunks).
    read_len = kv_len if causal_square else decode_keys(m, kv_len)
    kv_read = 2.0 * kv_heads * m.head_dim * read_len * sequences * DTYPE_BYTES[inference.kv_dtype]
    if causal_square:
        math_rate = (
            device.peak(device.half_precision)
            * 1e12
            * float(profile.attention_at(device.id, device.generation, kv_len))
        )
    else:
        # One query row per sequence: decode attention kernels run on the SIMT (fp32 FMA) units,
        # not the tensor cores (masked multi-head attention kernels of FasterTransformer/TRT-LLM).
        math_rate = device.peak("fp32") * 1e12 * profile.attention(device.id, device.generation)
    attention = max(flops / math_rate, kv_read / hbm, launch)
    elementwise = (
        2.0
        * tokens
        * (
            profile.const("elementwise_hidden_passes") * m.hidden_size / tp
            + profile.const("elementwise_ffn_passes") * m.ffn_hidden_size * m.experts_per_token / tp
        )
        / hbm
        + profile.const("elementwise_kernels_per_layer") * launch
    )
    levels = LevelBandwidth.of(cluster, profile)
    per_node = min(tp, cluster.gpus_per_node)
    comm = 2.0 * float(
        collective_time_s("all_reduce", tokens * m.hidden_size * SIXTEEN_BIT, tp, per_node, levels)
    )
    return {"gemm": gemm, "attention": attention, "elementwise": elementwise, "tp_comm": comm}


def estimate_inference(
    model: ModelSpec,
    cluster: Cluster,
    inference: Inference,
    *,
    tp: int,
    input_len: int,
    output_len: int,
    profile: Profile,
    pp: int = 1,
) -> InferenceEstimate:
    """Latency and throughput of serving ``inference.batch`` requests of ``input_len`` prompt
    and ``output_len`` generated tokens on ``tp * pp`` GPUs (static batching)."""
    b = inference.batch
    layers = model.num_layers
    levels = LevelBandwidth.of(cluster, profile)
    launch = profile.const("kernel_launch_us") * 1e-6
    head_precision = cluster.device.half_precision
    require(
        model.causal,
        f"{model.name} is an encoder (no causal decoding); serving latency "
        "per generated token applies to decoder models",
    )
    # Fails with the accepted precisions when the device lacks FP8 (W8A8) tensor cores.
    cluster.device.peak(_compute_precision(inference, cluster.device))

    # Prefill: all prompt tokens in one pass; only the last position goes through the LM head.
    prompt_tokens = float(b * input_len)
    pre = _layer_time(
        model,
        cluster,
        inference,
        profile,
        layer_gemms(model, prompt_tokens, tp),
        prompt_tokens,
        float(input_len),
        True,
        tp,
    )
    head = float(
        np.sum(
            gemm_time(lm_head_gemm(model, b, tp), head_precision, cluster.device, profile, launch)
        )
    )
    hop = (
        float(
            collective_time_s(
                "send_recv", prompt_tokens * model.hidden_size * SIXTEEN_BIT / tp, 2, 1, levels
            )
        )
        if pp > 1
        else 0.0
    )
    prefill = layers * sum(pre.values()) + head + (pp - 1) * hop

    # Decode at the mean context length of the generation.
    context = input_len + output_len / 2.0
    dec = _layer_time(
        model,
        cluster,
        inference,
        profile,
        _decode_gemms(model, b, tp),
        float(b),
        context,
        False,
        tp,
    )
    decode_hop = (
        float(
            collective_time_s("send_recv", b * model.hidden_size * SIXTEEN_BIT / tp, 2, 1, levels)
        )
        if pp > 1
        else 0.0
    )
    step_overhead = profile.const("decode_step_overhead_us") * 1e-6
    tpot = layers * sum(dec.values()) + head + (pp - 1) * decode_hop + step_overhead

    e2e = prefill + max(output_len - 1, 0) * tpot
    mem = inference_memory(model, inference, tp, pp, profile)
    total = float(mem.total[0])
    breakdown = {f"decode_{k}": layers * v for k, v in dec.items()}
    breakdown.update(
        decode_lm_head=head,
        decode_pipeline=(pp - 1) * decode_hop,
        decode_step_overhead=step_overhead,
        prefill=prefill,
    )
    return InferenceEstimate(
        ttft_s=prefill,
        tpot_s=tpot,
        e2e_s=e2e,
        output_tokens_per_s=b * output_len / e2e if e2e > 0 else 0.0,
        num_gpus=tp * pp,
        memory_per_gpu_bytes=total,
        fits=total <= cluster.device.memory_bytes,
        breakdown=breakdown,
    )
