"""Weights priced in the format their checkpoint stores them: MLA projections as GQA ones,
shared experts and dense-layer MLPs kept in 16 bits where only routed experts are quantized."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism, weight_bytes_per_gpu
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.specs.model import ModelSpec


def _decode_step_s(m: ModelSpec, weights: str) -> float:
    """One decode step of one sequence at 1024 tokens of context on TP8 H200 (vLLM)."""
    eng = engine("vllm")
    it = _iteration_model(
        m,
        catalog.cluster("h200-sxm", 8),
        Parallelism(tp=8),
        weight_format(weights),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    one = np.ones(1)
    return float(it.time_s(one, 1024.0 * one, 0.0 * one, 0.0 * one)[0])


@pytest.mark.parametrize("name", ["kimi-k2.5", "deepseek-v3"])
@pytest.mark.parametrize("flag", ["attention_weights_16bit", "dense_mlp_weights_16bit"])
def test_16_bit_modules_read_more_bytes_per_decode_step(name: str, flag: str) -> None:
    base = catalog.model(name)
    quantized = dataclasses.replace(base, **{flag: False})
    sixteen = dataclasses.replace(base, **{flag: True})
    fmt = weight_format("int4_wo")
    par = Parallelism(tp=8)
    extra_bytes = weight_bytes_per_gpu(sixteen, par, fmt) - weight_bytes_per_gpu(
        quantized, par, fmt
    )
    assert extra_bytes > 0.0
    extra_s = _decode_step_s(sixteen, "int4_wo") - _decode_step_s(quantized, "int4_wo")
    # A one-sequence decode step reads the stored weights: the 16-bit modules take longer
    # (the shared-expert GEMMs of a TP8 rank are small enough to sit at the launch floor, the
    # attention projections and the dense layer are not).
    assert extra_s > 0.0
    if flag == "attention_weights_16bit":
        hbm = catalog.gpu("h200-sxm").hbm_bandwidth_gb_per_s * 1e9
        assert extra_s >= extra_bytes / hbm


def test_the_flag_is_idle_where_the_format_is_already_16_bit() -> None:
    base = catalog.model("kimi-k2.5")
    quantized = dataclasses.replace(
        base, attention_weights_16bit=False, dense_mlp_weights_16bit=False
    )
    assert _decode_step_s(base, "bf16") == _decode_step_s(quantized, "bf16")
