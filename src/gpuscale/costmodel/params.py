"""Parameter counts by component, exactly as a PyTorch module of the architecture holds them.

Cross-checked in tests against ``sum(p.numel())`` of models built on the ``meta`` device.
"""

from __future__ import annotations

from gpuscale.specs import ModelSpec


def attention_params(m: ModelSpec) -> int:
    """Q, K, V and output projections of one layer (GQA: K and V have ``num_kv_heads`` heads)."""
    weights = m.hidden_size * (m.q_width + 2 * m.kv_width) + m.q_width * m.hidden_size
    bias = (m.q_width + 2 * m.kv_width if m.qkv_bias else 0) + (
        m.hidden_size if m.linear_bias else 0
    )
    return weights + bias


def mlp_params(m: ModelSpec) -> int:
    """One expert's MLP: gated SwiGLU has three ``h x f`` matrices (Shazeer 2020), plain has two."""
    matrices = 3 if m.mlp == "gated" else 2
    bias = ((matrices - 1) * m.ffn_hidden_size + m.hidden_size) if m.linear_bias else 0
    return matrices * m.hidden_size * m.ffn_hidden_size + bias


def norm_params(m: ModelSpec) -> int:
    """One normalisation layer: RMSNorm has a scale, LayerNorm a scale and a shift."""
    return m.hidden_size * (1 if m.norm == "rmsnorm" else 2)


def router_params(m: ModelSpec) -> int:
    """The MoE gate: a ``hidden x num_experts`` linear without bias (Mixtral)."""
    return m.hidden_size * m.num_experts if m.is_moe else 0


def layer_params(m: ModelSpec) -> int:
    """One transformer block: attention, all experts' MLPs, router, two norms."""
    return (
        attention_params(m) + m.num_experts * mlp_params(m) + router_params(m) + 2 * norm_params(m)
    )


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
    inactive = (m.num_experts - m.experts_per_token) * mlp_params(m) * m.num_layers
    return total_params(m) - inactive


def breakdown(m: ModelSpec) -> dict[str, int]:
    """Parameter count per component (sums to :func:`total_params`)."""
    return {
        "embedding": embedding_params(m),
        "attention": m.num_layers * attention_params(m),
        "mlp": m.num_layers * (m.num_experts * mlp_params(m) + router_params(m)),
        "norm": (2 * m.num_layers + 1) * norm_params(m),
        "other": m.extra_params,
    }
