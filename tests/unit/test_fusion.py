"""torch.compile's fusion and torchao's float8 casts (costmodel/fusion.py), counted per kernel,
and what they change in a step."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.compute import layer_compute, low_precision_cast_s
from gpuscale.costmodel.flops import layer_gemms
from gpuscale.costmodel.fusion import (
    COMPILED_BACKWARD,
    COMPILED_FORWARD,
    EAGER_BACKWARD,
    EAGER_FORWARD,
    compiled_passes,
    eager_passes,
    torchao_tensorwise_casts,
    transformer_engine_casts,
)
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import Plan, PlanBatch, Training
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import load_all, predict, to_case

LLAMA3_KV = 8 / 32  # Llama 3.1 8B: 8 K/V heads of 32


def test_eager_block_counts_one_round_trip_per_torch_op() -> None:
    # Forward: two RMSNorms of 8 ops (18 vectors each), rotary on Q and K (10 per width),
    # repeat_kv of K and V (1 + kv each), two residual adds (3 each); SwiGLU 5 MLP vectors.
    forward = sum(k.hidden + LLAMA3_KV * k.kv for k in EAGER_FORWARD)
    assert forward == pytest.approx(36 + 10 + 10 * LLAMA3_KV + 2 * (1 + LLAMA3_KV) + 6)
    assert sum(k.ffn for k in EAGER_FORWARD) == 5
    assert len(EAGER_FORWARD) == 28
    assert sum(k.ffn for k in EAGER_BACKWARD) == 9  # silu_backward and the two mul grads
    p = eager_passes(LLAMA3_KV)
    assert p.hidden == pytest.approx((173 + 24 * LLAMA3_KV) / 3)
    assert p.ffn == pytest.approx(14 / 3)


def test_the_torchtitan_profile_prices_the_counted_eager_block() -> None:
    constants = load_profile("torchtitan").constants
    p = eager_passes(LLAMA3_KV)
    assert constants["elementwise_hidden_passes"] == pytest.approx(p.hidden)
    assert constants["elementwise_ffn_passes"] == pytest.approx(p.ffn)
    assert constants["elementwise_kernels_per_layer"] == pytest.approx(p.kernels)


def test_inductor_fuses_each_chain_between_extern_calls_into_one_kernel() -> None:
    # Forward: norm, the Q and K upcasts, the two ATen complex multiplies (Inductor generates
    # no complex code), cast back + repeat_kv, add + norm, SwiGLU, add: 9 kernels; backward 11.
    assert len(COMPILED_FORWARD) == 9
    assert len(COMPILED_BACKWARD) == 11
    assert sum(1 for k in COMPILED_FORWARD + COMPILED_BACKWARD if "complex_mul" in k.name) == 4
    p = compiled_passes(LLAMA3_KV)
    assert p.hidden == pytest.approx((51 + 20 * LLAMA3_KV) / 3)
    assert p.ffn == pytest.approx(8 / 3)
    eager = eager_passes(LLAMA3_KV)
    assert p.hidden < eager.hidden / 3 and p.ffn < eager.ffn and p.kernels < eager.kernels / 3


def test_compiled_casts_fuse_the_amax_into_the_producer() -> None:
    eager = torchao_tensorwise_casts(compiled=False, fp8_all_gather=False)
    compiled = torchao_tensorwise_casts(compiled=True, fp8_all_gather=False)
    assert (eager.input_forward, compiled.input_forward) == (5.0, 3.0)
    assert (eager.grad_output, compiled.grad_output) == (7.0, 4.0)
    gathered = torchao_tensorwise_casts(compiled=True, fp8_all_gather=True)
    assert gathered.weight_forward == 0.0 and compiled.weight_forward == 5.0
    assert gathered.weight_backward == compiled.weight_backward == 2.0


@pytest.mark.parametrize("compiled", [False, True])
def test_eager_float8_casts_the_input_of_each_separate_linear(compiled: bool) -> None:
    # torchtitan's Llama has separate wq/wk/wv and w1/w3 Float8Linear modules: in eager each
    # casts (and saves the transposed copy of) the same input itself; compiled, AOTAutograd's
    # common-subexpression elimination leaves one cast of each input.
    m = catalog.model("llama3.1-8b")
    tokens, h, f = 4096.0, float(m.hidden_size), float(m.ffn_hidden_size)
    gemms = layer_gemms(m, np.array([tokens]), np.array([1.0]))
    training = Training(seq_len=4096, precision="fp8", compile=compiled, fp8_all_gather=True)
    fwd, bwd = low_precision_cast_s(gemms, training, load_profile("torchtitan"), 1.0, m)
    casts = torchao_tensorwise_casts(compiled=compiled, fp8_all_gather=True)
    shared = 1.0 if compiled else 3.0, 1.0 if compiled else 2.0
    inputs = tokens * (shared[0] * h + m.q_width + shared[1] * h + f)
    assert float(fwd[0]) == pytest.approx(casts.input_forward * inputs)
    weights = sum(float(g.k[0] * g.n[0]) for g in gemms)
    outputs = tokens * sum(float(g.n[0]) for g in gemms)
    assert float(bwd[0]) == pytest.approx(
        casts.input_backward * inputs
        + casts.grad_output * outputs
        + casts.weight_backward * weights
    )


def test_transformer_engine_casts_the_output_gradient_once_in_backward() -> None:
    # Forward: one cast-transpose of the input (read 2, write 1 + 1); backward reuses the saved
    # transposed input and cast-transposes the output gradient; weights cached per step.
    te = transformer_engine_casts(1.0)
    assert (te.input_forward, te.input_backward, te.grad_output) == (4.0, 0.0, 4.0)
    assert te.weight_forward == te.weight_backward == 0.0


def _layer(framework: str, **training: object) -> float:
    m = catalog.model("llama3.1-8b")
    t = Training(seq_len=8192, **training)  # type: ignore[arg-type]
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=2, global_batch=16, zero=3)])
    lc = layer_compute(m, catalog.gpu("h100-sxm"), t, plans, load_profile(framework))
    return float(lc.layer_forward_s[0] + lc.layer_backward_s[0])


def test_compile_shortens_an_eager_stack_and_leaves_a_fused_one() -> None:
    assert _layer("torchtitan", compile=True) < 0.95 * _layer("torchtitan")
    # A profile whose kernels are already fused below Inductor's count keeps its own.
    fused = dataclasses.replace(
        load_profile("torchtitan"),
        constants={
            **load_profile("torchtitan").constants,
            "elementwise_hidden_passes": 6.0,
            "elementwise_ffn_passes": 2.0,
            "elementwise_kernels_per_layer": 3.0,
        },
    )
    m = catalog.model("llama3.1-8b")
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=2, global_batch=16, zero=3)])
    times = [
        layer_compute(m, catalog.gpu("h100-sxm"), Training(seq_len=8192, compile=c), plans, fused)
        for c in (False, True)
    ]
    np.testing.assert_allclose(times[0].layer_forward_s, times[1].layer_forward_s)


@pytest.mark.parametrize("framework", ["megatron", "generic", "deepspeed"])
def test_a_shipped_fused_stack_keeps_its_own_count_under_compile(framework: str) -> None:
    # Megatron's fused kernels move less than Inductor's block in all (12 hidden-width passes
    # against 18.7) though fewer MLP-width passes and kernels are Inductor's: the block is
    # priced as one or the other, never a mix of the two that no stack runs.
    assert _layer(framework, compile=True) == pytest.approx(_layer(framework), rel=1e-12)


def test_torchao_float8_needs_compile_to_be_competitive() -> None:
    # torchtitan docs/float8.md: compile is "required for competitive performance".
    bf16 = _layer("torchtitan", compile=True)
    eager_fp8 = _layer("torchtitan", precision="fp8", fp8_all_gather=True)
    compiled_fp8 = _layer("torchtitan", precision="fp8", fp8_all_gather=True, compile=True)
    assert compiled_fp8 < eager_fp8 and compiled_fp8 < bf16


def test_float8_all_gather_halves_the_gathered_linear_weights() -> None:
    m = catalog.model("llama3.1-8b")
    cluster = catalog.cluster("h100-sxm", 8)
    plan = Plan(dp=8, micro_batch=2, global_batch=16, zero=3)
    profile = load_profile("torchtitan")
    base = Training(seq_len=8192, precision="fp8", compile=True)
    one = estimate_plan(m, cluster, base, plan, profile)
    gathered = estimate_plan(
        m, cluster, dataclasses.replace(base, fp8_all_gather=True), plan, profile
    )
    assert gathered.comm_zero_s[0] < one.comm_zero_s[0]


def test_the_torchtitan_paper_rows_read_compile_from_their_notes() -> None:
    rows = {r["id"]: r for r in load_all(DATA_DIR)}
    eager, compiled, fp8 = (to_case(rows[f"torchtitan-paper-t1-{i}"]) for i in (1, 2, 3))
    assert not eager.training.compile and compiled.training.compile and fp8.training.compile
    assert fp8.training.fp8_all_gather and not compiled.training.fp8_all_gather
    assert not any("compile" in limit for limit in compiled.limitations)
    profile = load_profile("torchtitan")
    assert predict(compiled, profile) > predict(eager, profile)
