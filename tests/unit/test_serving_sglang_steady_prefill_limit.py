"""SGLang's --max-prefill-tokens in the staggered steady state (``steady_state.load_curve``).

The cohort simulation has applied SGLang 0.5.x's ``PrefillAdder.add_one_req`` rule since the
``sglang-moe`` branch; the steady state, which fixed-length loads past ``MAX_COHORTS`` and every
random-length load fall back to, read only the token budget, so the same engine admitted up to
``budget / ISL`` prompts per iteration there and one or two in the simulation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.catalog.serving_engines import EngineProfile, engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.cohort_sim import simulate
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import (
    OperatingPoint,
    Workload,
    closed_loop,
    load_curve,
    needs_capacity,
    prefill_batch_prompts,
    prompts_under_prefill_limit,
    resolve_capacity,
)

KV_TOKENS = 4.0e6
"""A pool that never binds here (Llama-3.1-8B on an H200 holds ~0.9M tokens per GPU; the
tests are about the prefill limit, not the pages)."""


def _it(eng: EngineProfile) -> IterationModel:
    return _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h200-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )


def _mixed(limit: int | None) -> EngineProfile:
    return dataclasses.replace(engine("sglang"), prefill_policy="mixed", max_prefill_tokens=limit)


def _point(eng: EngineProfile, work: Workload, conc: float) -> OperatingPoint:
    it = _it(eng)
    curve = load_curve(it, eng, work, KV_TOKENS)
    if needs_capacity(curve, conc):
        curve = resolve_capacity(it, eng, work, KV_TOKENS, curve)
    return closed_loop(curve, conc, KV_TOKENS, work)


def test_prompts_per_batch_follow_add_one_req() -> None:
    # 1000-token prompts under --max-prefill-tokens 2500 (AIConfigurator's isl + 1500) with
    # --enable-mixed-chunk: rem_input_tokens = 2500 - running. Below 500 running decodes the
    # second prompt is below what is left (1500 - running > 1000 is false only from 500 on).
    eng = _mixed(2500)
    n = np.array([0.0, 352.0, 499.0, 500.0, 512.0, 3000.0])
    np.testing.assert_array_equal(prefill_batch_prompts(eng, n, 1000.0), [2, 2, 2, 1, 1, 1])
    # Not mixed: the running decodes are not subtracted (scheduler passes 0).
    first = dataclasses.replace(eng, prefill_policy="prefill_first")
    np.testing.assert_array_equal(prefill_batch_prompts(first, n, 1000.0), [2] * 6)
    # The limit exactly reached: the second prompt's 1000 tokens reach the 1000 left.
    np.testing.assert_array_equal(
        prefill_batch_prompts(dataclasses.replace(first, max_prefill_tokens=2000), n, 1000.0),
        [1] * 6,
    )
    # No limit (vLLM, TensorRT-LLM): unbounded.
    assert np.isinf(prefill_batch_prompts(_mixed(None), n, 1000.0)).all()


def test_same_rule_as_the_cohort_simulation() -> None:
    # The burst of the cohort simulation starts 2 prompts per batch at limit 2001 and 1 at 2000
    # (tests/unit/test_serving_sglang_prefill_limit.py); the steady-state rule gives the same.
    for limit, per_batch in ((2001, 2.0), (2000, 1.0), (3001, 3.0)):
        eng = dataclasses.replace(engine("sglang"), max_prefill_tokens=limit)
        assert prefill_batch_prompts(eng, np.zeros(1), 1000.0)[0] == per_batch
        sim = simulate(_it(eng), eng, Workload(input_len=1000, output_len=64), 6, 1e9, 0, 1, 1)
        assert sim is not None
        first_group = float(sim.weight[np.argmin(sim.ttft_s)])
        assert first_group == per_batch


def test_one_prompt_per_iteration_caps_the_decodes_at_the_output_length() -> None:
    # With 512 clients, 500-token outputs and the limit leaving one prompt per batch once 500
    # decodes run, at most about OSL - 1 = 499 requests can be decoding (one starts per
    # iteration, each decodes 499 iterations): the closed loop saturates and the rest queue.
    # Without the limit (default 16384 over the 8192-token budget) 512 run and nobody queues.
    work = Workload(input_len=1000, output_len=500)
    free = _point(_mixed(None), work, 512.0)
    limited = _point(_mixed(2500), work, 512.0)
    assert not free.saturated and free.queue_s == 0.0
    assert limited.saturated and limited.queue_s > 0.0
    assert limited.ttft_s > free.ttft_s
    assert limited.running == pytest.approx(499.0, rel=0.02)
    # Below that, the limit does not bind and nothing changes.
    light_free = _point(_mixed(None), work, 256.0)
    light = _point(_mixed(2500), work, 256.0)
    assert light.ttft_s == pytest.approx(light_free.ttft_s, rel=1e-9)
    assert light.tpot_s == pytest.approx(light_free.tpot_s, rel=1e-9)


def test_default_limit_never_binds_in_the_steady_state() -> None:
    # ServerArgs default 16384 over the 8192-token chunk budget: identical curves.
    eng = engine("sglang")
    free = dataclasses.replace(eng, max_prefill_tokens=None)
    for isl, osl in ((1000, 100), (6000, 200), (300, 50)):
        work = Workload(input_len=isl, output_len=osl)
        a = load_curve(_it(eng), eng, work, KV_TOKENS)
        b = load_curve(_it(free), free, work, KV_TOKENS)
        np.testing.assert_array_equal(a.feasible, b.feasible)
        np.testing.assert_allclose(a.ttft_s, b.ttft_s)


def _add_one_req_replay(limit: int, isl: int, running: int, mixed: bool) -> int:
    """SGLang 0.5.x get_new_batch_prefill + PrefillAdder.add_one_req, literally: rem_input_tokens
    starts at the limit less the mixed decodes; the first request is always added, a later one
    is refused once its prompt reaches what is left, and budget_state stops the batch at <= 0."""
    left = limit - (running if mixed else 0)
    added = 0
    while True:
        if added and isl >= left:
            break
        added += 1
        left -= isl
        if left <= 0:
            break
    return added


@given(
    limit=st.integers(1, 40_000),
    isl=st.integers(1, 9_000),
    running=st.integers(0, 4_096),
    mixed=st.booleans(),
)
def test_prefill_batch_prompts_is_the_rule_replayed(
    limit: int, isl: int, running: int, mixed: bool
) -> None:
    eng = dataclasses.replace(
        engine("sglang"),
        max_prefill_tokens=limit,
        prefill_policy="mixed" if mixed else "prefill_first",
    )
    got = prefill_batch_prompts(eng, np.array([float(running)]), float(isl))[0]
    assert got == _add_one_req_replay(limit, isl, running, mixed)


def test_the_cohort_simulation_reads_the_one_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # One rule in one place: the cohort simulation asks ``prompts_under_prefill_limit`` (the
    # steady state's rule) how many prompts start, so changing it there changes the burst.
    import gpuscale.planner.serving.cohort_sim as cohort_sim

    eng = dataclasses.replace(engine("sglang"), max_prefill_tokens=3001)
    work = Workload(input_len=1000, output_len=64)

    def first_group() -> float:
        sim = simulate(_it(eng), eng, work, 6, 1e9, 0, 1, 1)
        assert sim is not None
        return float(sim.weight[np.argmin(sim.ttft_s)])

    assert first_group() == 3.0

    def one_each(left: object, prompt_tokens: float, *, first: bool) -> np.ndarray:
        return np.asarray(1.0 if first else 0.0)

    monkeypatch.setattr(cohort_sim, "prompts_under_prefill_limit", one_each)
    assert first_group() == 1.0


@given(
    left=st.integers(-5_000, 50_000),
    prompt=st.integers(1, 9_000),
    first=st.booleans(),
)
def test_prompts_under_the_limit_are_add_one_req_replayed(
    left: int, prompt: int, first: bool
) -> None:
    # add_one_req, literally: a prompt is refused once it reaches what is left, unless the
    # batch is empty; budget_state stops the batch at <= 0.
    added, rest = 0, left
    while True:
        if (added or not first) and prompt >= rest:
            break
        added += 1
        rest -= prompt
        if rest <= 0:
            break
    assert float(prompts_under_prefill_limit(float(left), float(prompt), first=first)) == added
