"""TensorRT-LLM's attention-DP context balancing (``attention_dp_config.enable_balance``):
a new prompt waits until every attention-DP rank has one, or ``timeout_iters`` iterations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale.api import InputError, infer
from gpuscale.planner.serving.steady_state import adp_balance_wait_s
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
from gpuscale.validation.serving_rows import load


def _wait(rate: float, ranks: int, timeout: float) -> float:
    return float(adp_balance_wait_s(np.array([rate]), ranks, np.array([timeout]))[0])


def test_one_rank_releases_each_prompt_at_once() -> None:
    # With one attention-DP rank the prompt that arrives completes the set: no hold.
    assert _wait(2.0, 1, 1e9) == pytest.approx(0.0, abs=1e-9)


def test_sparse_arrivals_wait_half_the_timeout() -> None:
    # Prompts so rare that the timeout always releases them: uniform over the timeout.
    assert _wait(1e-6, 8, 2.2) == pytest.approx(1.1, rel=1e-3)


def _replay(rate: float, ranks: int, timeout: float, cycles: int, seed: int) -> float:
    """The executor's rule on simulated arrivals: per rank a Poisson stream; a release when
    every rank has a prompt (the last one waits for nothing) or the timeout has passed; every
    prompt of the cycle waits until the release. Mean hold per prompt."""
    rng = np.random.default_rng(seed)
    first = rng.exponential(1.0 / rate, size=(cycles, ranks))
    release = np.minimum(first.max(axis=1), timeout)
    held, prompts = 0.0, 0
    for i in range(ranks):
        arrived = first[:, i] <= release
        span = np.where(arrived, release - first[:, i], 0.0)
        more = rng.poisson(rate * span)  # this rank's later prompts, uniform over the span
        held += span.sum() + (rng.uniform(size=more.sum()) * np.repeat(span, more)).sum()
        prompts += int(arrived.sum() + more.sum())
    return held / prompts


@pytest.mark.parametrize(
    ("rate", "ranks", "timeout"),
    [(2.0, 2, 5.0), (1.0, 8, 10.0), (1.0, 8, 1.0), (5.0, 4, 0.5), (0.8, 8, 2.2)],
)
def test_the_hold_matches_a_replay_of_the_rule(rate: float, ranks: int, timeout: float) -> None:
    assert _wait(rate, ranks, timeout) == pytest.approx(
        _replay(rate, ranks, timeout, 200_000, seed=ranks), rel=0.01
    )


@given(
    rate=st.floats(1e-3, 1e3),
    ranks=st.integers(2, 64),
    timeout=st.floats(1e-3, 10.0),
)
def test_wait_is_between_zero_and_the_timeout_and_falls_with_the_rate(
    rate: float, ranks: int, timeout: float
) -> None:
    w = _wait(rate, ranks, timeout)
    assert 0.0 <= w <= timeout * (1 + 1e-9)
    assert _wait(rate * 2.0, ranks, timeout) <= w * (1 + 1e-3) + 1e-12
    assert _wait(rate, ranks + 1, timeout) >= w * (1 - 1e-3) - 1e-12


KW = dict(
    gpu="h200-sxm",
    engine="tensorrt-llm",
    weights="fp8",
    input_len=922,
    output_len=922,
    input_cv=0.064,
    output_cv=0.064,
    concurrency=256,
    num_requests=2560,
)


def test_balancing_holds_prompts_on_attention_dp_ranks_only() -> None:
    # DeepSeek-R1, 8 H200, attention DP 8 (the InferenceX launch): about 0.8 prompts/s reach
    # each rank, so the 60-iteration timeout (~2.2 s) releases most prompts: ~1 s more TTFT.
    adp = dict(tp=8, ep=8, attention_dp=8)
    off = infer("deepseek-r1", **KW, **adp).to_dict()["options"][0]
    on = infer("deepseek-r1", **KW, **adp, adp_balance_timeout_iters=60).to_dict()["options"][0]
    assert 500.0 < on["ttft_ms"] - off["ttft_ms"] < 2000.0
    # Without attention DP there is nothing to balance.
    tp = dict(tp=8, ep=8)
    a = infer("deepseek-r1", **KW, **tp).to_dict()["options"][0]["ttft_ms"]
    b = infer("deepseek-r1", **KW, **tp, adp_balance_timeout_iters=60).to_dict()["options"][0]
    assert b["ttft_ms"] == pytest.approx(a)


def test_negative_timeout_is_refused() -> None:
    with pytest.raises(InputError) as err:
        infer("deepseek-r1", **KW, tp=8, ep=8, attention_dp=8, adp_balance_timeout_iters=-1)
    assert err.value.field == "adp_balance_timeout_iters"


def test_inferencex_tensorrt_llm_attention_dp_rows_carry_the_launch_setting() -> None:
    rows = [r for r in load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")]
    on = [r for r in rows if "adp_balance_timeout_iters" in r.kwargs]
    assert on
    for r in on:
        assert r.kwargs["adp_balance_timeout_iters"] == INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
        assert r.engine == "trtllm" and r.kwargs["attention_dp"] > 1
        # InferenceX's exports and AIConfigurator's dump of the same runs.
        assert r.raw["silicon_data_source"].startswith(("source_file=2026-0", "db-dump/"))
    # AIConfigurator's own attention-DP runs and every other engine keep the engine default.
    others = [r for r in rows if r.mode == "agg" and r.kwargs.get("attention_dp", 1) > 1]
    assert any("adp_balance_timeout_iters" not in r.kwargs for r in others)
