"""Serving rows run the weight format their checkpoint stores (catalog ``checkpoints.yaml``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.catalog.hf_config import checkpoint_weights
from gpuscale.costmodel.serving.formats import FORMATS, weight_format
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_fields import weights
from gpuscale.validation.serving_rows import read_rows

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _raw() -> list[dict[str, str]]:
    with ROWS.open() as f:
        return list(csv.DictReader(f))


def test_block_fp8_checkpoints_are_read_as_block_fp8() -> None:
    for hf_id in (
        "MiniMaxAI/MiniMax-M2.5",
        "Qwen/Qwen3-235B-A22B-FP8",
        "deepseek-ai/DeepSeek-R1",
        "deepseek-ai/DeepSeek-V3",
        "zai-org/GLM-5-FP8",
    ):
        assert catalog.checkpoint_weights(hf_id) == "fp8_block", hf_id
    assert catalog.checkpoint_weights("openai/gpt-oss-120b") == "mxfp4"
    assert catalog.checkpoint_weights("moonshotai/Kimi-K2.5") == "int4_wo"
    assert catalog.checkpoint_weights("nvidia/Llama-3.1-70B-Instruct-FP8") == "fp8"
    # 16-bit repositories: the engine quantizes online in the format it is asked for.
    assert catalog.checkpoint_weights("Qwen/Qwen3-32B") is None
    assert catalog.checkpoint_weights("meta-llama/Llama-3.1-70B") is None


def test_every_catalogued_checkpoint_is_a_known_format_of_a_catalog_model() -> None:
    for hf_id in catalog.checkpoint_quantization():
        fmt = catalog.checkpoint_weights(hf_id)
        assert fmt is not None and weight_format(fmt).name == fmt, hf_id
        assert catalog.model(hf_id).name  # each maps to a catalog architecture
    text = (Path(catalog.__file__).parent / "data" / "checkpoints.yaml").read_text()
    entries = yaml.safe_load(text)["checkpoints"]
    assert all(
        "config.json" in e["source"] or "quant_config" in e["source"] for e in entries.values()
    )


def test_rows_follow_their_checkpoint_not_the_precision_label() -> None:
    raw = _raw()
    by_path: dict[str, set[str]] = {}
    for r in raw:
        by_path.setdefault(r["model_path"], set()).add(weights(r))
    # vLLM's MiniMax rows say "fp8" and TensorRT-LLM's DeepSeek rows "fp8": the checkpoints
    # store 128 x 128 weight blocks (config.json weight_block_size).
    assert by_path["MiniMaxAI/MiniMax-M2.5"] == {"fp8_block"}
    assert by_path["deepseek-ai/DeepSeek-R1"] == {"fp8_block"}
    assert by_path["Qwen/Qwen3-235B-A22B-FP8"] == {"fp8_block"}
    # "nvfp4" (and five "fp8") rows of gpt-oss-120b: its only checkpoint is MXFP4.
    assert by_path["openai/gpt-oss-120b"] == {"mxfp4"}
    # A 16-bit checkpoint keeps the row's own label (online quantization) or bf16.
    assert by_path["Qwen/Qwen3-32B"] == {"bf16", "fp8", "fp8_block"}
    rows = [x for x in read_rows(raw) if x.raw["model_path"] == "MiniMaxAI/MiniMax-M2.5"]
    assert rows and all(x.kwargs["weights"] == "fp8_block" for x in rows if x.expressible)


def test_quantization_config_parser() -> None:
    assert checkpoint_weights({"quant_method": "fp8", "activation_scheme": "static"}) == "fp8"
    assert checkpoint_weights({"quant_method": "fp8", "weight_block_size": [128, 128]}) == (
        "fp8_block"
    )
    assert checkpoint_weights({"quant_method": "modelopt", "quant_algo": "NVFP4"}) == "nvfp4"
    assert checkpoint_weights(None) is None
    w8a8: dict[str, Any] = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {"type": "float", "num_bits": 8},
                "input_activations": {"type": "float", "num_bits": 8},
            }
        },
    }
    assert checkpoint_weights(w8a8) is None  # not read here: the row's label stays


_LEAF = st.none() | st.booleans() | st.integers(0, 8) | st.sampled_from(["int", "FP8", "NVFP4"])
_GROUP = st.fixed_dictionaries(
    {},
    optional={
        "weights": _LEAF | st.dictionaries(st.sampled_from(["type", "num_bits"]), _LEAF),
        "input_activations": _LEAF,
    },
)
_JSON = _LEAF | st.lists(_LEAF, max_size=2) | st.dictionaries(st.text(max_size=3), _GROUP | _LEAF)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    method=st.sampled_from(["fp8", "mxfp4", "modelopt", "compressed-tensors", "awq", ""]),
    rest=st.dictionaries(
        st.sampled_from(["weight_block_size", "quant_algo", "config_groups", "fmt"]),
        _JSON,
        max_size=3,
    ),
)
def test_parser_never_raises_and_names_a_known_format(method: str, rest: dict[str, Any]) -> None:
    out = checkpoint_weights({"quant_method": method, **rest})
    assert out is None or out in FORMATS


def test_weights_auto_serves_a_pre_quantized_checkpoint_as_stored() -> None:
    from gpuscale.api import infer, infer_static

    kw = {"gpu": "h200-sxm", "engine": "sglang", "tp": 8, "concurrency": 4}
    auto = infer("deepseek-ai/DeepSeek-R1", **kw)
    assert auto.weights == "fp8_block"
    explicit = infer("deepseek-ai/DeepSeek-R1", weights="fp8_block", **kw)
    assert _figures(auto) == _figures(explicit)
    # A 16-bit repository, a catalog id and a config given as a spec stay 16-bit.
    assert infer("Qwen/Qwen3-32B", **kw).weights == "bf16"
    assert infer("llama3.1-8b", **kw).weights == "bf16"
    assert infer(catalog.model("deepseek-r1"), **kw).weights == "bf16"
    # A catalog id stands for the checkpoint its entry was read from: both spellings agree.
    assert infer("deepseek-r1", **kw).to_dict() == auto.to_dict()
    assert "notes" in auto.to_dict()["options"][0]
    for catalog_id, hf_id in (
        ("gpt-oss-120b", "openai/gpt-oss-120b"),
        ("kimi-k2.5", "moonshotai/Kimi-K2.5"),
    ):
        assert catalog.served_weights(catalog_id) == catalog.served_weights(hf_id) != "bf16"
    # What auto chose is said in the notes.
    notes = auto.to_dict()["options"][0]["notes"]
    assert any("fp8_block: the format the checkpoint stores" in n for n in notes)
    plain = infer("Qwen/Qwen3-32B", **kw).to_dict()["options"][0]["notes"]
    assert any("no pre-quantized checkpoint format known" in n for n in plain)
    # An explicit format is honoured (a what-if on a dequantized copy).
    assert infer("deepseek-ai/DeepSeek-R1", weights="bf16", **kw).weights == "bf16"
    # The static-batch table takes the checkpoint's width in its own dtypes.
    assert infer_static("openai/gpt-oss-120b", gpu="h100-sxm", tp=[8]).weights == "int4"
    assert infer_static("deepseek-ai/DeepSeek-R1", gpu="h200-sxm", tp=[8]).weights == "fp8"
    assert infer_static("meta-llama/Llama-3.1-70B", gpu="h100-sxm", tp=[8]).weights == "bf16"


def _figures(result: Any) -> dict[str, Any]:
    """A serving result's figures, without its notes (which say how the format was chosen)."""
    option = {k: v for k, v in result.to_dict()["options"][0].items() if k != "notes"}
    return option


def test_weights_auto_reads_a_config_files_quantization_config(tmp_path: Path) -> None:
    from gpuscale.api import infer

    base = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "num_hidden_layers": 32,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
    }
    block = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    quantized, plain = tmp_path / "fp8", tmp_path / "bf16"
    quantized.mkdir()
    plain.mkdir()
    (quantized / "config.json").write_text(json.dumps({**base, "quantization_config": block}))
    (plain / "config.json").write_text(json.dumps(base))
    kw = {"gpu": "h100-sxm", "engine": "vllm", "concurrency": 4}
    assert infer(str(quantized), **kw).weights == "fp8_block"
    assert catalog.served_weights(str(quantized / "config.json")) == "fp8_block"
    assert infer(str(plain), **kw).weights == "bf16"
    # A checkpoint without a quantization_config is 16-bit, and the note says so.
    assert any(
        "no pre-quantized checkpoint format known" in n
        for n in infer(str(plain), **kw).to_dict()["options"][0]["notes"]
    )
    # A scheme not read here was priced as 16-bit weights under a note saying no format is
    # known, while the file declares one: --weights auto now refuses it in one line and a
    # stated format is taken (tests/unit/test_config_json_fuzz.py).
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({**base, "quantization_config": "bogus"}))
    with pytest.raises(InputError, match="a scheme gpuscale does not read"):
        infer(str(odd), **kw)
    assert infer(str(odd), **kw, weights="bf16").weights == "bf16"
