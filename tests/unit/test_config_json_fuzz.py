"""config.json fields a fuzz of the CLI found misread (2026-12-04): a quantization_config that
gpuscale does not read refuses ``--weights auto`` in one line rather than being priced as 16-bit
weights; GPTQ and AWQ of 4 and 8 bits are read as the weight-only formats; a Mixtral config
without its expert keys takes transformers' defaults instead of becoming dense."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuscale.api.serving import infer
from gpuscale.catalog.hf_config import checkpoint_weights, unread_quantization
from gpuscale.errors import InputError

LLAMA = Path(__file__).resolve().parents[1] / "data" / "configs" / "llama-3.1-8b.json"


def _config(tmp_path: Path, qc: Any) -> str:
    cfg = json.loads(LLAMA.read_text())
    cfg["quantization_config"] = qc
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.mark.parametrize(
    ("qc", "stored"),
    [
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, "int4_wo"),
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "int4_wo"),
        ({"quant_method": "awq", "w_bit": 4, "q_group_size": 128}, "int4_wo"),
        ({"quant_method": "gptq", "bits": 8}, "int8_wo"),
    ],
)
def test_gptq_and_awq_are_read_as_weight_only(qc: dict[str, Any], stored: str) -> None:
    assert checkpoint_weights(qc) == stored
    assert unread_quantization(qc) == ""


@pytest.mark.parametrize(
    ("qc", "said"),
    [
        ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quant_method 'bitsandbytes'"),
        ({"quant_method": "gptq", "bits": 3}, "quant_method 'gptq' with 3 bits"),
        ("fp8", "is not an object ('fp8')"),
        ({"bits": 4}, "declares no quant_method"),
    ],
)
def test_an_unread_scheme_refuses_auto_and_takes_a_stated_format(
    tmp_path: Path, qc: Any, said: str
) -> None:
    path = _config(tmp_path, qc)
    with pytest.raises(InputError, match="--weights auto: the quantization_config of") as err:
        infer(path, gpu="h100-sxm", concurrency=8)
    assert said in str(err.value) and "\n" not in str(err.value)
    stated = infer(path, gpu="h100-sxm", concurrency=8, weights="int4_wo").to_dict()
    assert stated["weights"] == "int4_wo"


def test_a_kv_cache_only_modelopt_config_is_16_bit_weights() -> None:
    qc = {"quant_method": "modelopt", "kv_cache_quant_algo": "FP8"}
    assert checkpoint_weights(qc) is None and unread_quantization(qc) == ""


def test_a_mixtral_config_without_expert_keys_takes_the_transformers_defaults(
    tmp_path: Path,
) -> None:
    # transformers' MixtralConfig: num_local_experts 8, num_experts_per_tok 2 when left out (it
    # was read as a dense model).
    from gpuscale import catalog

    cfg = json.loads((LLAMA.parent / "mixtral-8x7b.json").read_text())
    full = catalog.model(str(LLAMA.parent / "mixtral-8x7b.json"))
    for key in ("num_local_experts", "num_experts_per_tok"):
        cfg.pop(key)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    spec = catalog.model(str(path))
    assert (spec.num_experts, spec.experts_per_token) == (8, 2)
    assert (spec.num_experts, spec.experts_per_token) == (full.num_experts, full.experts_per_token)


@pytest.mark.parametrize(
    ("qc", "stored"),
    [
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "nvfp4"),
        ({"quant_method": "modelopt", "quantization": {"quant_algo": "FP8"}}, "fp8"),
    ],
)
def test_modelopt_is_read_flat_or_nested_alike(qc: dict[str, Any], stored: str) -> None:
    # The KV-cache reader took hf_quant_config.json's nesting and the weight reader did not, so
    # a nested FP8 checkpoint read as an unknown scheme; one reader serves both now.
    assert checkpoint_weights(qc) == stored
    assert unread_quantization(qc) == ""
