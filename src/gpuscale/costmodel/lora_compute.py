"""Time of the LoRA adapters of one layer: the low-rank GEMMs and the element-wise work around
them, which the frozen base GEMMs do not include.

PEFT computes ``base(x) + lora_B(lora_A(dropout(x))) * scaling`` for every adapted linear
(huggingface/peft ``tuners/lora/layer.py``, ``Linear.forward``; Hu et al. 2021, Sec. 4.1): two
skinny GEMMs of rank ``r`` that are bound by reading ``x`` and writing the ``tokens x n``
output, then a scaling multiply and an add over the output width. On a GPU whose FLOP/byte
ratio is high (H100: ~260 at the efficiencies of the generic profile) this traffic is a sizeable
share of the base GEMM's time, which is why LoRA runs slower per token than its FLOPs suggest.
"""

from __future__ import annotations

import numpy as np

from gpuscale.costmodel.model_states import block_linears, linear_shapes
from gpuscale.costmodel.profile import Profile
from gpuscale.specs import Device, ModelSpec, PlanBatch, Training

COLUMN_PARALLEL = ("q", "k", "v", "gate", "up")
"""Megatron splits these by output columns over TP (Shoeybi et al. 2019, Sec. 3); ``o`` and
``down`` by input rows."""


def lora_adapter_s(
    m: ModelSpec,
    device: Device,
    training: Training,
    plans: PlanBatch,
    profile: Profile,
    tokens: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward seconds of one layer's adapters per micro-batch (zeros unless
    LoRA/QLoRA)."""
    n_plans = len(plans)
    if not training.is_lora:
        return np.zeros(n_plans), np.zeros(n_plans)
    tp = plans.tp.astype(float)
    word = 2.0  # adapters and activations in 16 bits
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    peak = device.peak(device.half_precision) * 1e12
    curve = profile.gemm_curve(device.id, device.generation, device.half_precision)
    launch = profile.const("kernel_launch_us") * 1e-6
    passes = profile.const("lora_output_passes")
    r = float(training.lora_rank)
    shapes = linear_shapes(m)
    fwd = np.zeros(n_plans)
    bwd = np.zeros(n_plans)
    for target in training.lora_targets:
        if target not in shapes:
            continue  # 'head' is priced with the output layer; 'gate' only in gated MLPs
        # The mean block's copies (block_linears): a token meets top-k of the routed experts'
        # adapters, every shared expert's, and the dense MLP's in the dense blocks' share.
        for x in block_linears(m, target):
            k = x.d_in / np.where(target in COLUMN_PARALLEL, 1.0, tp)
            n = x.d_out / np.where(target in COLUMN_PARALLEL, tp, 1.0)
            share = x.count * m.experts_per_token / m.num_experts if x.routed else x.count
            t = tokens * share
            flops = 2.0 * t * r * (k + n)
            math = flops / (peak * curve(np.maximum(flops, 1.0) / 2.0))
            # Forward: lora_A reads x (k), lora_B writes the output (n), then scaling and the
            # add read and write it again (``passes`` output-width vectors).
            f_bytes = word * t * (k + (1.0 + passes) * n)
            # Backward: scaling's gradient (read + write the output gradient), dB and d(A x)
            # read it once each; dA reads x; the adapter's dx is written and added into the
            # base layer's dx (read 2, write 1): 4 output-width and 5 input-width passes.
            b_bytes = word * t * (4.0 * n + 5.0 * k)
            fwd = fwd + np.maximum(math, f_bytes / hbm) + 4.0 * launch * x.blocks
            bwd = bwd + np.maximum(2.0 * math, b_bytes / hbm) + 7.0 * launch * x.blocks
    return fwd, bwd
