"""The KV-cache dtype of ``--kv-dtype auto`` follows each engine's rule, and each engine accepts
only the KV dtypes it can store (``serving_engines.yaml``: ``kv_dtypes``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog.hf_config import checkpoint_kv_cache
from gpuscale.catalog.serving_engines import engines
from gpuscale.costmodel.serving.iteration import KV_BYTES
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import load

LOAD = {"gpu": "h200-sxm", "concurrency": 4, "num_requests": 8, "tp": 8}


def _kv_tokens(model: str, engine: str, **kw: object) -> float:
    opt = infer(model, engine=engine, **LOAD, **kw).to_dict()["options"][0]  # type: ignore[arg-type]
    return float(opt["kv_cache_tokens_per_rank"])


def test_tensorrt_llm_keeps_a_16_bit_kv_cache_for_the_mxfp4_gpt_oss_checkpoint() -> None:
    # The openai checkpoint declares no kv_cache_quant_algo: TensorRT-LLM's "auto" is the
    # model dtype (a trtllm-serve 1.1.0rc3 log: 73,728 bytes per token = 16-bit KV).
    auto = _kv_tokens("openai/gpt-oss-120b", "tensorrt-llm")
    assert auto == _kv_tokens("openai/gpt-oss-120b", "tensorrt-llm", kv_dtype="bf16")
    assert auto < _kv_tokens("openai/gpt-oss-120b", "tensorrt-llm", kv_dtype="fp8")


def test_tensorrt_llm_keeps_a_16_bit_kv_cache_for_fp8_block_checkpoints() -> None:
    auto = _kv_tokens("deepseek-ai/DeepSeek-R1", "tensorrt-llm")
    assert auto == _kv_tokens("deepseek-ai/DeepSeek-R1", "tensorrt-llm", kv_dtype="bf16")


@pytest.mark.parametrize("engine", ["tensorrt-llm", "vllm", "sglang"])
def test_a_modelopt_checkpoint_that_declares_an_fp8_kv_cache_gets_one(engine: str) -> None:
    model = "nvidia/Llama-3.1-70B-Instruct-FP8"
    auto = _kv_tokens(model, engine)
    assert auto == _kv_tokens(model, engine, kv_dtype="fp8")
    assert auto > _kv_tokens(model, engine, kv_dtype="bf16")


def test_weights_quantized_for_the_launch_follow_the_engine_not_the_checkpoint() -> None:
    # TensorRT-LLM serves a ModelOpt export (hf_ptq --kv_cache_qformat fp8 by default); vLLM
    # quantizes online and keeps the model's 16-bit KV.
    trt = _kv_tokens("Qwen/Qwen3-32B", "tensorrt-llm", weights="fp8")
    assert trt == _kv_tokens("Qwen/Qwen3-32B", "tensorrt-llm", weights="fp8", kv_dtype="fp8")
    vllm = _kv_tokens("Qwen/Qwen3-32B", "vllm", weights="fp8")
    assert vllm == _kv_tokens("Qwen/Qwen3-32B", "vllm", weights="fp8", kv_dtype="bf16")


def test_the_checkpoint_kv_scheme_is_read_flat_or_nested() -> None:
    assert checkpoint_kv_cache({"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"}) == "fp8"
    assert checkpoint_kv_cache({"quantization": {"kv_cache_quant_algo": "FP8"}}) == "fp8"
    assert checkpoint_kv_cache({"quant_method": "mxfp4"}) is None
    assert checkpoint_kv_cache({"quant_method": "fp8", "weight_block_size": [128, 128]}) is None
    assert catalog.served_kv_cache("openai/gpt-oss-120b") is None
    assert catalog.served_kv_cache("nvidia/Llama-3.1-70B-Instruct-FP8") == "fp8"


def test_a_config_json_declaring_an_fp8_kv_cache_is_served_with_one(tmp_path: Path) -> None:
    cfg = json.loads((Path(__file__).parent.parent / "data/configs/qwen3-32b.json").read_text())
    cfg["quantization_config"] = {
        "quant_method": "modelopt",
        "quant_algo": "FP8",
        "kv_cache_quant_algo": "FP8",
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = catalog.model(str(path))
    assert spec.stored_kv_cache == "fp8"
    auto = _kv_tokens(str(path), "vllm")
    assert auto == _kv_tokens(str(path), "vllm", kv_dtype="fp8")


def test_sglang_refuses_an_int8_kv_cache_naming_what_it_accepts() -> None:
    with pytest.raises(InputError) as err:
        infer("openai/gpt-oss-120b", engine="sglang", kv_dtype="int8", **LOAD)  # type: ignore[arg-type]
    msg = str(err.value)
    assert err.value.field == "kv_dtype" and "\n" not in msg
    assert "sglang" in msg and "accepted: auto, bf16, fp16, fp32, fp8" in msg


def test_every_engine_vocabulary_is_a_kv_width_the_model_prices() -> None:
    for eng in engines().values():
        assert eng.kv_dtypes and set(eng.kv_dtypes) <= set(KV_BYTES)
        assert "int8" not in eng.kv_dtypes  # none of the three stores an INT8 KV cache
        assert eng.kv_dtype_low_precision in eng.kv_dtypes


def test_disaggregated_tensorrt_llm_rows_read_the_recipes_fp8_kv_cache() -> None:
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    trt = [r for r in rows if r.engine == "trtllm" and r.mode == "disagg"]
    assert trt
    for r in trt:
        assert (r.kwargs or r.guess).get("kv_dtype") == "fp8", r.id


def test_the_deployment_search_shares_the_engine_vocabulary() -> None:
    from gpuscale.api.serving_search import search

    with pytest.raises(InputError, match="accepted: auto, bf16, fp16, fp32, fp8"):
        search("Qwen/Qwen3-32B", gpu="h200-sxm", gpus=8, engine="sglang", kv_dtype="int8")
