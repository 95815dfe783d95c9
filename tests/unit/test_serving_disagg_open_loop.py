"""The open-loop (Poisson) wait of disaggregated deployments: the aggregated engines' one
finite-run queue (``steady_state.finite_run_wait``) on the stage that binds.

Before, ``predict_disaggregated`` had its own rule: no wait below the capacity and
``N/2 (1/cap - 1/rate)`` past it. Just below the capacity a Poisson stream queued for nothing
(Llama-3.1-70B, one TP2 prefill worker binding at 8192-token prompts: 0 s at 0.99 x capacity,
3.2 s at 1.01 x).
"""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    Stage,
    _iteration_model,
    disaggregated_open_wait,
    kv_pool,
    predict_disaggregated,
)
from gpuscale.planner.serving.steady_state import (
    Workload,
    finite_run_wait,
    load_curve,
    open_loop,
    resolve_capacity,
)

ENG = engine_profile("tensorrt-llm")
FMT = weight_format("fp8")
# Prefill binds: 8192-token prompts on one TP2 prefill worker (one prompt per iteration).
PREFILL_BINDS = (
    Pool(workers=1, par=Parallelism(tp=2, pp=1)),
    Pool(workers=1, par=Parallelism(tp=4, pp=1)),
    Workload(input_len=8192, output_len=256),
)
# Decode binds: short prompts, a decode worker admitting at most 64 running requests.
DECODE_BINDS = (
    Pool(workers=1, par=Parallelism(tp=4, pp=1)),
    Pool(workers=1, par=Parallelism(tp=4, pp=1), max_batch=64),
    Workload(input_len=1024, output_len=1024),
)
FRACTIONS = (0.5, 0.9, 0.99, 1.01, 1.2)


def _predict(case, client: Client):
    p_pool, d_pool, work = case
    spec = catalog.model("llama3.1-70b")
    cluster = catalog.cluster("h200-sxm", p_pool.gpus + d_pool.gpus)
    prof = load_profile_for(ENG.cost_profile, None)
    return predict_disaggregated(spec, cluster, p_pool, d_pool, FMT, "fp8", prof, ENG, work, client)


def _capacity(case) -> float:
    return _predict(case, Client(request_rate=1e6)).requests_per_s


def _binding(pred) -> str:
    (note,) = [n for n in pred.notes if n.startswith("open-loop queue at the")]
    return note.split()[4]


@pytest.mark.parametrize(("case", "stage"), [(PREFILL_BINDS, "prefill"), (DECODE_BINDS, "decode")])
def test_ttft_rises_continuously_through_the_capacity(case, stage: str) -> None:
    cap = _capacity(case)
    preds = [_predict(case, Client(request_rate=f * cap)) for f in FRACTIONS]
    assert {_binding(p) for p in preds} == {stage}
    ttft = [p.ttft_s for p in preds]
    assert all(b > a for a, b in pairwise(ttft))
    # Just below the capacity a Poisson stream already queues (before: exactly zero).
    below = preds[FRACTIONS.index(0.99)]
    assert below.queue_s > 0.0 and not below.saturated
    assert preds[FRACTIONS.index(1.01)].saturated
    # No jump at the capacity: 0.999 x and 1.001 x within 5% of each other.
    near = [_predict(case, Client(request_rate=f * cap)).ttft_s for f in (0.999, 1.001)]
    assert near[1] == pytest.approx(near[0], rel=0.05)


@pytest.mark.parametrize("case", [PREFILL_BINDS, DECODE_BINDS])
def test_past_the_capacity_a_long_run_builds_the_fluid_queue(case) -> None:
    cap = _capacity(case)
    n = 50_000
    rate = 1.2 * cap
    pred = _predict(case, Client(request_rate=rate, num_requests=n))
    fluid = n / 2.0 * (1.0 / cap - 1.0 / rate)
    assert pred.queue_s == pytest.approx(fluid, rel=0.03)
    assert pred.requests_per_s == pytest.approx(cap)


def test_decode_binding_is_the_aggregated_rule_on_the_decode_engine() -> None:
    # The same engine as one stage: the decode rank's own load curve (as predict_disaggregated
    # builds it) under the aggregated open loop gives the same wait.
    p_pool, d_pool, work = DECODE_BINDS
    spec = catalog.model("llama3.1-70b")
    cluster = catalog.cluster("h200-sxm", p_pool.gpus + d_pool.gpus)
    prof = load_profile_for(ENG.cost_profile, None)
    assert d_pool.max_batch is not None
    eng_d = dataclasses.replace(ENG, kv_policy="reserve", max_num_seqs=d_pool.max_batch)
    it_d = _iteration_model(spec, cluster, d_pool.par, FMT, "fp8", prof, ENG)
    kv_d, _, _ = kv_pool(spec, cluster, d_pool.par, FMT, "fp8", prof, ENG, work)
    dwork = Workload(input_len=work.input_len, output_len=work.output_len, prefix_hit=1.0)
    curve = load_curve(it_d, eng_d, dwork, kv_d)
    curve = resolve_capacity(it_d, eng_d, dwork, kv_d, curve)
    cap = _capacity(DECODE_BINDS)
    for f in (0.9, 0.99, 1.2):
        agg = open_loop(curve, f * cap, kv_d, dwork, 1000).queue_s
        dis = _predict(DECODE_BINDS, Client(request_rate=f * cap)).queue_s
        assert agg > 0.0
        assert dis == pytest.approx(agg, rel=0.05)


def test_one_stage_is_the_aggregated_rule_and_the_larger_stage_wait_is_kept() -> None:
    decode = Stage(name="decode", slots=40.0, capacity=10.0)
    wide = Stage(name="prefill", slots=200.0, capacity=50.0)
    for rate in (5.0, 9.9, 12.0):
        alone = finite_run_wait(rate, 40.0, 40.0 / 9.8, 1000)
        wait, stage = disaggregated_open_wait(rate, 9.8, (decode,), 1000)
        assert stage is decode and wait == alone
        # A stage with more room does not change it; the binding one holds its slots
        # slots / (deployment capacity).
        assert disaggregated_open_wait(rate, 9.8, (wide, decode), 1000) == (alone, decode)
    # A single-slot prefill stage near its own capacity queues more than a wide decode stage
    # at the deployment's: the tandem keeps the larger wait.
    narrow = Stage(name="prefill", slots=1.0, capacity=11.0)
    wide_decode = Stage(name="decode", slots=400.0, capacity=10.0)
    wait, stage = disaggregated_open_wait(9.5, 10.0, (narrow, wide_decode), 1000)
    assert stage is wide_decode
    assert wait == finite_run_wait(9.5, 1.0, 1.0 / 11.0, 1000)
    assert wait > finite_run_wait(9.5, 400.0, 40.0, 1000)


@pytest.mark.parametrize("replicas", [1, 2, 4])
def test_aggregated_ranks_each_run_their_share_of_the_requests(replicas: int) -> None:
    # The pooled disaggregated queue and the aggregated per-rank queues build the same
    # fluid queue past the capacity: each aggregated rank runs N / ranks requests (before, every
    # rank replayed all N, so 2 replicas waited twice the fluid figure).
    kw = {"gpu": "h100-sxm", "engine": "vllm", "replicas": replicas, "num_requests": 20_000}
    cap = infer("llama3.1-8b", request_rate=1e5, **kw).to_dict()["options"][0]["requests_per_s"]
    o = infer("llama3.1-8b", request_rate=1.2 * cap, **kw).to_dict()["options"][0]
    fluid = 10_000 * (1.0 / cap - 1.0 / (1.2 * cap))
    assert o["queue_wait_ms"] / 1e3 == pytest.approx(fluid, rel=0.03)
