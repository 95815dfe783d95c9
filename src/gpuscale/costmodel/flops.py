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


def layer_gemms(
    m: ModelSpec,
    tokens: ArrayLike,
    tp: ArrayLike,
    ep: ArrayLike = 1,
    etp: ArrayLike | None = None,
    sequence_split: ArrayLike = 1,
) -> list[Gemm]:
    """The forward GEMMs of one layer on one GPU for ``tokens`` tokens (``b*s/cp``) under
    Megatron tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053, Sec. 3: QKV and MLP-up
    split by columns, output and MLP-down by rows). A model whose layers differ (DeepSeek's
    leading dense layers) gets the mean layer: each MLP's ``count`` carries its share of them.
    Experts are split ``etp`` ways (default ``tp``) and spread ``ep`` ways (parallel folding:
    :class:`~gpuscale.specs.Plan`). ``sequence_split`` is the factor sequence parallelism divides
    each rank's tokens by before the attention (``tp`` with it, 1 without)."""
    T = np.asarray(tokens, dtype=float)
    t = np.asarray(tp, dtype=float)
    one = np.ones_like(T * t)
    h, f = float(m.hidden_size), float(m.ffn_hidden_size)
    gate = 2.0 if m.mlp == "gated" else 1.0
    gemms = attention_gemms(m, T, t, one, np.asarray(sequence_split, dtype=float))
    if not m.is_moe:
        return [
            *gemms,
            Gemm("mlp_up", T * one, gate * f / t, h * one, one),
            Gemm("mlp_down", T * one, h * one, f / t, one),
        ]
    # Top-k routing sends T*k token-slots to E experts; with expert parallelism a GPU hosts
    # E/ep experts and receives ep times its own share (Fedus et al. 2021, arXiv:2101.03961).
    # The MoE layer's input is each rank's sequence shard (T/tp with sequence parallelism, which
    # Megatron-Core requires for MoE with TP); an expert split etp ways sees the tokens of its
    # etp ranks: T*k*ep*etp/(tp*E) rows per local expert, f/etp columns.
    moe_share = m.moe_layer_share
    e = np.asarray(ep, dtype=float)
    et = t if etp is None else np.asarray(etp, dtype=float)
    experts_here = m.num_experts / e * moe_share
    expert_tokens = T * m.experts_per_token * e * et / (t * m.num_experts)
    gemms += [
        Gemm("mlp_up", expert_tokens * one, gate * f / et, h * one, experts_here * one),
        Gemm("mlp_down", expert_tokens * one, h * one, f / et, experts_here * one),
        Gemm("router", T * one, m.num_experts * one, h * one, moe_share * one),
    ]
    if m.shared_experts:
        # DeepSeekMoE's always-active experts (Dai et al. 2024, arXiv:2401.06066, Sec. 3.2):
        # every token, a tensor-parallel MLP of shared_experts x ffn_hidden_size (Megatron-Core
        # SharedExpertMLP).
        width = m.shared_experts * f
        gemms += [
            Gemm("mlp_shared_up", T * one, gate * width / t, h * one, moe_share * one),
            Gemm("mlp_shared_down", T * one, h * one, width / t, moe_share * one),
        ]
    if m.dense_layers:
        dense_share = 1.0 - moe_share
        width = float(m.dense_ffn_hidden_size or m.ffn_hidden_size)
        gemms += [
            Gemm("mlp_dense_up", T * one, gate * width / t, h * one, dense_share * one),
            Gemm("mlp_dense_down", T * one, h * one, width / t, dense_share * one),
        ]
    return gemms


def attention_gemms(
    m: ModelSpec, T: np.ndarray, t: np.ndarray, one: np.ndarray, split: np.ndarray
) -> list[Gemm]:
    """The attention projections of one layer. Multi-head latent attention (DeepSeek-V2,
    arXiv:2405.04434, Sec. 2.1, Eq. 9-14) projects the query through ``q_lora_rank`` and key and
    value through one ``kv_lora_rank`` latent (plus the decoupled rotary key); Megatron-Core
    keeps the two down-projections whole on every tensor-parallel rank (``parallel_mode
    'duplicated'`` in ``multi_latent_attention.py``), run on the rank's sequence shard (``s/TP``
    with sequence parallelism, ``_qkv_down_projection``; the latents are gathered before the
    up-projections), and splits the up- and output projections by heads."""
    h = float(m.hidden_size)
    if m.is_mla:
        heads = float(m.num_heads)
        qk = float(m.qk_nope_head_dim + m.qk_rope_head_dim)
        if m.q_lora_rank:
            query = [
                Gemm("q_down", T / split * one, m.q_lora_rank * one, h * one, one),
                Gemm("q_up", T * one, heads * qk / t, m.q_lora_rank * one, one),
            ]
        else:
            query = [Gemm("qkv", T * one, heads * qk / t, h * one, one)]
        if m.indexer_heads:
            # DeepSeek Sparse Attention's lightning indexer (GLM-5; the shapes of
            # costmodel/params.indexer_params), computed whole on every rank.
            d = float(m.indexer_head_dim)
            query += [
                Gemm(
                    "indexer_q", T * one, m.indexer_heads * d * one, (m.q_lora_rank or h) * one, one
                ),
                Gemm("indexer_k", T * one, d * one, h * one, one),
                Gemm("indexer_weights", T * one, m.indexer_heads * one, h * one, one),
            ]
        latent = float(m.kv_lora_rank + m.qk_rope_head_dim)
        kv_up = heads * (m.qk_nope_head_dim + m.v_head_dim) / t
        return [
            *query,
            Gemm("kv_down", T / split * one, latent * one, h * one, one),
            Gemm("kv_up", T * one, kv_up, m.kv_lora_rank * one, one),
            Gemm("attn_out", T * one, h * one, heads * m.v_head_dim / t, one),
        ]
    return [
        # When TP exceeds the KV heads, each rank keeps a whole KV head (replicated).
        Gemm(
            "qkv", T * one, m.q_width / t + 2 * np.maximum(m.kv_width / t, m.head_dim), h * one, one
        ),
        Gemm("attn_out", T * one, h * one, m.q_width / t, one),
    ]


def attention_core_flops(
    m: ModelSpec,
    tokens: ArrayLike,
    kv_len: ArrayLike,
    tp: ArrayLike,
    causal_skip: bool,
    decode_rows: bool = False,
) -> np.ndarray:
    """Forward FLOPs of ``softmax(QK^T)V`` for one layer on one GPU (the mean layer where
    layers differ): two batched matmuls of ``tokens x kv_len`` per head (Korthikanti et al.
    2022, arXiv:2205.05198, App. A), ``QK^T`` over the query/key width and ``PV`` over the value
    width (MLA: ``qk_nope + qk_rope`` and ``v_head_dim``, DeepSeek-V2 Sec. 2.1). ``tokens`` are
    whole ``kv_len``-token sequences (or, under context parallelism, load-balanced shards of
    them: ``tokens / kv_len`` sequences' worth), or with ``decode_rows`` one query row per
    sequence at the end of its ``kv_len`` context. A causal kernel that skips masked blocks
    (FlashAttention, Dao 2023 arXiv:2307.08691 Sec. 3.1) does half. A sliding-window layer
    (gpt-oss alternates them) lets each query see at most ``sliding_window`` keys (Beltagy et al.
    2020, arXiv:2004.05150, Sec. 3.1); a chunked-attention layer (Llama 4's RoPE layers,
    ``attention_chunk_size``; transformers Llama4TextAttention's chunked causal mask) only the
    keys of its own chunk. A kernel that skips masked blocks computes only those pairs, one that
    builds the whole score matrix (no ``causal_skip``) saves nothing, except decode rows, which
    read their window or chunk (:func:`local_pairs`)."""
    T = np.asarray(tokens, dtype=float)
    kv = np.asarray(kv_len, dtype=float)
    if m.is_mla:
        width = float(m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim))
    else:
        width = 2.0 * m.q_width
    half = 0.5 if (causal_skip and m.causal) else 1.0
    full = 2.0 * T * kv * width * half
    mixed = full
    for size, share, kind in local_layers(m):
        pairs = local_pairs(T, kv, size, kind, causal_skip, decode_rows)
        mixed = mixed + share * (np.where(kv > size, 2.0 * pairs * width, full) - full)
    return mixed / np.asarray(tp, dtype=float)


def local_layers(m: ModelSpec) -> list[tuple[float, float, str]]:
    """``(size, share of the layers, kind)`` of the layers that attend to a bounded span: a
    sliding window (``window``) or a chunk (``chunk``)."""
    kinds = (
        (m.sliding_window, m.sliding_window_layers, "window"),
        (m.attention_chunk_size, m.attention_chunk_layers, "chunk"),
    )
    return [(float(size), n / m.num_layers, kind) for size, n, kind in kinds if size and n]


def decode_keys(m: ModelSpec, kv_len: float) -> float:
    """Keys one decode row reads in the mean layer at a ``kv_len``-token context: all of them,
    less what windowed and chunked layers do not attend to (:func:`local_pairs`)."""
    keys = kv_len
    for size, share, kind in local_layers(m):
        if kv_len > size:
            row = float(local_pairs(np.array(1.0), np.array(kv_len), size, kind, False, True))
            keys -= share * (kv_len - row)
    return keys


def local_pairs(
    T: np.ndarray, kv: np.ndarray, size: float, kind: str, causal_skip: bool, decode_rows: bool
) -> np.ndarray:
    """Query-key pairs of ``T`` query tokens over a ``kv``-token causal context when each query
    sees at most ``size`` keys (``kind`` ``window``: the query at position ``p`` sees
    ``min(p + 1, size)``) or only its own ``size``-token chunk (``chunk``: ``p mod size + 1``).
    Whole sequences (or load-balanced shards): ``T / kv`` times one sequence's sum over its
    positions, for a window ``size (size + 1) / 2 + (kv - size) size``, for chunks
    ``q size (size + 1) / 2 + r (r + 1) / 2`` with ``kv = q size + r``. Decode rows: ``T`` times
    the last position's count. Without block skipping the whole ``T x kv`` score matrix is
    computed, except for decode rows."""
    if kind == "window":
        w = np.minimum(kv, size)
        sequence = w * (w + 1.0) / 2.0 + np.maximum(kv - size, 0.0) * size
        last = np.minimum(kv, size)
    else:
        q = np.floor(kv / size)
        r = kv - q * size
        sequence = q * size * (size + 1.0) / 2.0 + r * (r + 1.0) / 2.0
        last = np.mod(np.maximum(kv - 1.0, 0.0), size) + 1.0
    if decode_rows:
        return T * last
    if causal_skip:
        return T / np.maximum(kv, 1.0) * sequence
    return T * kv


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
    # QK^T and PV over the query/key and the value widths (both q_width, or MLA's
    # qk_nope + qk_rope and v_head_dim per head): 2 x width FLOPs per token-key forward, x3.
    if m.is_mla:
        widths = float(m.num_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim))
    else:
        widths = 2.0 * m.q_width
    return (4.0 if frozen_base else 6.0) * n + 6.0 * m.num_layers * widths * seq_len
