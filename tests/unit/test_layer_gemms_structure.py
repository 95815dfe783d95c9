"""The training model's GEMMs follow each catalog architecture: multi-head latent attention
(DeepSeek-V2 Sec. 2.1), shared experts and leading dense layers (DeepSeek-V3), sliding windows
(gpt-oss). Cross-checked against the parameter counts (``costmodel/params.py``), which tests
pin to real PyTorch modules: a forward matmul costs two FLOPs per weight per token."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.flops import attention_core_flops, layer_gemms
from gpuscale.costmodel.params import attention_params

T = 4096.0


def _per_token(gemms, names=None) -> float:
    return float(
        sum(float(np.ravel(g.total_flops)[0]) for g in gemms if names is None or g.name in names)
        / T
    )


@pytest.mark.parametrize("model_id", ["deepseek-v3", "kimi-k2.5", "glm-5"])
def test_mla_projections_cost_two_flops_per_weight(model_id: str) -> None:
    m = catalog.model(model_id)
    assert m.is_mla
    attention = {
        "q_down",
        "q_up",
        "qkv",
        "kv_down",
        "kv_up",
        "attn_out",
        "indexer_q",
        "indexer_k",
        "indexer_weights",
    }
    # The latents' RMSNorm scales are weights without a matmul, and so is the DSA indexer's
    # key LayerNorm (GLM-5: scale and shift of its head width).
    norms = m.q_lora_rank + m.kv_lora_rank + (2 * m.indexer_head_dim if m.indexer_heads else 0)
    matmul_weights = attention_params(m) - norms
    assert _per_token(layer_gemms(m, T, 1), attention) == pytest.approx(2.0 * matmul_weights)


def test_mla_down_projections_are_whole_on_each_rank_over_its_sequence_shard() -> None:
    m = catalog.model("deepseek-v3")
    one = {g.name: float(np.ravel(g.total_flops)[0]) for g in layer_gemms(m, T, 1)}
    # TP 2 without sequence parallelism: every rank projects the whole sequence.
    full = {g.name: float(np.ravel(g.total_flops)[0]) for g in layer_gemms(m, T, 2)}
    # With it: each rank projects its half of the sequence (Megatron-Core _qkv_down_projection).
    shard = {
        g.name: float(np.ravel(g.total_flops)[0]) for g in layer_gemms(m, T, 2, sequence_split=2)
    }
    for name in ("q_down", "kv_down"):
        assert full[name] == pytest.approx(one[name])
        assert shard[name] == pytest.approx(one[name] / 2)
    for name in ("q_up", "kv_up", "attn_out", "mlp_shared_up", "mlp_dense_down"):
        assert full[name] == pytest.approx(one[name] / 2)
        assert shard[name] == pytest.approx(one[name] / 2)
    # Before the MLA shapes, the query/key/value projection of DeepSeek-V3 was priced as
    # 128 heads x 192 of full multi-head attention: 7.6x these FLOPs.
    full_mha = 2.0 * m.hidden_size * 3 * m.num_heads * m.head_dim
    assert full_mha / _per_token(layer_gemms(m, T, 1), {"q_down", "q_up", "kv_down", "kv_up"}) > 7


def test_mean_layer_counts_routed_shared_and_dense_mlps() -> None:
    m = catalog.model("deepseek-v3")
    h, f = m.hidden_size, m.ffn_hidden_size
    moe_layers = m.num_layers - m.dense_layers
    expected = (
        m.dense_layers * 3 * h * m.dense_ffn_hidden_size
        + moe_layers * (m.experts_per_token + m.shared_experts) * 3 * h * f
        + moe_layers * h * m.num_experts  # router
    )
    mlp = {
        "mlp_up",
        "mlp_down",
        "mlp_shared_up",
        "mlp_shared_down",
        "mlp_dense_up",
        "mlp_dense_down",
        "router",
    }
    for ep in (1, 8, 64):
        per_layer = _per_token(layer_gemms(m, T, 1, ep), mlp)
        assert per_layer * m.num_layers == pytest.approx(2.0 * expected)


def test_dense_models_are_unchanged_by_the_moe_terms() -> None:
    m = catalog.model("llama3.1-70b")
    names = [g.name for g in layer_gemms(m, T, 4)]
    assert names == ["qkv", "attn_out", "mlp_up", "mlp_down"]


def test_attention_core_widths_and_windows() -> None:
    ds = catalog.model("deepseek-v3")
    # QK^T over 192 per head, PV over 128: 2 x T x kv x heads x 320, causal half.
    got = float(attention_core_flops(ds, T, T, 1, causal_skip=True))
    assert got == pytest.approx(2.0 * T * T * ds.num_heads * (128 + 64 + 128) * 0.5)

    oss = catalog.model("gpt-oss-120b")
    assert oss.sliding_window == 128 and oss.sliding_window_layers == oss.num_layers // 2
    full_only = dataclasses.replace(oss, sliding_window=0, sliding_window_layers=0)
    long = float(attention_core_flops(oss, T, T, 1, causal_skip=True))
    dense = float(attention_core_flops(full_only, T, T, 1, causal_skip=True))
    # Half the layers attend to at most 128 keys (the first 127 queries to fewer), counted
    # query by query.
    pairs = sum(min(p + 1, 128) for p in range(int(T)))
    assert long == pytest.approx(0.5 * dense + 0.5 * 2.0 * pairs * 2 * oss.q_width)
    # A kernel that builds the whole score matrix saves nothing from the window...
    unfused = float(attention_core_flops(oss, T, T, 1, causal_skip=False))
    assert unfused == pytest.approx(float(attention_core_flops(full_only, T, T, 1, False)))
    # ... except decode rows, which read only the window (each of a batch of 4).
    row = float(attention_core_flops(oss, 4.0, T, 1, causal_skip=False, decode_rows=True))
    expected = 4 * (0.5 * 2 * T * 2 * oss.q_width + 0.5 * 2 * 128 * 2 * oss.q_width)
    assert row == pytest.approx(expected)
    # Two whole sequences pay twice one sequence's pairs (not one sequence's suffix).
    two = float(attention_core_flops(oss, 2 * T, T, 1, causal_skip=True))
    assert two == pytest.approx(2 * long)
    # Within the window both are the same.
    short = float(attention_core_flops(oss, 64.0, 64.0, 1, causal_skip=True))
    assert short == pytest.approx(float(attention_core_flops(full_only, 64.0, 64.0, 1, True)))


@pytest.mark.parametrize(("sequences", "context"), [(1, 32768), (3, 20000), (0.25, 20000)])
def test_chunked_attention_counts_each_query_within_its_chunk(
    sequences: float, context: float
) -> None:
    """Llama 4's 36 RoPE layers attend within 8,192-token chunks: the query at position p sees
    p mod 8,192 + 1 keys (counted here position by position); the 12 NoPE layers see all.
    Several sequences pay for each (a micro-batch), a quarter of one for a load-balanced
    context-parallel shard; decode rows read their own chunk's keys."""
    scout = catalog.model("llama4-scout")
    full_only = dataclasses.replace(scout, attention_chunk_size=0, attention_chunk_layers=0)
    tokens = sequences * context
    got = float(attention_core_flops(scout, tokens, context, 1, causal_skip=True))
    dense = float(attention_core_flops(full_only, tokens, context, 1, causal_skip=True))
    c = scout.attention_chunk_size
    pairs = sequences * sum(p % c + 1 for p in range(int(context)))
    share = scout.attention_chunk_layers / scout.num_layers
    assert got == pytest.approx((1 - share) * dense + share * 2.0 * pairs * 2 * scout.q_width)
    rows = float(attention_core_flops(scout, 8.0, context, 1, False, decode_rows=True))
    last = (int(context) - 1) % c + 1
    expected = (
        1 - share
    ) * 2 * 8 * context * 2 * scout.q_width + share * 2 * 8 * last * 2 * scout.q_width
    assert rows == pytest.approx(expected)
    # Within one chunk it is full causal attention, and a 32k sequence pays for under half the
    # pairs of full attention on those layers.
    inside = float(attention_core_flops(scout, 4096.0, 4096.0, 1, causal_skip=True))
    assert inside == float(attention_core_flops(full_only, 4096.0, 4096.0, 1, causal_skip=True))
    if context == 32768:
        assert got / dense == pytest.approx(0.4375, rel=1e-3)


def test_static_decode_reads_only_the_window_on_windowed_layers() -> None:
    """The static-batch table's decode reads, on gpt-oss's 128-token window layers, 128 keys a
    row (FlashAttention with a window), not the whole context."""
    from gpuscale.api.serving_static import infer_static

    oss = catalog.model("gpt-oss-120b")
    full_only = dataclasses.replace(oss, name="oss-full", sliding_window=0, sliding_window_layers=0)
    kw = {"gpu": "h200-sxm", "tp": 1, "batch": 64, "input_len": 16000, "output_len": 64}
    windowed = infer_static(oss, **kw).to_dict()["options"][0]["breakdown"]
    dense = infer_static(full_only, **kw).to_dict()["options"][0]["breakdown"]
    # Half the layers read 128 of ~16,000 keys: about half the decode attention time.
    ratio = windowed["decode_attention"] / dense["decode_attention"]
    assert 0.49 < ratio < 0.52
