"""FLOP counts: the GEMMs of one transformer layer, attention, the LM head, and model FLOPs.

Forward matmul of an ``M x K`` by ``K x N`` product costs ``2MNK`` FLOPs; backward costs twice
that (input and weight gradients; Narayanan et al. 2021, arXiv:2104.04473, Sec. 5.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscale.costmodel.params import active_params, embedding_params
from gpuscale.specs import ModelSpec

ArrayLike = np.ndarray | float | int


@dataclass(frozen=True, slots=True)
class Gemm:
    """One matmul of a layer's forward pass on one GPU: ``tokens x k`` times ``k x n``.
    Fields are arrays over plans."""

    name: str
    tokens: np.ndarray
    n: np.ndarray
    k: np.ndarray
    count: np.ndarray
    """How many such GEMMs run (e.g. experts on this GPU)."""

    @property
    def flops(self) -> np.ndarray:
        """FLOPs of one GEMM (``2 * tokens * n * k``)."""
        return 2.0 * self.tokens * self.n * self.k

    @property
    def total_flops(self) -> np.ndarray:
        return self.flops * self.count


def layer_gemms(m: ModelSpec, tokens: ArrayLike, tp: ArrayLike, ep: ArrayLike = 1) -> list[Gemm]:
    """The forward GEMMs of one layer on one GPU for ``tokens`` tokens (``b*s/cp``) under
    Megatron tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053, Sec. 3: QKV and MLP-up
    split by columns, output and MLP-down by rows)."""
    T = np.asarray(tokens, dtype=float)
    t = np.asarray(tp, dtype=float)
    one = np.ones_like(T * t)
    h, f = float(m.hidden_size), float(m.ffn_hidden_size)
    up_width = f * (2.0 if m.mlp == "gated" else 1.0)
    if m.is_moe:
        # Top-k routing sends T*k token-slots to E experts; with expert parallelism a GPU hosts
        # E/ep experts and receives ep times its own share (Fedus et al. 2021, arXiv:2101.03961).
        e = np.asarray(ep, dtype=float)
        experts_here = m.num_experts / e
        expert_tokens = T * m.experts_per_token * e / m.num_experts
    else:
        experts_here = one
        expert_tokens = T
    gemms = [
        # When TP exceeds the KV heads, each rank keeps a whole KV head (replicated).
        Gemm(
            "qkv", T * one, m.q_width / t + 2 * np.maximum(m.kv_width / t, m.head_dim), h * one, one
        ),
        Gemm("attn_out", T * one, h * one, m.q_width / t, one),
        Gemm("mlp_up", expert_tokens * one, up_width / t, h * one, experts_here * one),
        Gemm("mlp_down", expert_tokens * one, h * one, f / t, experts_here * one),
    ]
    if m.is_moe:
        gemms.append(Gemm("router", T * one, m.num_experts * one, h * one, one))
    return gemms


def attention_core_flops(
    m: ModelSpec, tokens: ArrayLike, kv_len: ArrayLike, tp: ArrayLike, causal_skip: bool
) -> np.ndarray:
    """Forward FLOPs of ``softmax(QK^T)V`` for one layer on one GPU: two batched matmuls of
    ``tokens x kv_len`` per head (Korthikanti et al. 2022, arXiv:2205.05198, App. A). A causal
    kernel that skips masked blocks (FlashAttention, Dao 2023 arXiv:2307.08691 Sec. 3.1) does half."""
    work = 4.0 * np.asarray(tokens, dtype=float) * np.asarray(kv_len, dtype=float) * m.q_width
    work = work / np.asarray(tp, dtype=float)
    return work * (0.5 if (causal_skip and m.causal) else 1.0)


def lm_head_gemm(m: ModelSpec, tokens: ArrayLike, tp: ArrayLike) -> Gemm:
    """The output projection to the (TP-split) vocabulary."""
    T = np.asarray(tokens, dtype=float)
    t = np.asarray(tp, dtype=float)
    one = np.ones_like(T * t)
    return Gemm("lm_head", T * one, m.vocab_size / t, m.hidden_size * one, one)


def model_flops_per_token(m: ModelSpec, seq_len: int, frozen_base: bool = False) -> float:
    """Model FLOPs per token for MFU: ``6N + 12 L H Q T`` (Chowdhery et al. 2022, PaLM,
    arXiv:2204.02311, App. B), N = active parameters without the input and position embeddings
    (the LM head is a matmul and counts), attention counted over the full sequence.
    Recompute is excluded by definition. With a frozen base (LoRA/QLoRA) the weights need no
    gradient: ``4N`` (forward and input gradient) instead of ``6N``; adapters are negligible."""
    lookup_tables = embedding_params(m) - (0 if m.tied_embeddings else m.vocab_size * m.hidden_size)
    n = (
        active_params(m)
        - lookup_tables
        + (m.vocab_size * m.hidden_size if m.tied_embeddings else 0)
    )
    return (4.0 if frozen_base else 6.0) * n + 12.0 * m.num_layers * m.q_width * seq_len
