"""The start burst the steady state falls back to when a fixed-length load leaves the cohort
simulation (planner/serving/cohort_sim.MAX_COHORTS, deployment._with_start_burst)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving import cohort_sim
from gpuscale.planner.serving.cohort_sim import simulate, simulate_ranks
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import Workload

# One 2,000-token prompt per prefill batch (SGLang 0.5.x: --max-prefill-tokens 3500 lets a second
# one start only below the 1,500 left), so a burst of C splits into C cohorts.
OPTS = {"mixed_chunk": True, "max_prefill_tokens": 3500}
WORK = Workload(input_len=2000, output_len=500)
CONC = cohort_sim.MAX_COHORTS + 64


def _eng_it():
    eng = dataclasses.replace(engine("sglang"), prefill_policy="mixed", max_prefill_tokens=3500)
    it = _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h200-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    return eng, it


def test_full_run_gives_up_but_the_burst_does_not() -> None:
    eng, it = _eng_it()
    assert simulate(it, eng, WORK, CONC, max_running=1e9) is None
    burst = simulate_ranks(it, eng, WORK, CONC, 1, max_running=1e9, burst_only=True)
    assert burst is not None
    assert burst.weight.sum() == CONC
    # one prompt per batch: CONC distinct first-token times, the mean about half of the last
    ttft = burst.ttft_s
    assert len(np.unique(np.round(ttft, 9))) == CONC
    assert np.average(ttft, weights=burst.weight) > 0.4 * ttft.max()


def test_fallback_mean_carries_the_burst() -> None:
    # Past the cohort limit the steady state answers with the first round's burst folded in:
    # C/N of the requests wait for up to C sequential prefill batches, so the mean TTFT is at
    # least C/N of the burst's mean (it was the bare steady state before).
    eng, it = _eng_it()
    burst = simulate_ranks(it, eng, WORK, CONC, 1, max_running=1e9, burst_only=True)
    assert burst is not None
    burst_mean = float(np.average(burst.ttft_s, weights=burst.weight))
    kw = {"gpu": "h200-sxm", "engine": "sglang", "input_len": 2000, "output_len": 500}
    o = infer("llama3.1-8b", concurrency=CONC, engine_options=OPTS, **kw).to_dict()["options"][0]
    share = 1.0 / cohort_sim.BENCHMARK_ROUNDS
    assert o["ttft_ms"] * 1e-3 >= share * burst_mean
