"""The serial kernel chain of a decode iteration: counted kernels, their dispatch gap, and the MoE
glue kernels, hand-counted on small cases; the floor matters only at small batches."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.serving.formats import gemm_precision, weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model


def _model(
    name: str, eng_name: str, weights: str = "bf16", gpu: str = "h100-sxm", **const: float
) -> IterationModel:
    m = catalog.model(name)
    cl = catalog.cluster(gpu, 1)
    eng = engine(eng_name)
    prof: Profile = load_profile(eng.cost_profile)
    if const:
        prof = dataclasses.replace(prof, constants={**prof.constants, **const})
    return _iteration_model(m, cl, Parallelism(), weight_format(weights), "bf16", prof, eng)


def _decode(it: IterationModel, n: float) -> float:
    arr = np.array([n])
    return float(it.time_s(arr, np.array([1024.0]), np.zeros(1), np.zeros(1))[0])


def test_dense_layer_kernels_hand_counted() -> None:
    # Llama-3.1-8B on vLLM: 32 layers x (qkv + o GEMMs, cache write + attention, 6 elementwise
    # kernels) + 32 x (up + down GEMMs) = 32 * 10 + 32 * 2 = 384 kernels.
    it = _model("llama3.1-8b", "vllm")
    assert it.serial_kernels("bf16") == 384.0


def test_moe_layer_kernels_hand_counted_per_engine_and_format() -> None:
    # gpt-oss-120b: 36 MoE layers, GQA, no shared expert. TRT-LLM: 2 + 2 + 4 elementwise = 8 per
    # layer, plus router + 2 grouped GEMMs + 6 glue = 9: 36 * 17 = 612.
    trt = _model("gpt-oss-120b", "tensorrt-llm")
    assert trt.moe_glue_kernels("bf16") == 6.0
    assert trt.serial_kernels("bf16") == 36 * 17
    # vLLM: 2 + 2 + 6 = 10, plus router + 2 grouped + 5 glue = 8: 36 * 18; W8A8 FP8 adds one
    # activation-quantization kernel before each grouped GEMM (2 per layer).
    v = _model("gpt-oss-120b", "vllm")
    assert v.serial_kernels("bf16") == 36 * 18
    assert v.serial_kernels("fp8") == 36 * 20
    assert trt.moe_glue_kernels("fp8") == trt.moe_glue_kernels("bf16")  # fused in expandInputRows


def test_gap_adds_exactly_gap_times_kernels() -> None:
    gap = 1.3e-6
    with_gap = _model("llama3.1-8b", "vllm", graph_kernel_gap_us=1.3)
    without = _model("llama3.1-8b", "vllm", graph_kernel_gap_us=0.0)
    for n in (1.0, 64.0):
        diff = _decode(with_gap, n) - _decode(without, n)
        assert diff == pytest.approx(gap * 384, rel=1e-9)


def test_fp8_moe_glue_is_priced_on_hopper() -> None:
    # The two quantization kernels of W8A8 FP8 experts cost a launch floor and a gap each per
    # MoE layer: 48 layers of Qwen3-30B-A3B on vLLM.
    fp8 = _model("qwen3-30b-a3b", "vllm", weights="fp8")
    prec = gemm_precision(fp8.fmt, fp8.cluster.device)
    assert prec == "fp8"
    no_quant = _model("qwen3-30b-a3b", "vllm", weights="fp8", moe_activation_quant_kernels=0.0)
    per_kernel = fp8.profile.const("kernel_launch_us") + fp8.profile.const("graph_kernel_gap_us")
    diff = _decode(fp8, 1.0) - _decode(no_quant, 1.0)
    layers = fp8.model.num_layers - fp8.model.dense_layers
    assert diff == pytest.approx(2.0 * layers * per_kernel * 1e-6, rel=1e-9)


@pytest.mark.parametrize("name", ["llama3.1-8b", "qwen3-30b-a3b", "gpt-oss-120b"])
def test_kernel_floor_binds_only_at_small_batch(name: str) -> None:
    # The chain's fixed cost (gap and glue floors) is a large share of a batch-1 step and a
    # vanishing one once the batch's traffic and math dominate.
    full = _model(name, "vllm")
    bare = _model(name, "vllm", graph_kernel_gap_us=0.0, moe_glue_kernels=0.0)
    shares = [1.0 - _decode(bare, n) / _decode(full, n) for n in (1.0, 16.0, 256.0, 4096.0)]
    assert all(a >= b for a, b in pairwise(shares))
    assert shares[0] > 0.04
    assert shares[-1] < 0.01


def test_lm_head_is_read_in_16_bits_in_every_format() -> None:
    # Doubling the vocabulary of an FP8-served model adds the head's extra 16-bit weights (and
    # its logits) at HBM speed at batch 1, not FP8 bytes: engines keep lm_head unquantized.
    base = _model("llama3.1-8b", "vllm", weights="fp8")
    m = base.model
    wide = dataclasses.replace(base, model=dataclasses.replace(m, vocab_size=2 * m.vocab_size))
    dev = base.cluster.device
    hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * base.profile.hbm_efficiency
    extra = (2.0 * m.vocab_size * m.hidden_size + 2.0 * m.vocab_size) / hbm
    assert _decode(wide, 1.0) - _decode(base, 1.0) == pytest.approx(extra, rel=1e-6)
