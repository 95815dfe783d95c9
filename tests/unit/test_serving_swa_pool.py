"""How each engine's KV pool holds sliding-window layers (gpt-oss: 18 of 36 layers, 128 tokens).

TensorRT-LLM's KVCacheManager sizes every layer at full length unless the launch lists per-layer
attention windows (the window then only masks attention); vLLM's hybrid KV cache manager keeps
a request's window in its own block table; SGLang's SWA pool gives the sliding-window layers
``swa_full_tokens_ratio`` (0.8) tokens per full-attention token. Sources: serving_engines.yaml."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import EngineProfile, engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import kv_pool
from gpuscale.planner.serving.steady_state import Workload

# One full-attention layer of gpt-oss in 16 bits: K and V, 8 heads of 64 (config.json).
LAYER_BYTES = 2 * 8 * 64 * 2
FULL_LAYERS = 18
WINDOW = 128
WORK = Workload(input_len=1024.0, output_len=8192.0)


def _tokens(eng: EngineProfile, model_id: str = "gpt-oss-120b", fmt: str = "mxfp4") -> float:
    m = catalog.model(model_id)
    cl = catalog.cluster("h200-sxm", 1)
    profile = load_profile(eng.cost_profile)
    tokens, _, _ = kv_pool(m, cl, Parallelism(), weight_format(fmt), "bf16", profile, eng, WORK)
    return tokens


def _windowed(eng: EngineProfile) -> EngineProfile:
    return dataclasses.replace(eng, swa_tokens_per_full_token=None)


def test_profiles_state_the_layout() -> None:
    assert engine("tensorrt-llm").swa_tokens_per_full_token == 1.0
    assert engine("sglang").swa_tokens_per_full_token == 0.8
    assert engine("vllm").swa_tokens_per_full_token is None


def test_tensorrt_llm_holds_sliding_window_layers_at_full_length() -> None:
    eng = engine("tensorrt-llm")
    full = FULL_LAYERS * LAYER_BYTES
    # The windowed pool charges each request's window over its mean footprint (prompt + half
    # the output); the full-length pool charges all 36 layers per token, on the same bytes.
    windowed_per_token = full + FULL_LAYERS * LAYER_BYTES * WINDOW / (1024 + 8192 / 2)
    ratio = _tokens(eng) / _tokens(_windowed(eng))
    assert ratio == pytest.approx(windowed_per_token / (2 * full), rel=1e-9)
    assert 0.5 < ratio < 0.52


def test_sglang_gives_the_swa_pool_its_ratio() -> None:
    eng = engine("sglang")
    full = FULL_LAYERS * LAYER_BYTES
    windowed_per_token = full + FULL_LAYERS * LAYER_BYTES * WINDOW / (1024 + 8192 / 2)
    ratio = _tokens(eng) / _tokens(_windowed(eng))
    assert ratio == pytest.approx(windowed_per_token / (full + 0.8 * full), rel=1e-9)


def test_vllm_keeps_the_window_per_request() -> None:
    eng = engine("vllm")
    full_length = dataclasses.replace(eng, swa_tokens_per_full_token=1.0)
    assert _tokens(eng) > 1.9 * _tokens(full_length)


@pytest.mark.parametrize("name", ["tensorrt-llm", "sglang"])
def test_models_without_sliding_window_layers_are_unchanged(name: str) -> None:
    eng = engine(name)
    assert _tokens(eng, "llama3.1-8b", "bf16") == _tokens(_windowed(eng), "llama3.1-8b", "bf16")


def test_full_length_pool_binds_where_a_windowed_one_would_not() -> None:
    """gpt-oss-120b on one H200, 1k/8k at C = 64 with TensorRT-LLM's pool at 40% of the free
    memory (about 31 GiB): the full-length pool holds ~55 of the 64 requests (9,216 tokens each
    at 72 KiB), so the rest wait for admission; a windowed pool (36 KiB a token) holds ~100."""
    out = infer(
        "openai/gpt-oss-120b",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="mxfp4",
        input_len=1024,
        output_len=8192,
        concurrency=64,
        kv_dtype="bf16",
        engine_options={"max_num_batched_tokens": 20000, "memory_fraction": 0.4},
    ).to_dict()["options"][0]
    assert out["kv_cache_tokens_per_rank"] < 55 * 9216
    assert out["running_requests_per_rank"] < 55
    assert out["ttft_ms"] > 5_000
