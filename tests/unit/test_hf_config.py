"""The config.json parser: real released configs give their published parameter counts; any
other input gives a one-line :class:`InputError`, never another exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.catalog.hf_config import SUPPORTED, model_from_config, model_from_config_file
from gpuscale.costmodel.params import total_params
from gpuscale.errors import InputError
from gpuscale.specs import ModelSpec

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"

# Parameter counts published on each model card / paper for the shipped config.json.
PUBLISHED = {
    "llama-3.1-8b": 8_030_261_248,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-7b": 7_615_616_512,
    "mixtral-8x7b": 46_702_792_704,
    "gpt2": 124_439_808,
    "pythia-160m": 162_322_944,
    "bloom-560m": 559_214_592,
    "opt-1.3b": 1_315_758_080,
    "bert-large-uncased": 335_141_888,
    # MPT's no_bias also drops the LayerNorm biases, which ModelSpec cannot express (+0.004%).
    "mpt-7b": 6_649_286_656,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shipped_configs_give_published_parameter_counts(name: str) -> None:
    model = catalog.model(str(CONFIGS / f"{name}.json"))
    assert total_params(model) == pytest.approx(
        PUBLISHED[name], rel=1e-4 if name == "mpt-7b" else 0
    )


def test_config_folder_and_file_are_both_accepted(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text((CONFIGS / "mistral-7b.json").read_text())
    assert catalog.model(str(tmp_path)) == catalog.model(str(tmp_path / "config.json"))


def test_mixtral_and_gqa_fields_are_read() -> None:
    m = catalog.model(str(CONFIGS / "mixtral-8x7b.json"))
    assert (m.num_experts, m.experts_per_token, m.num_kv_heads) == (8, 2, 8)


def test_multimodal_text_config_is_used() -> None:
    inner = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    outer = {"model_type": "llava", "text_config": inner, "vision_config": {"hidden_size": 1024}}
    assert total_params(model_from_config(outer, "llava")) == PUBLISHED["llama-3.1-8b"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"model_type": "t5"}', "unsupported model_type"),
        ('{"hidden_size": 64}', "no 'model_type'"),
        ('{"model_type": "llama", "hidden_size": 64}', "missing 'num_attention_heads'"),
        (
            '{"model_type": "llama", "hidden_size": -1, "num_attention_heads": 4}',
            "positive integer",
        ),
        (
            '{"model_type": "llama", "hidden_size": 1e40, "num_attention_heads": 4}',
            "positive integer",
        ),
        (
            '{"model_type": "llama", "hidden_size": 99999999999, "num_attention_heads": 4}',
            "implausibly",
        ),
        (
            '{"model_type": "mpt", "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 10,'
            ' "attn_config": [1]}',
            "JSON object",
        ),
    ],
)
def test_bad_configs_are_one_line_input_errors(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(InputError, match=fragment) as info:
        model_from_config_file(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ("deepseek-v3", "n_shared_experts"),
        ("deepseek-v3", "first_k_dense_replace"),
        ("gpt-oss-20b", "sliding_window"),
    ],
)
@pytest.mark.parametrize("value", ["abc", [1], 1e400, 1.5, True, -1, 10**30])
def test_counts_a_config_may_leave_out_are_whole_numbers(config: str, key: str, value: Any) -> None:
    # int() of the raw value raised a TypeError/ValueError/OverflowError traceback on a string,
    # a list or 1e400, truncated 1.5 to 1 and took 10^30 shared experts.
    cfg = {**json.loads((CONFIGS / f"{config}.json").read_text()), key: value}
    with pytest.raises(InputError, match=rf"'{key}' must be a whole number 0 to 16777216") as info:
        model_from_config(cfg, config)
    assert "\n" not in str(info.value)
    for absent in (0, None):  # left out, null or 0: none of them
        model_from_config({**cfg, key: absent}, config)


def test_binary_and_missing_files_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not a text file"):
        model_from_config_file(path)
    with pytest.raises(InputError, match="no such model or file"):
        model_from_config_file(tmp_path / "absent.json")


# --- properties ------------------------------------------------------------------------

KEYS = [
    "model_type",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "n_layers",
    "num_attention_heads",
    "n_head",
    "n_heads",
    "num_key_value_heads",
    "intermediate_size",
    "ffn_dim",
    "n_inner",
    "vocab_size",
    "max_position_embeddings",
    "head_dim",
    "num_local_experts",
    "num_experts_per_tok",
    "tie_word_embeddings",
    "attention_bias",
    "mlp_bias",
    "expansion_ratio",
    "attn_config",
    "no_bias",
    "word_embed_proj_dim",
    "type_vocab_size",
    "text_config",
    "enable_bias",
    "n_shared_experts",
    "first_k_dense_replace",
    "sliding_window",
    # router, QK norm, rotary and layer-pattern keys (MoE families, Llama 4, GPT-NeoX, Qwen3.5)
    "scoring_func",
    "topk_method",
    "n_group",
    "topk_group",
    "routed_scaling_factor",
    "norm_topk_prob",
    "use_routing_bias",
    "use_qk_norm",
    "rotary_dim",
    "rotary_pct",
    "use_parallel_residual",
    "no_rope_layers",
    "no_rope_layer_interval",
    "moe_layers",
    "interleave_moe_layer_step",
    "attention_chunk_size",
    "intermediate_size_mlp",
    "layer_types",
    "partial_rotary_factor",
    "rope_parameters",
    "rope_theta",
    "rope_scaling",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True),
    st.text(max_size=8),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)
plausible = st.one_of(st.integers(1, 4096), json_values)
configs = st.fixed_dictionaries(
    {"model_type": st.one_of(st.sampled_from(SUPPORTED), json_values)},
    optional={key: plausible for key in KEYS if key != "model_type"},
)


def _parse(cfg: Any) -> ModelSpec | None:
    try:
        return model_from_config(cfg, "fuzz")
    except InputError as exc:
        assert "\n" not in str(exc)
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_random_configs_parse_or_raise_input_error(cfg: dict[str, Any]) -> None:
    model = _parse(cfg)
    if model is not None:
        assert total_params(model) > 0


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_arbitrary_json_never_raises_anything_but_input_error(value: Any) -> None:
    _parse(value)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_on_disk_never_raise_anything_but_input_error(
    tmp_path_factory: Any, data: bytes
) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_bytes(data)
    try:
        model_from_config_file(path)
    except InputError as exc:
        assert "\n" not in str(exc)


def _moe(model_type: str, **keys: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "model_type": model_type, "num_hidden_layers": 4, "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 100,
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
    }  # fmt: skip
    cfg.update(keys)
    return cfg


def test_router_keys_follow_each_family_default() -> None:
    """Keys left out take the family's transformers behaviour: MiniMax-M2 routes with a
    biased sigmoid and normalizes Q and K over all heads; Qwen2-MoE keeps its softmax's top-k
    weights unnormalized (norm_topk_prob false) and gates its shared expert."""
    minimax = model_from_config(_moe("minimax_m2"), "minimax")
    assert (minimax.router_score, minimax.router_expert_bias) == ("sigmoid", True)
    assert minimax.qk_norm == "rmsnorm_full"
    qwen2 = model_from_config(_moe("qwen2_moe", shared_expert_intermediate_size=32), "qwen2")
    assert not qwen2.router_topk_normalized and qwen2.shared_expert_gate
    assert model_from_config(_moe("qwen3_moe"), "qwen3").router_topk_normalized


@pytest.mark.parametrize(
    ("keys", "fragment"),
    [
        ({"topk_method": 3}, "topk_method"),
        ({"use_routing_bias": True}, "sigmoid"),
        ({"scoring_func": "relu"}, "scoring_func"),
        ({"n_group": 3, "topk_group": 1}, "n_group"),
    ],
)
def test_bad_router_keys_are_one_line_input_errors(keys: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InputError, match=fragment) as info:
        model_from_config(_moe("qwen3_moe", **keys), "bad")
    assert "\n" not in str(info.value)


def test_gpt_oss_layer_types_must_alternate_from_a_window() -> None:
    base = _moe(
        "gpt_oss", sliding_window=128, head_dim=16, num_experts=4,
        layer_types=["sliding_attention", "full_attention"] * 2,
    )  # fmt: skip
    assert model_from_config(base, "oss").sliding_window_layers == 2
    flipped = {**base, "layer_types": ["full_attention", "sliding_attention"] * 2}
    with pytest.raises(InputError, match="alternate"):
        model_from_config(flipped, "oss")


def test_hybrid_layer_types_must_put_full_attention_every_nth_layer() -> None:
    base = _moe(
        "qwen3_next", num_hidden_layers=8, linear_num_key_heads=2, linear_num_value_heads=4,
        linear_key_head_dim=16, linear_value_head_dim=16,
        layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 2,
    )  # fmt: skip
    spec = model_from_config(base, "next")
    assert spec.linear_attention_layers == 6 and spec.norm_offset_one
    shifted = {**base, "layer_types": (["full_attention"] + ["linear_attention"] * 3) * 2}
    with pytest.raises(InputError, match="every n-th"):
        model_from_config(shifted, "next")
