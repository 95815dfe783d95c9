"""Prompts reach the steady state in whole chunks, not as a thin share of every decode step
(``steady_state.mean_iteration_s``)."""

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
    chunk_tokens,
    closed_loop,
    load_curve,
    mean_iteration_s,
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
    chunk = chunk_tokens(n, 4096.0, eng)
    assert chunk.tolist() == [4096.0] * 3  # the prompt fits the budget left after 8 decodes
    p = np.array([0.0, 1024.0, 8000.0])
    t = mean_iteration_s(it, n, ctx, p, half, chunk)
    decode = it.time_s(n, ctx, np.zeros(3), half)
    whole = it.time_s(n, ctx, chunk, half)
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
