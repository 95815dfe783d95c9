"""``grad_reduce_in_bf16`` (Megatron ``--grad-reduce-in-bf16``): the gradient buffer and the
data-parallel reduction in 2 bytes instead of the framework's word (Megatron's fp32
``main_grad``: 4)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.api import estimate
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.model_states import grad_buffer_bytes, grad_reduce_bytes
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.specs import Plan
from gpuscale.specs.training import Training

MEGATRON = load_profile("megatron")


def test_one_rule_for_the_buffer_and_the_reduction() -> None:
    fp32_grads = Training(seq_len=4096)
    bf16_grads = Training(seq_len=4096, grad_reduce_in_bf16=True)
    assert grad_buffer_bytes(fp32_grads, MEGATRON) == MEGATRON.const("gradient_buffer_bytes") == 4
    assert grad_reduce_bytes(fp32_grads, MEGATRON) == MEGATRON.const("grad_reduce_bytes")
    assert grad_buffer_bytes(bf16_grads, MEGATRON) == grad_reduce_bytes(bf16_grads, MEGATRON) == 2


def test_the_gradient_buffer_halves_and_nothing_else_moves() -> None:
    model = catalog.model("llama3.1-70b")
    plan = Plan(tp=4, pp=8, dp=2, vp=5, micro_batch=1, global_batch=256, zero=1)
    base = Training(seq_len=8192, precision="fp8")
    fp32_grads = plan_memory(model, base, plan, MEGATRON)
    bf16_grads = plan_memory(
        model, dataclasses.replace(base, grad_reduce_in_bf16=True), plan, MEGATRON
    )
    assert bf16_grads["gradients"] == pytest.approx(fp32_grads["gradients"] / 2, rel=1e-12)
    for part in ("weights", "optimizer", "activations"):
        assert bf16_grads[part] == fp32_grads[part]


def test_the_data_parallel_reduction_sends_half_the_bytes() -> None:
    run = dict(gpu="h100-sxm", gpus=64, tp=4, pp=8, vp=5, gbs=256, precision="fp8")
    fp32_grads = estimate("llama3.1-70b", framework="megatron", **run)
    bf16_grads = estimate("llama3.1-70b", framework="megatron", grad_reduce_in_bf16=True, **run)
    assert bf16_grads.parts_s["comm_dp"] < fp32_grads.parts_s["comm_dp"]
    assert bf16_grads.parts_s["compute"] == fp32_grads.parts_s["compute"]


def test_fp32_training_has_no_bf16_gradients() -> None:
    with pytest.raises(InputError, match="needs 16-bit or lower --precision"):
        Training(seq_len=4096, precision="fp32", grad_reduce_in_bf16=True)


def test_the_step_copies_a_bf16_gradient_buffer_to_fp32() -> None:
    # Megatron-Core optimizer.py: main_param.grad = model_param.main_grad.float(); without
    # sharding (ZeRO 0) that copy outweighs the 2 bytes a parameter the buffer saves.
    run = dict(gpu="h100-sxm", gpus=8, tp=2, framework="megatron")
    for zero, more in ((0, True), (1, False)):
        fp32_grads = estimate("llama3.1-8b", zero=zero, **run)
        bf16_grads = estimate("llama3.1-8b", zero=zero, grad_reduce_in_bf16=True, **run)
        assert (bf16_grads.memory_per_gpu_gib > fp32_grads.memory_per_gpu_gib) is more
