"""Llama 4 in the catalog: its interleaved MoE layers, and the chunked attention the cost model
prices as full attention (said where it matters)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.errors import InputError


def test_llama4_chunked_attention_is_named_where_it_is_not_priced() -> None:
    spec = catalog.model("meta-llama/Llama-4-Maverick-17B-128E-Instruct")
    assert spec.moe_layer_share == 0.5 and spec.shared_experts == 1  # interleave_moe_layer_step 2
    assert not spec.attention_chunks_unpriced(8192) and spec.attention_chunks_unpriced(8193)
    args = {
        "gpu": "h200-sxm",
        "engine": "tensorrt-llm",
        "weights": "fp8",
        "tp": 8,
        "concurrency": 8,
    }
    short = infer("llama4-maverick", input_len=4096, output_len=1024, **args)
    long = infer("llama4-maverick", input_len=8192, output_len=1024, **args)
    assert not any("chunked attention" in n for n in short.prediction.notes)
    assert any("chunked attention" in n and "upper bound" in n for n in long.prediction.notes)
    # A dense model never carries the note.
    assert not catalog.model("llama3.1-8b").attention_chunks_unpriced(10**6)


def test_every_moe_model_quantizes_no_more_than_its_linear_weights() -> None:
    # QLoRA quantizes the blocks' linear weights; counted per mean block they never exceed the
    # block (Maverick's 24 dense blocks once made its 4-bit weights negative).
    from gpuscale.costmodel.model_states import block_linear_weights, routed_expert_weights
    from gpuscale.costmodel.params import expert_layer_params, layer_params

    for name in catalog.models():
        spec = catalog.model(name)
        if not spec.is_moe or spec.is_mla:
            continue
        assert 0 < block_linear_weights(spec) <= layer_params(spec), name
        # Weights only: gpt-oss's expert biases are parameters QLoRA leaves unquantized.
        biases = (2 * spec.ffn_hidden_size + spec.hidden_size) if spec.linear_bias else 0
        expected = expert_layer_params(spec) - round(
            spec.num_experts * biases * spec.moe_layer_share
        )
        assert routed_expert_weights(spec) == expected, name


def test_maverick_qlora_weights_are_its_parameters_at_four_bits() -> None:
    from gpuscale.api.fitting import fit

    result = fit("llama4-maverick", gpu="gh200", finetune="qlora")
    weights_gib = result.memory_bytes["weights"] / 2**30
    # 400.7B parameters, the blocks' linears in NF4 (~0.53 byte with double-quant constants),
    # embedding and head in bf16: about 200 GiB, never negative, and the verdict is no fit.
    assert 190 < weights_gib < 215
    assert not result.fits


def _llama4_config(**text: object) -> dict[str, object]:
    """Llama 4's published text_config keys (Llama-4-Maverick-17B-128E-Instruct as quoted, cut
    to 2 layers, in NVIDIA/TensorRT-LLM tests/unittest/_torch/modeling/
    test_modeling_llama_min_latency.py LLAMA_4_MAVERICK_TWO_LAYER_CONFIG; 48 layers and the
    default no_rope_layer_interval 4 in the released file)."""
    base: dict[str, object] = {
        "model_type": "llama4_text", "num_hidden_layers": 48, "hidden_size": 5120,
        "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_local_experts": 128,
        "num_experts_per_tok": 1, "interleave_moe_layer_step": 2, "attention_chunk_size": 8192,
        "max_position_embeddings": 1048576, "vocab_size": 202048, "use_qk_norm": False,
        "tie_word_embeddings": False, "no_rope_layers": [],
    }  # fmt: skip
    base.update(text)
    return {"model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"],
            "text_config": base}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "text"),
    [
        ("llama4-maverick", {}),
        (
            "llama4-scout",
            {"num_local_experts": 16, "interleave_moe_layer_step": 1, "use_qk_norm": True,
             "max_position_embeddings": 10485760},
        ),
    ],
)  # fmt: skip
def test_llama4_config_json_reads_as_the_catalog_entry(
    tmp_path: Path, model: str, text: dict[str, object]
) -> None:
    """A Llama 4 config.json (model_type llama4, the language model under text_config) is read:
    before, llama4_text was refused and only the catalog ids worked."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_llama4_config(**text)))
    spec = catalog.model(path)
    entry = catalog.model(model)
    differ = [
        f.name
        for f in dataclasses.fields(spec)
        if f.name not in ("name", "source") and getattr(spec, f.name) != getattr(entry, f.name)
    ]
    assert differ == []


def test_llama4_two_layer_config_places_its_moe_and_rope_layers() -> None:
    from gpuscale.catalog.hf_config import model_from_config

    spec = model_from_config(
        _llama4_config(num_hidden_layers=2, no_rope_layer_interval=2), "two-layer"
    )
    assert (spec.dense_layers, spec.moe_layer_step) == (1, 2)
    assert spec.attention_chunk_layers == 1 and spec.router_score == "sigmoid"
    with pytest.raises(InputError, match="no_rope_layers"):
        model_from_config(_llama4_config(no_rope_layers=[1, 0]), "bad")
    with pytest.raises(InputError, match="moe_layers"):
        model_from_config(_llama4_config(moe_layers=[0, 1, 2]), "bad")


def test_lora_adapters_of_an_moe_model_count_each_block_once() -> None:
    """Maverick's LoRA adapters: attention on 48 blocks, the 128 routed experts and the shared
    one on its 24 MoE blocks, the 16,384-wide dense MLP on the other 24 (every expert on every
    block counted them ~2x before)."""
    from gpuscale.costmodel.model_states import lora_params
    from gpuscale.specs.training import Training

    spec = catalog.model("llama4-maverick")
    r, h, f = 16, spec.hidden_size, spec.ffn_hidden_size
    targets = ("q", "k", "v", "o", "gate", "up", "down")
    training = Training(seq_len=4096, finetune="lora", lora_rank=r, lora_targets=targets)
    q, kv = spec.q_width, spec.kv_width
    attention = (h + q) + 2 * (h + kv) + (q + h)
    expected = r * (
        48 * attention + 24 * (128 + 1) * 3 * (h + f) + 24 * 3 * (h + spec.dense_ffn_hidden_size)
    )
    assert lora_params(spec, training) == expected


def test_llama4_keys_left_out_take_transformers_defaults() -> None:
    """Llama4TextConfig defaults use_qk_norm true and attention_chunk_size 8192: a config that
    leaves them out is Scout's architecture, not one without QK norm or chunks."""
    from gpuscale.catalog.hf_config import model_from_config

    cfg = _llama4_config(num_local_experts=16, interleave_moe_layer_step=1)
    text = cfg["text_config"]
    assert isinstance(text, dict)
    del text["use_qk_norm"], text["attention_chunk_size"]
    spec = model_from_config(cfg, "defaults")
    assert spec.qk_norm == "l2" and spec.attention_chunk_size == 8192
    assert spec.attention_chunk_layers == 36 and spec.router_scales_input


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ({"moe_layers": [1, "a"]}, "moe_layers"),
        ({"moe_layers": "1,3"}, "moe_layers"),
        ({"no_rope_layers": "0101"}, "no_rope_layers"),
        ({"no_rope_layers": [0.5] * 48}, "no_rope_layers"),
        ({"no_rope_layers": [0, 1, 1, 1] * 12}, "every n-th layer"),
        ({"interleave_moe_layer_step": 64}, "exceeds"),
    ],
)
def test_llama4_layer_lists_it_cannot_place_are_refused(
    text: dict[str, object], fragment: str
) -> None:
    from gpuscale.catalog.hf_config import model_from_config

    with pytest.raises(InputError, match=fragment) as info:
        model_from_config(_llama4_config(**text), "bad")
    assert "\n" not in str(info.value)


def test_every_catalog_model_counts_its_linear_weights_within_its_parameters() -> None:
    """The mean block's linear weights (what QLoRA quantizes, what Adafactor factors) are never
    more than the block and, but for norms, biases, routers and gates, all of it: MLA counts
    its own projections (DeepSeek-V3 read q/k/v/o widths before: 1.047 of the block) and
    Qwen3.5 its Gated DeltaNet layers (2.6B of weights counted as vectors before)."""
    from gpuscale.costmodel.model_states import adafactor_state_elements, block_linear_weights
    from gpuscale.costmodel.params import layer_params
    from gpuscale.specs.training import Training

    for name in catalog.models():
        spec = catalog.model(name)
        share = block_linear_weights(spec) / layer_params(spec)
        assert 0.99 <= share <= 1.0, (name, share)
        assert adafactor_state_elements(spec, Training(seq_len=4096, optimizer="adafactor")) > 0
