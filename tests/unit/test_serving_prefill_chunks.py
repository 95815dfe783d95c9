"""Prompts reach the steady state in whole chunks, not as a thin share of every decode step
(``steady_state.iteration_mix``)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import _iteration_model, kv_pool
from gpuscale.planner.serving.steady_state import (
    Workload,
    closed_loop,
    iteration_mix,
    load_curve,
)


def _setup(model: str, weights: str, tp: int, work: Workload, eng_name: str = "vllm"):
    m = catalog.model(model)
    cl = catalog.cluster("h100-sxm", tp)
    eng = engine(eng_name)
    prof = load_profile(eng.cost_profile)
    par = Parallelism(tp=tp)
    fmt = weight_format(weights)
    kv, _, _ = kv_pool(m, cl, par, fmt, "bf16", prof, eng, work)
    it = _iteration_model(m, cl, par, fmt, "bf16", prof, eng)
    return it, eng, kv


def test_mean_iteration_blends_decode_and_chunk_iterations() -> None:
    work = Workload(input_len=4096.0, output_len=256.0)
    it, eng, _ = _setup("llama3.1-8b", "bf16", 1, work)
    n = np.array([8.0, 8.0, 8.0])
    ctx = np.full(3, 4224.0)
    half = np.full(3, 2048.0)
    p = np.array([0.0, 1024.0, 8000.0])
    t, whole, decode = iteration_mix(it, eng, n, ctx, p, half, 4096.0)
    chunk = np.full(3, 4096.0)  # the prompt fits the budget left after 8 decodes
    assert decode == pytest.approx(it.time_s(n, ctx, np.zeros(3), np.zeros(3)))
    assert whole[:2] == pytest.approx(it.time_s(n[:2], ctx[:2], chunk[:2], half[:2]))
    assert t[0] == pytest.approx(decode[0])  # no prompts: decode steps only
    # A quarter of a chunk per step on average = one iteration in four carries a whole chunk.
    assert t[1] == pytest.approx(0.75 * decode[1] + 0.25 * whole[1])
    # More prompt tokens than one chunk per step: every iteration carries them (the fluid case).
    assert t[2] == pytest.approx(it.time_s(n[2:], ctx[2:], p[2:], half[2:])[0])


def test_moe_decode_steps_do_not_pay_for_other_prompts_expert_reads() -> None:
    # gpt-oss-120b on 8 H100s, 7,372-token prompts and 922 output tokens, 4 requests in flight
    # (the InferenceX 8192/1024 c4 row): a prompt arrives about once per 230 decode steps and
    # runs as one 7,372-token iteration. Spread thinly over every step (32 prompt tokens each)
    # it touched ~90 of the 128 experts per layer in every decode step instead of ~15.
    work = Workload(input_len=7372.0, output_len=922.0)
    it, eng, kv = _setup("gpt-oss-120b", "nvfp4", 8, work)
    curve = load_curve(it, eng, work, kv)
    point = closed_loop(curve, 4.0, kv, work)
    n = np.array([point.running - point.x * point.iteration_s * point.prefill_iterations])
    ctx = np.full(1, 7372.0 + 461.0)
    half = np.full(1, 3686.0)
    decode = float(it.time_s(n, ctx, np.zeros(1), half)[0])
    whole = float(it.time_s(n, ctx, np.full(1, 7372.0), half)[0])
    # Little's law: prompts per decode step = n / (OSL - 1), each one whole-prompt iteration.
    share = float(n[0]) / 921.0
    assert point.tpot_s == pytest.approx((1 - share) * decode + share * whole, rel=0.02)
    fluid = float(it.time_s(n, ctx, n * 7372.0 / 921.0, half)[0])
    assert fluid > 1.2 * point.tpot_s  # what the fluid share charged


def test_gpt_oss_attention_weights_are_read_in_16_bits() -> None:
    # gpt-oss quantizes only its experts (modules_to_not_convert): a decode step on one GPU
    # reads the attention projections at 2 bytes per weight, not at MXFP4's ~0.56.
    import dataclasses

    from gpuscale.costmodel.params import mean_attention_params
    from gpuscale.costmodel.serving.iteration import weight_bytes_per_gpu

    m = catalog.model("gpt-oss-120b")
    quantized = dataclasses.replace(m, attention_weights_16bit=False)
    fmt = weight_format("nvfp4")
    par = Parallelism(tp=1)
    extra = weight_bytes_per_gpu(m, par, fmt) - weight_bytes_per_gpu(quantized, par, fmt)
    expected = m.num_layers * mean_attention_params(m) * (2.0 - fmt.weight_bytes)
    assert extra == pytest.approx(expected)
    cl = catalog.cluster("h200-sxm", 1)
    eng = engine("vllm")
    prof = load_profile(eng.cost_profile)
    one = np.ones(1)
    t = _iteration_model(m, cl, par, fmt, "bf16", prof, eng).time_s(
        one, 1024 * one, 0 * one, 0 * one
    )
    t_q = _iteration_model(quantized, cl, par, fmt, "bf16", prof, eng).time_s(
        one, 1024 * one, 0 * one, 0 * one
    )
    hbm = cl.device.hbm_bandwidth_gb_per_s * 1e9 * prof.hbm_efficiency
    # The step's q/k/v/o projections: (q + 2 kv) x hidden in, hidden x q out, per layer.
    proj = (m.q_width + 2 * m.kv_width + m.q_width) * m.hidden_size
    extra_s = m.num_layers * proj * (2.0 - fmt.weight_bytes) / hbm
    # At most the extra weight traffic; less only where a quantized GEMM sat on its math floor.
    assert 0.8 * extra_s < float(t[0] - t_q[0]) <= extra_s * 1.001


def test_vllm_scheduler_defaults_follow_the_gpu() -> None:
    # vllm/engine/arg_utils.py get_batch_defaults (OpenAI server): >= 70 GiB and not an A100:
    # 8,192 tokens per step and 1,024 running requests; otherwise 2,048 and 256.
    vllm = engine("vllm")
    for gpu, budget, seqs in (
        ("h100-sxm", 8192, 1024),
        ("mi300x", 8192, 1024),
        ("a100-sxm-80gb", 2048, 256),
        ("l40s", 2048, 256),
    ):
        eng = vllm.for_device(catalog.gpu(gpu))
        assert (eng.max_num_batched_tokens, eng.max_num_seqs) == (budget, seqs), gpu
    assert engine("sglang").for_device(catalog.gpu("a100-sxm-80gb")) == engine("sglang")
    # The cap shows under load: 512 clients on an A100 run at most 256 at once.
    from gpuscale.api import infer

    a100 = infer("llama3.1-8b", gpu="a100-sxm-80gb", engine="vllm", concurrency=512)
    h100 = infer("llama3.1-8b", gpu="h100-sxm", engine="vllm", concurrency=512)
    assert a100.to_dict()["options"][0]["running_requests_per_rank"] <= 256.0 + 1e-6
    assert h100.to_dict()["options"][0]["running_requests_per_rank"] > 256.0
