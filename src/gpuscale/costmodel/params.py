"""Parameter counts by component, exactly as a PyTorch module of the architecture holds them.

Cross-checked in tests against ``sum(p.numel())`` of models built on the ``meta`` device.
"""

from __future__ import annotations

from gpuscale.specs import ModelSpec


def attention_params(m: ModelSpec) -> int:
    """Q, K, V and output projections of one layer (GQA: K and V have ``num_kv_heads`` heads).
    Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 Sec. 2.1): query down/up
    projections through ``q_lora_rank``, a joint KV down-projection to ``kv_lora_rank`` plus the
    rotary key, the KV up-projection, the output projection, and RMSNorms on both latents."""
    if m.is_mla:
        h, heads = m.hidden_size, m.num_heads
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = (
            h * m.q_lora_rank + m.q_lora_rank * heads * qk + m.q_lora_rank
            if m.q_lora_rank
            else h * heads * qk
        )
        kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv + heads * m.v_head_dim * h + indexer_params(m)
    # An output gate (Qwen3-Next/Qwen3.5 attn_output_gate) doubles q_proj's output width
    # (transformers Qwen3_5MoeAttention: q_proj hidden -> heads * head_dim * 2).
    q_out = m.q_width * (2 if m.attention_output_gate else 1)
    weights = m.hidden_size * (q_out + 2 * m.kv_width) + m.q_width * m.hidden_size
    bias = (q_out + 2 * m.kv_width if m.qkv_bias else 0) + (m.hidden_size if m.linear_bias else 0)
    return weights + bias + qk_norm_params(m) + (m.num_heads if m.attention_sinks else 0)


def qk_norm_params(m: ModelSpec) -> int:
    """The QK norms' scales of one attention layer: one head's width each for a per-head
    RMSNorm (transformers Qwen3Attention ``q_norm``/``k_norm``), the whole query and key width
    for MiniMax-M2's (``q_norm`` of ``num_heads x head_dim``), none for an L2 norm (Llama 4)."""
    if m.qk_norm == "rmsnorm":
        return 2 * m.head_dim
    if m.qk_norm == "rmsnorm_full":
        return m.q_width + m.kv_width
    return 0


def indexer_params(m: ModelSpec) -> int:
    """The DeepSeek Sparse Attention lightning indexer of one layer (transformers
    DeepseekV32Indexer, reused by GLM-5): wq_b from the query latent to its heads, wk to one key
    head, a LayerNorm on that key, weights_proj to one weight per head."""
    if not m.indexer_heads:
        return 0
    d = m.indexer_head_dim
    q_in = m.q_lora_rank or m.hidden_size
    return q_in * m.indexer_heads * d + m.hidden_size * d + 2 * d + m.hidden_size * m.indexer_heads


def linear_attention_params(m: ModelSpec) -> int:
    """One Gated DeltaNet layer (Yang et al. 2024, arXiv:2412.06464) as transformers'
    Qwen3_5MoeGatedDeltaNet holds it: in_proj_qkv (h -> 2 key + value), in_proj_z (h -> value),
    in_proj_b and in_proj_a (h -> value heads), a depthwise conv over q/k/v, dt_bias and A_log
    per value head, a gated RMSNorm of one value head, out_proj (value -> h)."""
    key = m.linear_num_key_heads * m.linear_key_head_dim
    value = m.linear_num_value_heads * m.linear_value_head_dim
    h = m.hidden_size
    projections = h * (2 * key + value) + h * value + 2 * h * m.linear_num_value_heads
    conv = (2 * key + value) * m.linear_conv_kernel
    return projections + conv + 2 * m.linear_num_value_heads + m.linear_value_head_dim + value * h


def mean_attention_params(m: ModelSpec) -> int:
    """Token-mixer parameters per block, averaged over the blocks: hybrids mix full-attention
    and Gated DeltaNet layers, so ``num_layers * mean_attention_params`` is their total."""
    if not m.has_gated_deltanet:
        return attention_params(m)
    full = m.num_layers - m.linear_attention_layers
    linear = m.linear_attention_layers * linear_attention_params(m)
    return round((full * attention_params(m) + linear) / m.num_layers)


def mlp_weights(m: ModelSpec, width: int = 0) -> int:
    """The weight matrices (no biases) of one MLP of inner ``width`` (0: ``ffn_hidden_size``):
    gated SwiGLU has three ``h x f`` matrices (Shazeer 2020), plain has two."""
    matrices = 3 if m.mlp == "gated" else 2
    return matrices * m.hidden_size * (width or m.ffn_hidden_size)


def mlp_params(m: ModelSpec) -> int:
    """One expert's MLP: its matrices (:func:`mlp_weights`) and, with ``linear_bias``, biases."""
    matrices = 3 if m.mlp == "gated" else 2
    bias = ((matrices - 1) * m.ffn_hidden_size + m.hidden_size) if m.linear_bias else 0
    return mlp_weights(m) + bias


def norm_params(m: ModelSpec) -> int:
    """One normalisation layer: RMSNorm has a scale, LayerNorm a scale and a shift."""
    return m.hidden_size * (1 if m.norm == "rmsnorm" else 2)


def router_params(m: ModelSpec) -> int:
    """The MoE gate: a ``hidden x num_experts`` linear, without bias (Mixtral) or with one
    where the model's linears have biases (gpt-oss ``GptOssTopKRouter``)."""
    if not m.is_moe:
        return 0
    return (m.hidden_size + (1 if m.linear_bias else 0)) * m.num_experts


def _dense_mlp_params(m: ModelSpec) -> int:
    """The dense MLP of a non-MoE layer of an MoE model (``dense_ffn_hidden_size``)."""
    return mlp_weights(m, m.dense_ffn_hidden_size)


def _moe_block_mlp(m: ModelSpec) -> int:
    """Routed experts, shared experts (with Qwen's sigmoid gate on them, a ``hidden x 1``
    linear) and the router of one MoE layer."""
    gate = m.hidden_size if m.shared_expert_gate else 0
    return (m.num_experts + m.shared_experts) * mlp_params(m) + router_params(m) + gate


def layer_params(m: ModelSpec) -> int:
    """One transformer block: attention, all experts' MLPs, router, two norms. A model whose
    first ``dense_layers`` blocks have a dense MLP (DeepSeek-V3) gets the mean over its blocks,
    so ``num_layers * layer_params`` is still the blocks' total."""
    if not m.dense_layers:
        return mean_attention_params(m) + _moe_block_mlp(m) + 2 * norm_params(m)
    mlp = m.dense_layers * _dense_mlp_params(m) + (m.num_layers - m.dense_layers) * _moe_block_mlp(
        m
    )
    return mean_attention_params(m) + 2 * norm_params(m) + round(mlp / m.num_layers)


def expert_layer_params(m: ModelSpec) -> int:
    """The routed experts' MLP parameters in the mean block of :func:`layer_params` (0 for a
    dense model): all experts of an MoE block, times the MoE blocks' share when the first
    ``dense_layers`` blocks have a dense MLP instead. The part expert parallelism splits;
    ``layer_params - expert_layer_params`` is what every rank of a stage holds whole."""
    if not m.is_moe:
        return 0
    return round(m.num_experts * mlp_params(m) * m.moe_layer_share)


def embedding_params(m: ModelSpec) -> int:
    """Token embedding, learned positions if any, and the untied output head."""
    positions = m.max_seq_len * m.hidden_size if m.position == "learned" else 0
    head = 0 if m.tied_embeddings else m.vocab_size * m.hidden_size
    return m.vocab_size * m.hidden_size + positions + head


def total_params(m: ModelSpec) -> int:
    """Every parameter, tied embeddings counted once, plus the final norm and ``extra_params``."""
    return m.num_layers * layer_params(m) + embedding_params(m) + norm_params(m) + m.extra_params


def active_params(m: ModelSpec) -> int:
    """Parameters touched by one token: only ``experts_per_token`` of the experts."""
    moe_layers = m.num_layers - m.dense_layers
    inactive = (m.num_experts - m.experts_per_token) * mlp_params(m) * moe_layers
    return total_params(m) - inactive


def breakdown(m: ModelSpec) -> dict[str, int]:
    """Parameter count per component (sums to :func:`total_params`)."""
    return {
        "embedding": embedding_params(m),
        "attention": m.num_layers * mean_attention_params(m),
        "mlp": m.num_layers * (layer_params(m) - mean_attention_params(m) - 2 * norm_params(m)),
        "norm": (2 * m.num_layers + 1) * norm_params(m),
        "other": m.extra_params,
    }
