"""Transformer Engine's parallel cross-entropy (``--loss te``), as its kernels hold and move the
logits (``transformer_engine/pytorch/triton/cross_entropy.py``): the 16-bit logits are saved
and overwritten by their gradient in backward, so the last stage keeps ``2 x vocab`` bytes per
token and nothing transient, and the loss moves 2 + 4 bytes per logit instead of the profile's
count for the framework's own loss."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.api import estimate
from gpuscale.costmodel.activations import head_terms
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import Plan
from gpuscale.specs.training import Training

GIB = 2**30
QWEN = catalog.model("qwen3-30b-a3b")


def test_te_keeps_the_16_bit_logits_and_no_transient() -> None:
    standard = head_terms(QWEN, Training(seq_len=4096))
    te = head_terms(QWEN, Training(seq_len=4096, loss="te"))
    v = QWEN.vocab_size
    assert standard[1:] == (4.0 * v, 2 * 4.0 * v)  # fp32 log-probabilities + 2 fp32 copies
    assert te[1:] == (2.0 * v, 0.0)
    assert te[0] == standard[0]


def test_te_saves_exactly_the_fp32_logits_and_their_copies_on_the_last_stage() -> None:
    prof = load_profile("megatron")
    plan = Plan(dp=8, ep=8, etp=1, micro_batch=8, global_batch=512, zero=1)
    base = Training(seq_len=4096, precision="mxfp8")
    standard = plan_memory(QWEN, base, plan, prof)
    te = plan_memory(QWEN, dataclasses.replace(base, loss="te"), plan, prof)
    tokens = 8 * 4096
    saved = tokens * QWEN.vocab_size * (4.0 + 8.0 - 2.0)
    assert standard["activations"] - te["activations"] == pytest.approx(saved, rel=1e-9)
    assert standard["weights"] == te["weights"]


def test_te_loss_moves_fewer_bytes_than_megatrons_unfused_loss() -> None:
    run = dict(gpu="gb300", gpus=8, ep=8, etp=1, mbs=8, gbs=512, seq=4096, precision="mxfp8")
    standard = estimate("qwen3-30b-a3b", framework="megatron", **run)
    te = estimate("qwen3-30b-a3b", framework="megatron", loss="te", **run)
    # 38 + 14 bytes per logit (megatron profile) against 2 + 4: the step gets shorter by the
    # difference over the HBM rate, and the memory by the fp32 copies.
    assert te.step_time_s < standard.step_time_s
    assert te.memory_per_gpu_gib < standard.memory_per_gpu_gib - 40
