"""Attention-DP ranks in step (``planner/serving/adp_lockstep.py``): an iteration lasts as long
as its fullest rank, with TensorRT-LLM's balanced releases or without them."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.adp_lockstep import (
    balance_cycle_iterations,
    expected_max_poisson,
    lockstep_mix,
)
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import iteration_mix
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct
from tests.benchmark_scripts import load_benchmark

VALIDATE = Path(__file__).resolve().parents[2] / "benchmarks" / "validate_serving.py"


def _it(model: str = "deepseek-r1", attention_dp: int = 8, tp: int = 8) -> IterationModel:
    eng = engine("tensorrt-llm")
    ep = tp if catalog.model(model).is_moe else 1
    return _iteration_model(
        catalog.model(model),
        catalog.cluster("h200-sxm", 8),
        Parallelism(tp=tp, ep=ep, attention_dp=attention_dp),
        weight_format("fp8"),
        "fp8",
        load_profile(eng.cost_profile),
        eng,
    )


@pytest.mark.parametrize(
    ("mean", "ranks", "per"), [(0.3, 8, 1), (2.5, 8, 1), (6.0, 8, 2), (1.0, 2, 1)]
)
def test_expected_max_poisson_matches_sampling(mean: float, ranks: int, per: int) -> None:
    rng = np.random.default_rng(7)
    draws = rng.poisson(mean, size=(200_000, ranks))
    sampled = float(np.ceil(draws / per).max(axis=1).mean())
    got = float(expected_max_poisson(np.array([mean]), ranks, per)[0])
    assert got == pytest.approx(sampled, rel=0.01, abs=0.005)


def test_balance_cycle_reaches_the_timeout_at_light_load_and_the_last_arrival_at_heavy() -> None:
    light = balance_cycle_iterations(np.array([1e-4]), 8, 60.0)
    assert float(light[0]) == pytest.approx(60.0, rel=1e-3)
    # heavy load: the mean of the largest of 8 exponentials, H_8 / rate
    rate = 0.5
    harmonic = sum(1.0 / k for k in range(1, 9))
    heavy = balance_cycle_iterations(np.array([rate]), 8, 1e6)
    assert float(heavy[0]) == pytest.approx(harmonic / rate, rel=1e-3)


def _mix(it: IterationModel, n: float, prompts: float) -> tuple[np.ndarray, ...]:
    eng = engine("tensorrt-llm")
    nn = np.array([n])
    ctx = np.array([1500.0])
    half = np.array([512.0])
    p = np.array([prompts * 1024.0])
    t, own, dec = iteration_mix(it, eng, nn, ctx, p, half, 1024.0)
    return nn, ctx, half, p, t, own, dec


def test_one_rank_or_a_dense_model_is_unchanged() -> None:
    eng = engine("tensorrt-llm")
    for it in (_it(attention_dp=1), _it(model="llama3.1-70b", attention_dp=8)):
        nn, ctx, half, p, t, own, dec = _mix(it, 16.0, 0.05)
        got = lockstep_mix(it, eng, nn, ctx, half, 1024.0, p / 1024.0, t, own, dec)
        assert got[0] == pytest.approx(t) and got[1] == pytest.approx(own)


def test_without_balancing_any_ranks_prompt_stretches_every_rank() -> None:
    it = _it()
    eng = engine("tensorrt-llm")
    assert eng.adp_balance_timeout_iters == 0
    nn, ctx, half, p, t, own, dec = _mix(it, 16.0, 0.02)
    share = (t - dec) / (own - dec)
    got, got_own = lockstep_mix(it, eng, nn, ctx, half, 1024.0, p / 1024.0, t, own, dec)
    want = dec + (1.0 - (1.0 - share) ** 8) * (own - dec)
    assert got == pytest.approx(want)
    assert float(got[0]) > float(t[0])
    assert got_own == pytest.approx(own)


def test_balanced_releases_run_the_fullest_ranks_prompts_together() -> None:
    """Every rank busy and one prompt per rank per 100 iterations against a 60-iteration
    timeout: releases come about every 60 iterations (timeout-bound), the fullest of eight
    ranks holds more than one prompt, so its iteration is longer than one prompt's but the
    prompt iterations are fewer than eight independent ranks' would be."""
    it = _it()
    eng = dataclasses.replace(engine("tensorrt-llm"), adp_balance_timeout_iters=60)
    free_eng = engine("tensorrt-llm")
    nn, ctx, half, p, t, own, dec = _mix(it, 64.0, 0.01)
    bal, bal_own = lockstep_mix(it, eng, nn, ctx, half, 1024.0, p / 1024.0, t, own, dec)
    free, _ = lockstep_mix(it, free_eng, nn, ctx, half, 1024.0, p / 1024.0, t, own, dec)
    assert float(bal_own[0]) > float(own[0])
    assert float(t[0]) < float(bal[0]) < float(free[0])
    cycle = float(balance_cycle_iterations(np.array([0.01]), 8, 60.0)[0])
    assert 50.0 < cycle <= 60.0


def test_balanced_release_is_capped_by_the_token_budget() -> None:
    """8k prompts under an 8,320-token budget: one prompt per rank per iteration, so the
    release's prompt-carrying iteration holds one prompt on the fullest rank."""
    it = _it()
    eng = dataclasses.replace(
        engine("tensorrt-llm"), adp_balance_timeout_iters=60, max_num_batched_tokens=8320
    )
    nn = np.array([8.0])
    ctx = np.array([7800.0])
    half = np.array([3700.0])
    p = np.array([0.05 * 7372.0])
    t, own, dec = iteration_mix(it, eng, nn, ctx, p, half, 7372.0)
    bal, bal_own = lockstep_mix(it, eng, nn, ctx, half, 7372.0, p / 7372.0, t, own, dec)
    assert float(bal[0]) > float(t[0])
    one = it.time_s(nn, ctx, np.array([7372.0]), half)
    busy = (1.0 - np.exp(-8.0)) ** 8
    # the own iteration is one prompt's, waiting for half the release's other iterations
    assert float(bal_own[0]) >= float(busy * one[0])


def test_trtllm_attention_dp_rows_closer() -> None:
    """The nine aggregated TensorRT-LLM DeepSeek rows with attention DP (InferenceX,
    enable_balance with timeout_iters 60): mean |error| TTFT 56.3% and TPOT 24.6% with each
    rank alone (branch adp, after the gather/scatter); 37.2% and 16.9% with the ranks in step."""
    bench = load_benchmark(VALIDATE, "validate_serving_adp")
    rows = [
        r
        for r in distinct(load(bench.ROWS))
        if r.expressible
        and r.raw["mode"] == "agg"
        and r.raw["backend"] == "trtllm"
        and r.kwargs.get("attention_dp", 1) > 1
    ]
    assert len(rows) == 9
    preds = [bench.predict(r) for r in rows]
    ttft = statistics.mean(
        abs(p["ttft_ms"] / r.ttft_ms - 1.0) for r, p in zip(rows, preds, strict=True)
    )
    tpot = statistics.mean(
        abs(p["tpot_ms"] / r.tpot_ms - 1.0) for r, p in zip(rows, preds, strict=True)
    )
    assert ttft < 0.40
    assert tpot < 0.18


def _replay(rate: float, ranks: int, timeout: float, cycles: int, seed: int) -> tuple[float, float]:
    """The balance rule on simulated arrivals (as ``test_serving_adp_balance._replay``): per rank
    a Poisson stream, a release when every rank has a prompt or the timeout has passed. Mean
    cycle length and mean largest count of prompts a rank holds at the release."""
    rng = np.random.default_rng(seed)
    first = rng.exponential(1.0 / rate, size=(cycles, ranks))
    release = np.minimum(first.max(axis=1), timeout)
    counts = np.zeros((cycles, ranks))
    for i in range(ranks):
        arrived = first[:, i] <= release
        span = np.where(arrived, release - first[:, i], 0.0)
        counts[:, i] = arrived + rng.poisson(rate * span)
    return float(release.mean()), float(counts.max(axis=1).mean())


@pytest.mark.parametrize(
    ("rate", "ranks"), [(1 / 140, 8), (1 / 70, 8), (0.05, 8), (0.2, 8), (0.05, 16)]
)
def test_release_cycle_and_fullest_rank_match_a_replay_of_the_rule(rate: float, ranks: int) -> None:
    """The fullest rank's count at a release read as the largest of ``ranks`` Poisson counts of
    mean ``rate x E[F]``: within 2% of the replayed rule, timeout-bound to arrival-bound."""
    cycle, fullest = _replay(rate, ranks, 60.0, 200_000, seed=ranks)
    got_cycle = float(balance_cycle_iterations(np.array([rate]), ranks, 60.0)[0])
    got = float(expected_max_poisson(np.array([rate * got_cycle]), ranks)[0])
    assert got_cycle == pytest.approx(cycle, rel=0.01)
    assert got == pytest.approx(fullest, rel=0.02)
