"""Disaggregated serving under a closed loop: the benchmark's start-up burst at the prefill
workers, followed request by request with the rounds after it (planner/serving/
disagg_closed_loop.simulate, read by deployment.predict_disaggregated for every closed loop)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.cohort_sim import BENCHMARK_ROUNDS
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    benchmark_rounds,
    predict_disaggregated,
)
from gpuscale.planner.serving.disagg_closed_loop import PrefillStage, simulate
from gpuscale.planner.serving.steady_state import Workload


def _fixed_loop(
    conc: int,
    ranks: int,
    capacity: float,
    rounds: float = BENCHMARK_ROUNDS,
    per_iteration: int = 1,
    decode_s: float = 1e3,
) -> float:
    """Mean TTFT (s) of a fixed-length closed loop of ``conc`` clients measured over
    ``rounds`` rounds on one prefill worker of ``ranks`` ranks, each prefilling
    ``capacity`` prompts/s in iterations of ``per_iteration`` prompts (a rank's iteration
    lasts its prompts over its capacity), a decode long enough that the prefill keeps up."""
    n = max(round(rounds * conc), 1)
    stage = PrefillStage(
        workers=1,
        ranks=ranks,
        rank_tokens=float(per_iteration),
        rank_prompts=per_iteration,
        iteration_s=lambda tokens: tokens / capacity,
    )
    return simulate(
        concurrency=conc,
        input_lens=np.ones(n),
        output_lens=np.full(n, 101.0),
        prefill=stage,
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=decode_s / 100.0,
    ).mean_ttft_s


def test_hand_computed_burst() -> None:
    # 9 prompts on one rank that prefills 2 requests/s, one an iteration: the burst waits
    # 0, 0.5, ..., 4 s beyond its own 0.5 s (mean 2 s) in one round of 20; the later rounds'
    # prompts come back 0.5 s apart and find the rank free: 0.5 + 2 / 20 s.
    assert BENCHMARK_ROUNDS == 20
    assert _fixed_loop(9, 1, 2.0) == pytest.approx(0.5 + 0.1)
    # 18 prompts over 2 ranks is the same 9 per rank
    assert _fixed_loop(18, 2, 2.0) == pytest.approx(0.5 + 0.1)


@pytest.mark.parametrize("conc", [1, 2, 4])
def test_no_burst_while_every_prompt_has_a_rank(conc: int) -> None:
    assert _fixed_loop(conc, 4, 3.0) == pytest.approx(1.0 / 3.0)


@settings(max_examples=40, deadline=None)
@given(
    conc=st.integers(min_value=1, max_value=300),
    ranks=st.integers(min_value=1, max_value=16),
    cap=st.floats(min_value=0.5, max_value=1e3),
)
def test_burst_grows_with_load_and_shrinks_with_capacity(conc: int, ranks: int, cap: float) -> None:
    b = _fixed_loop(conc, ranks, cap, rounds=5)
    assert b >= 1.0 / cap * (1 - 1e-9)
    assert _fixed_loop(conc + 1, ranks, cap, rounds=5) >= b * (1 - 1e-9)
    assert _fixed_loop(conc, ranks + 1, cap, rounds=5) <= b * (1 + 1e-9)
    assert _fixed_loop(conc, ranks, 2 * cap, rounds=5) <= b * (1 + 1e-9)


def _opt(conc: int, prefill_workers: int = 1) -> dict:
    return infer(
        "llama3.1-70b",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="fp8",
        input_len=4096,
        output_len=256,
        concurrency=conc,
        prefill_workers=prefill_workers,
        prefill_tp=2,
        decode_workers=1,
        decode_tp=4,
    ).to_dict()["options"][0]


def test_deployment_follows_the_burst_and_more_prefill_workers_shorten_it() -> None:
    one = _opt(16)
    assert any("closed loop followed" in n and "fixed lengths" in n for n in one["notes"])
    # a lone request has no burst to wait in: every round is one prefill
    lone = _opt(1)
    assert lone["ttft_ms_p99"] == pytest.approx(lone["ttft_ms"], rel=1e-9)
    # the same burst split over two prefill workers waits less
    assert _opt(16, prefill_workers=2)["ttft_ms"] < one["ttft_ms"]


def test_burst_counts_once_per_round_of_the_client() -> None:
    # sa-bench measures 5 rounds (5*C prompts): the burst is 1/5 of the mean, 4x aiperf's 1/20.
    assert _fixed_loop(9, 1, 2.0, rounds=5) - 0.5 == pytest.approx(2.0 / 5)
    assert _fixed_loop(9, 1, 2.0, rounds=5) - 0.5 == pytest.approx(
        4 * (_fixed_loop(9, 1, 2.0) - 0.5)
    )


def test_rounds_follow_the_client_when_lengths_vary() -> None:
    # A stated count: num_requests / concurrency, fixed lengths or not. Unstated: fixed lengths
    # measure BENCHMARK_ROUNDS rounds (aiperf's 20*C), random lengths 1000 requests.
    fixed = Workload(input_len=1024, output_len=1024)
    varied = Workload(input_len=922, output_len=922, input_cv=0.064, output_cv=0.064)
    assert benchmark_rounds(fixed, Client(concurrency=36, num_requests=180)) == 5
    assert benchmark_rounds(fixed, Client(concurrency=36)) == BENCHMARK_ROUNDS
    assert benchmark_rounds(varied, Client(concurrency=36)) == pytest.approx(1000 / 36)
    assert benchmark_rounds(varied, Client(concurrency=36, num_requests=180)) == 5
    # fewer requests than the concurrency: the burst is all there is
    assert benchmark_rounds(varied, Client(concurrency=36, num_requests=10)) == 1


def _sa_bench(conc: int, num_requests: int, output_len: int = 230) -> float:
    return float(
        infer(
            "llama3.1-70b",
            gpu="h200-sxm",
            engine="tensorrt-llm",
            weights="fp8",
            input_len=3686,
            output_len=output_len,
            input_cv=0.064,
            output_cv=0.064,
            concurrency=conc,
            num_requests=num_requests,
            prefill_workers=1,
            prefill_tp=2,
            decode_workers=1,
            decode_tp=4,
        ).to_dict()["options"][0]["ttft_ms"]
    )


def test_a_short_benchmark_weighs_its_burst_more() -> None:
    # 5 rounds (sa-bench) against 20: the same burst, four times the weight in the mean, where
    # the prefill worker keeps up after it (long outputs: 2,300 tokens a request).
    assert _sa_bench(32, 5 * 32, 2300) > _sa_bench(32, 20 * 32, 2300)


def test_a_saturated_prefill_queues_every_round() -> None:
    # 230-token outputs: the prefill worker is the bottleneck, so from a drained start the
    # queue builds over the rounds to the steady one (C / capacity less the decode); a longer
    # benchmark weighs the steady queue more, not less (closed loop followed request by
    # request, ``disagg_closed_loop``).
    assert _sa_bench(32, 20 * 32) > _sa_bench(32, 5 * 32)


def test_prompts_batched_in_one_iteration_finish_together() -> None:
    # 8 prompts fit one iteration (8192-token budget, 1024-token prompts): all finish at
    # 8 / capacity, 4 s, not on average after 4.5 / capacity as one at a time. With fixed
    # lengths they come back together and are one iteration again every round.
    assert _fixed_loop(8, 1, 2.0, rounds=1, per_iteration=8) == pytest.approx(4.0)
    assert _fixed_loop(8, 1, 2.0, rounds=1) == pytest.approx(4.5 / 2.0)
    assert _fixed_loop(8, 1, 2.0, rounds=5, per_iteration=8) == pytest.approx(4.0)
    # 20 prompts, 8 per iteration: the burst's iterations end at 4, 8, 10 s (capacity 2/s)
    assert _fixed_loop(20, 1, 2.0, rounds=1, per_iteration=8) == pytest.approx(
        (8 * 4 + 8 * 8 + 4 * 10) / 20
    )


@settings(max_examples=40, deadline=None)
@given(
    conc=st.integers(min_value=1, max_value=300),
    ranks=st.integers(min_value=1, max_value=16),
    cap=st.floats(min_value=0.5, max_value=1e3),
    k=st.integers(min_value=1, max_value=16),
)
def test_batching_never_shortens_the_wait(conc: int, ranks: int, cap: float, k: int) -> None:
    # Prompts batched k to an iteration finish when the iteration does: never earlier than
    # one at a time at the same capacity, in the burst or in the rounds after it.
    fifo = _fixed_loop(conc, ranks, cap, rounds=5)
    assert _fixed_loop(conc, ranks, cap, rounds=5, per_iteration=k) >= fifo * (1 - 1e-9)


def _disagg_ttft(overlap: bool | None) -> float:
    eng = dataclasses.replace(engine_profile("tensorrt-llm"), prefill_worker_overlap=overlap)
    spec = catalog.model("llama3.1-70b")
    p_pool = Pool(workers=1, par=Parallelism(tp=2, pp=1))
    d_pool = Pool(workers=1, par=Parallelism(tp=4, pp=1))
    cluster = catalog.cluster("h200-sxm", p_pool.gpus + d_pool.gpus)
    pred = predict_disaggregated(
        spec,
        cluster,
        p_pool,
        d_pool,
        weight_format("fp8"),
        "fp8",
        load_profile_for(eng.cost_profile, None),
        eng,
        Workload(input_len=4096, output_len=256),
        Client(concurrency=1),
    )
    return pred.ttft_s


def test_tensorrt_llm_context_servers_run_without_the_overlap_scheduler() -> None:
    # examples/disaggregated/README.md starts context servers with disable_overlap_scheduler:
    # the profile says so, and a lone prompt does not wait the extra overlap iteration.
    assert engine_profile("tensorrt-llm").prefill_worker_overlap is False
    assert engine_profile("tensorrt-llm").overlap_scheduler is True
    without, default, with_overlap = _disagg_ttft(False), _disagg_ttft(None), _disagg_ttft(True)
    assert without < with_overlap
    # None follows the engine's overlap_scheduler (on for TensorRT-LLM)
    assert default == pytest.approx(with_overlap)
