"""Llama 4 in the catalog: its interleaved MoE layers, and the chunked attention the cost model
prices as full attention (said where it matters)."""

from __future__ import annotations

from gpuscale import catalog
from gpuscale.api.serving import infer


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
        assert routed_expert_weights(spec) == expert_layer_params(spec), name


def test_maverick_qlora_weights_are_its_parameters_at_four_bits() -> None:
    from gpuscale.api.fitting import fit

    result = fit("llama4-maverick", gpu="gh200", finetune="qlora")
    weights_gib = result.memory_bytes["weights"] / 2**30
    # 400.7B parameters, the blocks' linears in NF4 (~0.53 byte with double-quant constants),
    # embedding and head in bf16: about 200 GiB, never negative, and the verdict is no fit.
    assert 190 < weights_gib < 215
    assert not result.fits
