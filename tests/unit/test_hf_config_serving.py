"""config.json parsing of the serving model families: MoE, MLA, sliding window, GPT-J."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.catalog.hf_config import model_from_config
from gpuscale.errors import InputError

CONFIGS = Path(__file__).parent.parent / "data" / "configs"


@pytest.mark.parametrize(
    "name",
    [
        "deepseek-v3",
        "gpt-oss-120b",
        "qwen3-235b-a22b",
        "gpt-j-6b",
        # Published config.json files as copied in ai-dynamo/aiconfigurator@095f58a (the commit
        # of the serving validation rows); tests/data/configs/SOURCES.md.
        "deepseek-r1",
        "kimi-k2.5",
        "glm-5",
        "minimax-m2.5",
        "qwen3.5-397b-a17b",
        "qwen3-32b",
        "qwen3-30b-a3b",
        "gpt-oss-20b",
    ],
)
def test_config_matches_the_catalog_entry(name: str) -> None:
    parsed = catalog.model(str(CONFIGS / f"{name}.json"))
    entry = catalog.models()[name]
    for field in parsed.__slots__:
        if field not in ("name", "source", "max_seq_len", "stored_weights"):
            assert getattr(parsed, field) == getattr(entry, field), field
    # stored_weights: the file's own quantization_config (these copies may omit it); the catalog
    # entry's format is looked up from its source (test_checkpoint_formats.py).


def test_hugging_face_ids_are_aliases() -> None:
    assert catalog.model("meta-llama/Llama-3.1-70B").name == "llama3.1-70b"
    assert catalog.model("DEEPSEEK-AI/DeepSeek-R1").name == "deepseek-r1"
    assert catalog.model("openai/gpt-oss-120b").sliding_window == 128


def test_mla_fields_read() -> None:
    spec = catalog.model(str(CONFIGS / "deepseek-v3.json"))
    assert spec.is_mla and spec.kv_lora_rank == 512 and spec.dense_layers == 3


@given(top_k=st.integers(min_value=1, max_value=64), experts=st.integers(min_value=1, max_value=64))
def test_moe_top_k_never_exceeds_experts(top_k: int, experts: int) -> None:
    cfg = json.loads((CONFIGS / "qwen3-235b-a22b.json").read_text())
    cfg.update(num_experts=experts, num_experts_per_tok=top_k)
    if top_k > experts:
        with pytest.raises(InputError):
            model_from_config(cfg, "x")
    else:
        spec = model_from_config(cfg, "x")
        assert spec.experts_per_token == top_k and spec.num_experts == experts


@pytest.mark.parametrize(
    ("model", "total_b", "active_b"),
    [
        # Published totals: DeepSeek-V3 671B / 37B active (arXiv:2412.19437 Sec. 1), GLM-5
        # 744B / 40B, gpt-oss-120b 116.8B (model card Table 1), Qwen3-235B-A22B.
        ("deepseek-v3", 671.0, 37.0),
        ("glm-5", 744.0, 40.0),
        ("gpt-oss-120b", 116.8, 5.1),
        ("qwen3-235b-a22b", 235.0, 22.0),
    ],
)
def test_moe_mla_parameter_counts_match_published(model, total_b, active_b) -> None:
    from gpuscale.costmodel.params import active_params, total_params

    spec = catalog.models()[model]
    assert total_params(spec) / 1e9 == pytest.approx(total_b, rel=0.01)
    assert active_params(spec) / 1e9 == pytest.approx(active_b, rel=0.15)


def test_qwen35_layer_mix_from_the_interval_without_layer_types() -> None:
    cfg = json.loads((CONFIGS / "qwen3.5-397b-a17b.json").read_text())["text_config"]
    del cfg["layer_types"]
    spec = model_from_config(cfg, "x")
    assert spec.linear_attention_layers == 45 and spec.has_gated_deltanet
    assert spec.attention_output_gate


def test_qwen35_without_deltanet_shapes_is_one_line_error() -> None:
    cfg = json.loads((CONFIGS / "qwen3.5-397b-a17b.json").read_text())
    del cfg["text_config"]["linear_num_value_heads"]
    with pytest.raises(InputError, match="linear_num_value_heads"):
        model_from_config(cfg, "x")


def test_glm5_reads_its_sparse_attention_indexer() -> None:
    from gpuscale.costmodel.params import indexer_params

    spec = catalog.model(str(CONFIGS / "glm-5.json"))
    assert (spec.sparse_attention_topk, spec.indexer_heads, spec.indexer_head_dim) == (
        2048,
        32,
        128,
    )
    # wq_b 2048 x 32 x 128 + wk 6144 x 128 + LayerNorm 2 x 128 + weights_proj 6144 x 32
    assert indexer_params(spec) == 8388608 + 786432 + 256 + 196608


def test_quantized_checkpoints_alias_their_base_architecture() -> None:
    assert catalog.model("nvidia/GLM-5-NVFP4").name == "glm-5"
    assert catalog.model("nvidia/Qwen3.5-397B-A17B-NVFP4").name == "qwen3.5-397b-a17b"
    assert catalog.model("nvidia/Kimi-K2.5-NVFP4").name == "kimi-k2.5"


def test_gpt_oss_attention_stays_16_bit_when_its_experts_are_quantized() -> None:
    cfg = json.loads((CONFIGS / "gpt-oss-120b.json").read_text())
    cfg["quantization_config"] = {
        "quant_method": "mxfp4",
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router"],
    }
    assert model_from_config(cfg, "gpt-oss").attention_weights_16bit
    cfg["quantization_config"] = {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}
    assert not model_from_config(cfg, "gpt-oss").attention_weights_16bit
    assert not catalog.model("llama3.1-70b").attention_weights_16bit


def test_mla_attention_bytes_follow_the_checkpoint_quantization() -> None:
    # Kimi-K2.5's INT4 checkpoint ignores "re:.*self_attn.*" (compressed-tensors).
    assert catalog.model(str(CONFIGS / "kimi-k2.5.json")).attention_weights_16bit
    assert catalog.model("kimi-k2.5").attention_weights_16bit
    # ... and "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*".
    assert catalog.model(str(CONFIGS / "kimi-k2.5.json")).dense_mlp_weights_16bit
    cfg = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    assert not model_from_config(cfg, "deepseek-v3").attention_weights_16bit
    assert not model_from_config(cfg, "deepseek-v3").dense_mlp_weights_16bit
    # GLM-5-FP8 keeps only the indexer's projection in 16 bits, not the attention module.
    cfg["quantization_config"] = {
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
        "modules_to_not_convert": ["lm_head", "model.layers.*.self_attn.indexers_proj"],
    }
    assert not model_from_config(cfg, "deepseek-v3").attention_weights_16bit
    assert not model_from_config(cfg, "deepseek-v3").dense_mlp_weights_16bit
    cfg["quantization_config"] = {"quant_method": "modelopt", "exclude_modules": ["*self_attn*"]}
    assert model_from_config(cfg, "deepseek-v3").attention_weights_16bit
