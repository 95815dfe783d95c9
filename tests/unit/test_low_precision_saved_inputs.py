"""Transformer Engine keeps a linear layer's low-precision input cast (column-wise usage only)
for its weight gradient, not the 16-bit input (``module/linear.py``:
``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``): the ``megatron``
profile's ``low_precision_saved_inputs``. What moves, term by term, and what does not."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.costmodel.activations import layer_terms, module_savings
from gpuscale.costmodel.memory import framework_allocation
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs.training import SAVED_INPUT_BYTES, Training

LLAMA = catalog.model("llama3.1-70b")
QWEN = catalog.model("qwen3-30b-a3b")


def _pair(precision: str) -> tuple[Training, Training]:
    base = Training(seq_len=4096, precision=precision)
    return base, dataclasses.replace(base, low_precision_saved_inputs=True)


@pytest.mark.parametrize("precision", ["fp8", "mxfp8", "nvfp4"])
def test_linear_inputs_are_kept_in_the_recipes_format(precision: str) -> None:
    bf16_kept, cast_kept = (layer_terms(LLAMA, t) for t in _pair(precision))
    b, e = SAVED_INPUT_BYTES[precision], 2.0
    h, q, f = LLAMA.hidden_size, LLAMA.q_width, LLAMA.ffn_hidden_size
    # q/k/v input and the MLP input (both norm outputs, split by SP only)
    assert bf16_kept.replicated - cast_kept.replicated == pytest.approx(2 * (e - b) * h)
    # the down projection's input shrinks; the output projection keeps a cast of its own
    # beside the attention kernel's 16-bit output
    assert bf16_kept.split - cast_kept.split == pytest.approx((e - b) * f - b * q)
    assert cast_kept.checkpoint == bf16_kept.checkpoint


def test_16_bit_training_saves_16_bit_inputs_whatever_the_flag() -> None:
    base = Training(seq_len=4096, precision="bf16")
    flagged = dataclasses.replace(base, low_precision_saved_inputs=True)
    assert layer_terms(LLAMA, base) == layer_terms(LLAMA, flagged)


def test_a_recomputed_module_frees_what_the_layer_held() -> None:
    # moe_act under FP8: Megatron-Core makes the second expert GEMM keep (and then drop) its
    # 16-bit input, so what goes is the base term, the 1-byte cast.
    _, cast_kept = _pair("fp8")
    modules = dataclasses.replace(cast_kept, recompute_modules=("moe_act",))
    freed = module_savings(QWEN, modules)
    assert freed.split == pytest.approx(QWEN.experts_per_token * 1.0 * QWEN.ffn_hidden_size)


def test_the_framework_profile_decides() -> None:
    base = Training(seq_len=4096, precision="fp8")
    assert framework_allocation(base, load_profile("megatron")).low_precision_saved_inputs
    assert not framework_allocation(base, load_profile("generic")).low_precision_saved_inputs
