"""A checkpoint below 16 bits other than INT4 is refused on a GPU no serving kernel runs it on
(``formats.check_runs_on``: Volta, compute capability 7.0, per vLLM's quantization support
table); it was priced as a weight-only GEMM there (a fuzz of the API found gpt-j-6b NVFP4 on a
V100 answered)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.api import infer
from gpuscale.api.serving_search import search
from gpuscale.errors import InputError

KW: dict[str, Any] = dict(input_len=128, output_len=16, concurrency=1)


@pytest.mark.parametrize("weights", ["fp8", "fp8_block", "nvfp4", "mxfp4", "int8", "fp8_wo"])
def test_low_precision_on_volta_is_refused_in_one_line(weights: str) -> None:
    with pytest.raises(InputError) as err:
        infer("gpt-j-6b", gpu="v100-sxm2-32gb", weights=weights, **KW)
    assert err.value.field == "weights"
    message = str(err.value)
    assert "\n" not in message
    assert f"--weights {weights}: no serving kernel runs it on v100-sxm2-32gb" in message
    # a V100 has no bf16 (refused there since the bf16 rule): only fp16 and the int4 formats
    assert "compute capability 7.0" in message and "accepted there: fp16, int4_wo" in message
    assert "bf16" not in message


@pytest.mark.parametrize(
    ("gpu", "weights"),
    [
        ("v100-sxm2-32gb", "fp16"),
        ("v100-sxm2-32gb", "int4_wo"),  # GPTQ runs on Volta
        ("a100-sxm-80gb", "fp8"),  # FP8 Marlin, weight-only
        ("mi300x", "fp8"),  # no compute capability: an AMD GPU
    ],
)
def test_what_a_kernel_runs_is_priced(gpu: str, weights: str) -> None:
    assert infer("gpt-j-6b", gpu=gpu, weights=weights, **KW).to_dict()["options"]


def test_the_search_refuses_it_too() -> None:
    with pytest.raises(InputError, match="no serving kernel runs it on v100-sxm2-32gb"):
        search("gpt-j-6b", gpu="v100-sxm2-32gb", gpus=8, weights="nvfp4")
