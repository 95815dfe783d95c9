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
from gpuscale.validation.serving_rows import INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS, load


def _wait(rate: float, ranks: int, timeout: float) -> float:
    return float(adp_balance_wait_s(np.array([rate]), ranks, np.array([timeout]))[0])


def test_one_rank_without_timeout_waits_a_mean_interarrival_time() -> None:
    # F ~ Exp(rate): E[F^2] / (2 E[F]) = 1 / rate (the inspection paradox).
    assert _wait(2.0, 1, 1e9) == pytest.approx(0.5, rel=2e-3)


def test_sparse_arrivals_wait_half_the_timeout() -> None:
    # Prompts so rare that the timeout always releases them: uniform over the timeout.
    assert _wait(1e-6, 8, 2.2) == pytest.approx(1.1, rel=1e-3)


def test_the_max_of_eight_ranks_by_hand() -> None:
    # 8 ranks at 0.8 prompts/s each with a 2.2 s timeout (60 iterations of 37 ms): integrate
    # the survival 1 - (1 - e^{-0.8 u})^8 of the release time by hand.
    u = np.linspace(0.0, 2.2, 200_001)
    s = 1.0 - (1.0 - np.exp(-0.8 * u)) ** 8
    first, second = np.trapezoid(s, u), np.trapezoid(2 * u * s, u)
    assert _wait(0.8, 8, 2.2) == pytest.approx(second / (2 * first), rel=1e-3)


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
