"""The closed-loop start burst with random lengths (planner/serving/deployment._with_start_burst)."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.cohort_sim import simulate, simulate_ranks
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import Workload

WORK = Workload(input_len=1024, output_len=256)
KW = {"gpu": "h100-sxm", "engine": "vllm", "input_len": 1024, "output_len": 256}


def _ttft(conc: int, n: int, cv: float = 0.05) -> float:
    o = infer("llama3.1-8b", concurrency=conc, num_requests=n, input_cv=cv, output_cv=cv, **KW)
    return float(o.to_dict()["options"][0]["ttft_ms"])


def _it(eng_name: str):
    eng = engine(eng_name)
    it = _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h100-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    return it, eng


def test_burst_only_is_the_first_round_alone() -> None:
    # One request: every round is a lone request on a drained engine, so the first round alone
    # has the full benchmark's TTFT; with C requests the burst is one round of C weights.
    it, eng = _it("vllm")
    one = simulate(it, eng, WORK, 1, max_running=1e9)
    burst1 = simulate_ranks(it, eng, WORK, 1, 1, max_running=1e9, burst_only=True)
    assert one is not None and burst1 is not None
    assert np.average(burst1.ttft_s, weights=burst1.weight) == pytest.approx(
        np.average(one.ttft_s, weights=one.weight)
    )
    burst8 = simulate_ranks(it, eng, WORK, 8, 1, max_running=1e9, burst_only=True)
    assert burst8 is not None and burst8.weight.sum() == pytest.approx(8)
    # eight prompts at once: the mean waits for part of the others' prefill
    assert np.average(burst8.ttft_s, weights=burst8.weight) > np.average(
        burst1.ttft_s, weights=burst1.weight
    )


def test_burst_share_is_c_over_n() -> None:
    # Mean TTFT = C/N x burst + (1 - C/N) x steady: linear in 1/N, so the slope between any two
    # benchmark sizes is the same, and all N = C requests see the burst.
    conc = 16
    t1, t2, t3 = (_ttft(conc, n) for n in (conc * 2, conc * 5, conc * 40))
    s12 = (t1 - t2) / (1 / (conc * 2) - 1 / (conc * 5))
    s23 = (t2 - t3) / (1 / (conc * 5) - 1 / (conc * 40))
    assert s12 == pytest.approx(s23, rel=1e-6)
    assert t1 > t2 > t3  # the burst waits longer than the staggered rounds
    it, eng = _it("vllm")
    fixed_work = Workload(input_len=1024, output_len=256)
    # all-burst benchmark (N = C): the lockstep first round at the mean lengths
    burst = simulate_ranks(it, eng, fixed_work, conc, 1, max_running=1e9, burst_only=True)
    assert burst is not None
    assert _ttft(conc, conc) == pytest.approx(
        1e3 * np.average(burst.ttft_s, weights=burst.weight), rel=1e-6
    )


def _fixed(conc: int, n: int | None) -> dict:
    req = {} if n is None else {"num_requests": n}
    return infer("llama3.1-8b", concurrency=conc, **req, **KW).to_dict()["options"][0]


def test_fixed_lengths_take_the_stated_count() -> None:
    # A fixed-length closed loop is simulated round by round; the client's count sets how many
    # rounds the start burst is averaged over. C = 64 prompts of 1024 tokens take 8 budget
    # iterations, so the burst's TTFT is far above a later round's.
    ttft = [_fixed(64, n * 64)["ttft_ms"] for n in (2, 10, 20, 1000)]
    assert ttft == sorted(ttft, reverse=True) and ttft[0] > 2 * ttft[-1]
    # C = 8 prompts fit one iteration: every round is the burst's, the count changes nothing.
    assert _fixed(8, 80)["ttft_ms"] == pytest.approx(_fixed(8, 8000)["ttft_ms"], rel=1e-9)


def test_fixed_lengths_unstated_count_is_twenty_rounds() -> None:
    # The user default is unchanged: aiperf's 20*C (cohort_sim.BENCHMARK_ROUNDS), echoed.
    unstated, twenty = _fixed(64, None), _fixed(64, 20 * 64)
    assert unstated["ttft_ms"] == twenty["ttft_ms"]
    assert unstated["tpot_ms"] == twenty["tpot_ms"]
    echo = infer("llama3.1-8b", concurrency=64, **KW).to_dict()["client"]
    assert echo["num_requests"] == 20 * 64
    # random lengths and the open loop keep their 1000 requests
    varied = infer("llama3.1-8b", concurrency=64, input_cv=0.1, **KW).to_dict()["client"]
    assert varied["num_requests"] == 1000


@pytest.mark.parametrize("conc", [8, 64, 512])
def test_the_burst_in_the_mean_ttft_is_in_the_throughput_too(conc: int) -> None:
    # Little's law over the run: C clients whose mean E2E holds the first round's burst
    # complete C / E2E requests a second, not the steady state's rate (which leaves it out).
    o = infer(
        "llama3.1-8b", concurrency=conc, num_requests=10 * conc, input_cv=0.1, output_cv=0.1,
        **KW,
    ).to_dict()["options"][0]  # fmt: skip
    assert o["requests_per_s"] <= conc / o["e2e_s"] * (1 + 1e-9)
