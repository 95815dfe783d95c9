"""Catalog models against the parameter counts their publishers state.

A wrong layer count, expert width or head layout in ``models.yaml`` moves the count by far more
than the tolerance, so this pins every field the cost model sizes weights with. The tolerance is
the publisher's rounding (half a unit of the last printed digit: "17B" is 16.5-17.5B) and never
below 2% (norms, biases, QK-norms and routing biases the catalog leaves out).

Publishers count "active" parameters differently; each row says how:
``all``: every parameter a token touches, embeddings included (DeepSeek, Qwen, Mistral);
``no_lookup``: without the input embedding, a table lookup, not a matmul (gpt-oss model card
Table 1: 5.13B = MLP share + attention + unembedding); ``non_embedding``: without the input
embedding and the output head (MiniMax-M2 series: 9.8B active; GLM-5: 40B, 40.8B with the head).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuscale import catalog
from gpuscale.costmodel.params import active_params, embedding_params, total_params

B = 10**9

# (catalog id, stated total, stated active or None, active convention, where it is stated)
STATED = [
    ("deepseek-v3", "671", "37", "all", "arXiv:2412.19437 abstract: 671B total, 37B activated"),
    ("deepseek-r1", "671", "37", "all", "deepseek-ai/DeepSeek-R1 model card: 671B / 37B"),
    ("kimi-k2.5", "1040", "32", "no_lookup", "Kimi K2 report arXiv:2507.20534: 1.04T / 32B"),
    ("glm-5", "744", "40", "non_embedding", "GLM-5 report arXiv:2602.15763: 744B / 40B"),
    ("minimax-m2.5", "230", "10", "non_embedding", "MiniMaxAI/MiniMax-M2.5 card: 230B / 10B"),
    ("qwen3.5-397b-a17b", "397", "17", "all", "Qwen/Qwen3.5-397B-A17B card: 397B / 17B"),
    ("qwen3-235b-a22b", "235", "22", "all", "Qwen/Qwen3-235B-A22B card: 235B / 22B"),
    ("qwen3-30b-a3b", "30.5", "3.3", "all", "Qwen/Qwen3-30B-A3B card: 30.5B / 3.3B"),
    ("qwen3-32b", "32.8", None, "all", "Qwen/Qwen3-32B card: 32.8B"),
    ("gpt-oss-120b", "116.83", "5.13", "no_lookup", "arXiv:2508.10925 Table 1"),
    ("gpt-oss-20b", "20.91", "3.61", "no_lookup", "arXiv:2508.10925 Table 1"),
    ("mixtral-8x7b", "46.7", "12.9", "all", "Mistral AI Mixtral announcement: 46.7B / 12.9B"),
    ("mixtral-8x22b", "141", "39", "all", "Mistral AI Mixtral 8x22B announcement: 141B / 39B"),
    ("llama4-scout", "109", "17", "all", "HF/Meta Llama 4 release post: ~109B / 17B"),
    ("llama4-maverick", "400", "17", "all", "HF/Meta Llama 4 release post: ~400B / 17B"),
    ("llama3.1-8b", "8", None, "all", "arXiv:2407.21783 Table 3"),
    ("llama3.1-70b", "70", None, "all", "arXiv:2407.21783 Table 3"),
    ("llama3.1-405b", "405", None, "all", "arXiv:2407.21783 Table 3"),
    ("llama3.2-1b", "1.24", None, "all", "meta-llama/Llama-3.2-1B card: 1.24B"),
    ("llama3.2-3b", "3.21", None, "all", "meta-llama/Llama-3.2-3B card: 3.21B"),
    ("qwen2.5-7b", "7.61", None, "all", "Qwen/Qwen2.5-7B card: 7.61B"),
    ("qwen2.5-72b", "72.7", None, "all", "Qwen/Qwen2.5-72B card: 72.7B"),
    ("gpt-j-6b", "6.053", None, "all", "EleutherAI/gpt-j-6b card: 6,053,381,344"),
]


def tolerance(stated: str) -> float:
    """Relative tolerance: half a unit of the last printed digit, at least 2%."""
    exponent = Decimal(stated).as_tuple().exponent
    assert isinstance(exponent, int)
    half_unit = 0.5 * 10.0**exponent
    return max(0.02, half_unit / float(stated))


def counted_active(model_id: str, convention: str) -> int:
    m = catalog.model(model_id)
    lookup = m.vocab_size * m.hidden_size
    if convention == "no_lookup":
        return active_params(m) - lookup
    if convention == "non_embedding":
        return active_params(m) - embedding_params(m)
    return active_params(m)


@pytest.mark.parametrize(("model_id", "total", "active", "convention", "where"), STATED)
def test_total_params_match_the_publisher(
    model_id: str, total: str, active: str | None, convention: str, where: str
) -> None:
    got = total_params(catalog.model(model_id)) / B
    assert got == pytest.approx(float(total), rel=tolerance(total)), where


@pytest.mark.parametrize(
    ("model_id", "total", "active", "convention", "where"),
    [row for row in STATED if row[2] is not None],
)
def test_active_params_match_the_publisher(
    model_id: str, total: str, active: str, convention: str, where: str
) -> None:
    got = counted_active(model_id, convention) / B
    assert got == pytest.approx(float(active), rel=tolerance(active)), where


def test_tolerance_is_the_printed_rounding() -> None:
    assert tolerance("17") == pytest.approx(0.5 / 17)
    assert tolerance("116.83") == 0.02
    assert tolerance("671") == 0.02


def test_qwen35_hybrid_counts_its_gated_deltanet_layers() -> None:
    """Without the Gated DeltaNet shapes and the attention output gate, Qwen3.5-397B-A17B
    counts 14.7B active, not 17B: the 45 linear-attention layers are wider than GQA ones."""
    m = catalog.model("qwen3.5-397b-a17b")
    assert m.has_gated_deltanet and m.attention_output_gate
    from dataclasses import replace

    plain = replace(
        m,
        linear_num_key_heads=0,
        linear_num_value_heads=0,
        linear_key_head_dim=0,
        linear_value_head_dim=0,
        attention_output_gate=False,
    )
    assert active_params(plain) / B < 15.0
    assert abs(active_params(m) / B - 17.0) < 0.5


def test_every_catalog_model_names_its_source() -> None:
    for mid, m in catalog.models().items():
        assert len(m.source) > 20, mid
