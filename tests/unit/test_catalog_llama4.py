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
