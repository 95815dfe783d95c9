"""Attention-DP ranks in step in the fixed-length closed loop (``cohort_sim.simulate_in_step``,
``simulate_ranks``): every iteration lasts as long as its fullest rank's, an idle rank runs the
dummy (``adp_lockstep.step_time_s``, the rule the steady state's ``lockstep_mix`` takes in
expectation)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale.catalog.serving_engines import engine
from gpuscale.planner.serving.adp_lockstep import in_step, step_time_s
from gpuscale.planner.serving.cohort_sim import (
    CohortResult,
    simulate,
    simulate_in_step,
    simulate_ranks,
)
from gpuscale.planner.serving.steady_state import Workload
from tests.unit.test_serving_adp_lockstep import _it

ENG = engine("tensorrt-llm")
WORK = Workload(input_len=2000, output_len=100)


def _mean(sim: CohortResult, field: str) -> float:
    return float(np.average(getattr(sim, field), weights=sim.weight))


def test_step_time_is_the_fullest_rank_and_an_idle_rank_runs_the_dummy() -> None:
    assert step_time_s([None, 2.0, 3.0], 1.0) == 3.0
    assert step_time_s([None, 0.5], 1.0) == 1.0
    assert step_time_s([0.5], 1.0) == 0.5
    assert in_step(_it(attention_dp=8))
    assert not in_step(_it(attention_dp=1))
    assert not in_step(_it(model="llama3.1-70b", attention_dp=8))


def test_equal_ranks_in_step_move_as_one_rank_alone() -> None:
    it = _it()
    alone = simulate(it, ENG, WORK, 2, 1e9)
    together = simulate_ranks(it, ENG, WORK, 16, 8, 1e9)
    assert alone is not None and together is not None
    for field in ("ttft_s", "tpot_s", "e2e_s"):
        assert _mean(together, field) == pytest.approx(_mean(alone, field), rel=1e-12)
    assert together.requests_per_s == pytest.approx(alone.requests_per_s, rel=1e-12)


def test_a_lighter_rank_waits_for_the_fullest_under_attention_dp_only() -> None:
    """Nine clients over eight ranks: one rank holds two. In step, the seven one-client ranks
    take the two-client rank's iterations (its two prompts' prefill for their first token, its
    decode batch for every later one); a dense model's DP ranks stay apart."""
    for model, joined in (("deepseek-r1", True), ("llama3.1-70b", False)):
        it = _it(model=model)
        one = simulate(it, ENG, WORK, 1, 1e9)
        two = simulate(it, ENG, WORK, 2, 1e9)
        assert one is not None and two is not None
        assert _mean(one, "tpot_s") < _mean(two, "tpot_s")
        ranks = simulate_ranks(it, ENG, WORK, 9, 8, 1e9)
        assert ranks is not None
        if joined:
            step = simulate_in_step(it, ENG, WORK, [(1, 7), (2, 1)], 1e9)
            assert step is not None
            # Every request's TPOT is the two-client rank's decode: the ranks stay in phase.
            assert np.allclose(step.tpot_s, _mean(two, "tpot_s"), rtol=1e-9)
            assert _mean(ranks, "ttft_s") > 1.5 * _mean(one, "ttft_s")
            assert _mean(ranks, "tpot_s") == pytest.approx(_mean(two, "tpot_s"), rel=1e-9)
        else:
            # Apart: seven one-client ranks and one two-client rank, weighted by requests.
            expect = (7 * _mean(one, "tpot_s") + 2 * _mean(two, "tpot_s")) / 9
            assert _mean(ranks, "tpot_s") == pytest.approx(expect, rel=1e-9)


def test_ranks_without_clients_run_dummies_and_count_in_the_averages() -> None:
    """Four clients over eight ranks in step: four ranks idle on dummies, no slower than a
    one-client rank alone (the dummy is a one-token decode), half the per-rank throughput."""
    it = _it()
    one = simulate(it, ENG, WORK, 1, 1e9)
    ranks = simulate_ranks(it, ENG, WORK, 4, 8, 1e9)
    assert one is not None and ranks is not None
    assert _mean(ranks, "tpot_s") == pytest.approx(_mean(one, "tpot_s"), rel=1e-9)
    assert ranks.requests_per_s == pytest.approx(one.requests_per_s / 2.0, rel=1e-9)
    assert ranks.mean_running == pytest.approx(one.mean_running / 2.0, rel=1e-9)


def test_replicas_of_an_attention_dp_engine_step_apart() -> None:
    """Two engines of DP 4 (8 ranks) with 10 clients: each engine's ranks hold 2, 1, 1, 1, the
    two engines alike, so the result is one engine's, in step."""
    it = _it(attention_dp=4, tp=4)
    both = simulate_ranks(it, ENG, WORK, 10, 8, 1e9)
    one_engine = simulate_in_step(it, ENG, WORK, [(1, 3), (2, 1)], 1e9)
    assert both is not None and one_engine is not None
    for field in ("ttft_s", "tpot_s"):
        assert _mean(both, field) == pytest.approx(_mean(one_engine, field), rel=1e-12)


def test_the_8k_c64_adp_rows_read_the_scripts_budget_without_chunking() -> None:
    """The aggregated TensorRT-LLM DeepSeek 8k/1k C = 64 ADP rows of 2025 ran
    ``dsr1_fp8_h200_trt_slurm.sh``: ``--max_num_tokens=$(( (CONC+ISL+64+63)/64*64 ))`` = 8,320
    (no 8192 floor before 2026-01-28, which would not bind anyway), no
    ``enable_chunked_prefill`` (the LLM API default, False): one 6.6-8.2k prompt per rank and
    iteration."""
    from gpuscale.validation import DATA_DIR
    from gpuscale.validation.serving_fields import measured_day
    from gpuscale.validation.serving_rows import load
    from gpuscale.validation.serving_runs import distinct

    rows = [
        r
        for r in distinct(load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"))
        if r.expressible
        and r.raw["backend"] == "trtllm"
        and r.raw["mode"] == "agg"
        and r.raw["model_path"].startswith("deepseek-ai/")
        and (r.raw["isl"], r.raw["osl"], r.concurrency) == ("8192", "1024", 64)
        and r.kwargs.get("attention_dp", 1) == 8
        and measured_day(r.raw) < "2026-01-01"
    ]
    assert len(rows) == 2
    for r in rows:
        opts = r.kwargs["engine_options"]
        assert opts["max_num_batched_tokens"] == (64 + 8192 + 64 + 63) // 64 * 64 == 8320
        assert "chunked_prefill" not in opts
    assert engine("tensorrt-llm").chunked_prefill is False
