"""Percentiles of a closed-loop benchmark with a start burst (steady_state.percentiles with a
StartBurst): the same mixture of burst and steady state that the mean TTFT counts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving import deployment
from gpuscale.planner.serving.deployment import _iteration_model, kv_pool
from gpuscale.planner.serving.search import _p99
from gpuscale.planner.serving.steady_state import (
    OperatingPoint,
    StartBurst,
    Workload,
    _point,
    load_curve,
    percentiles,
    weighted_quantiles,
)

KW: dict[str, Any] = {
    "gpu": "h100-sxm",
    "engine": "vllm",
    "input_len": 1024,
    "output_len": 256,
    "input_cv": 0.1,
    "output_cv": 0.1,
}


def _captured(monkeypatch: pytest.MonkeyPatch, conc: int, n: int) -> tuple[dict, Any, Any]:
    """``infer``'s option, and the steady point and burst ``_with_start_burst`` mixed."""
    seen: dict[str, Any] = {}
    original = deployment._with_start_burst

    def capture(point: Any, *args: Any) -> Any:
        mixed, burst = original(point, *args)
        seen["steady"], seen["burst"] = point, burst
        return mixed, burst

    monkeypatch.setattr(deployment, "_with_start_burst", capture)
    opt = infer("llama3.1-8b", concurrency=conc, num_requests=n, **KW).to_dict()["options"][0]
    return opt, seen["steady"], seen["burst"]


def test_p99_reaches_the_burst_at_the_p99_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    # 64 of 640 requests (10 %) are the burst: the top 1 % of the run lies inside it, at its
    # 90th percentile, whatever the steady state does.
    opt, steady, burst = _captured(monkeypatch, 64, 640)
    assert burst is not None and burst.share == pytest.approx(0.1)
    at_rank = weighted_quantiles(burst.ttft_s, burst.weight, np.array([1 - 0.01 / burst.share]))
    assert opt["ttft_ms_p99"] >= 1e3 * float(at_rank[0]) * (1 - 1e-9)
    # the burst waits longer than the steady state: the mixture's p99 is above the steady p99
    alone = percentiles(steady, Workload(**_work()), steady.x * steady.iteration_s)
    assert opt["ttft_ms_p99"] > 1e3 * alone["ttft_p99"]
    assert opt["e2e_s_p99"] >= alone["e2e_p99"]
    # TPOT is the steady state's for every request
    assert opt["tpot_ms_p99"] == pytest.approx(1e3 * alone["tpot_p99"])


def _work() -> dict[str, float]:
    return {
        "input_len": 1024.0,
        "output_len": 256.0,
        "input_cv": KW["input_cv"],
        "output_cv": KW["output_cv"],
    }


def test_mean_is_the_mean_of_the_same_mixture(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fix moves no mean: the mean TTFT is still C/N x burst mean + (1 - C/N) x steady mean.
    opt, steady, burst = _captured(monkeypatch, 32, 320)
    b = float(np.average(burst.ttft_s, weights=burst.weight))
    mixed = burst.share * b + (1 - burst.share) * steady.ttft_s
    assert opt["ttft_ms"] == pytest.approx(1e3 * mixed, rel=1e-12)
    assert opt["e2e_s"] == pytest.approx(steady.e2e_s + mixed - steady.ttft_s, rel=1e-12)


@pytest.mark.parametrize("conc,n", [(4, 40), (64, 640), (16, 16), (8, 8000)])
def test_percentiles_are_monotone(conc: int, n: int) -> None:
    o = infer("llama3.1-8b", concurrency=conc, num_requests=n, **KW).to_dict()["options"][0]
    for key, unit in (("ttft", "ms"), ("tpot", "ms"), ("e2e", "s")):
        p50, p90, p99 = (o[f"{key}_{unit}_p{q}"] for q in (50, 90, 99))
        assert 0 < p50 <= p90 <= p99, (key, p50, p90, p99)


def test_many_rounds_approach_the_steady_state(monkeypatch: pytest.MonkeyPatch) -> None:
    # N >> C: the burst's share vanishes, and so does its mark on every percentile.
    opt, steady, _ = _captured(monkeypatch, 16, 16 * 60_000)
    alone = percentiles(steady, Workload(**_work()), steady.x * steady.iteration_s)
    for key, unit, scale in (("ttft", "ms", 1e3), ("e2e", "s", 1.0), ("tpot", "ms", 1e3)):
        for q in (50, 90, 99):
            got = opt[f"{key}_{unit}_p{q}"]
            assert got == pytest.approx(scale * alone[f"{key}_p{q}"], rel=2e-3), (key, q)
    # and with 10 rounds it has not: the burst is where the tail is
    few, _, _ = _captured(monkeypatch, 16, 160)
    assert few["ttft_ms_p99"] > 1.2 * opt["ttft_ms_p99"]


def _op(ttft: float = 0.1, iteration: float = 0.02) -> OperatingPoint:
    return OperatingPoint(
        x=2.0,
        queue_s=0.0,
        iteration_s=iteration,
        decode_only_s=0.015,
        own_prefill_s=0.03,
        prefill_iterations=1.0,
        running=10.0,
        kv_occupancy=0.2,
        preemptions_per_request=0.0,
        ttft_s=ttft,
        tpot_s=0.02,
        e2e_s=ttft + 99 * 0.02,
        saturated=False,
    )


@settings(max_examples=60, deadline=None)
@given(
    share=st.floats(0.0, 1.0),
    burst=st.lists(st.floats(0.0, 5.0), min_size=1, max_size=80),
    cv=st.sampled_from([0.0, 0.3]),
)
def test_mixture_percentiles_monotone_and_bounded(share: float, burst: list, cv: float) -> None:
    work = Workload(input_len=1024, output_len=100, input_cv=cv, output_cv=cv)
    b = np.array(burst)
    sb = StartBurst(ttft_s=b, weight=np.ones_like(b), share=share)
    pct = percentiles(_op(), work, 0.04, sb)
    steady = percentiles(_op(), work, 0.04)
    for key in ("ttft", "tpot", "e2e"):
        assert pct[f"{key}_p50"] <= pct[f"{key}_p90"] <= pct[f"{key}_p99"]
    # the mixture's TTFT quantiles lie between the two parts' extremes
    lo = min(float(b.min()), steady["ttft_p50"] - 0.02) if share > 0 else steady["ttft_p50"]
    assert pct["ttft_p50"] >= lo - 1e-12
    if share > 0.01 + 1e-9:
        # a burst holding more than 1 % of the requests: p99 at least its quantile at that rank
        rank = np.array([max(1 - 0.01 / share, 0.0)])
        assert pct["ttft_p99"] >= weighted_quantiles(b, np.ones_like(b), rank)[0] - 1e-9
    assert pct["tpot_p99"] == steady["tpot_p99"]


def test_weighted_quantiles_rule() -> None:
    # The inverse of the weighted empirical CDF: a cohort of identical requests gives its own
    # value (as a benchmark's percentile over its requests does), a tie takes the lower value.
    v = np.array([4.0, 1.0, 3.0, 2.0])
    q = weighted_quantiles(v, np.ones(4), np.array([0.0, 0.1, 0.25, 0.5, 0.51, 0.99, 1.0]))
    assert q.tolist() == [1.0, 1.0, 1.0, 2.0, 3.0, 4.0, 4.0]
    # a weight counts as that many copies; zero weights drop out
    a = weighted_quantiles(np.array([1.0, 2.0, 9.0]), np.array([3.0, 1.0, 0.0]), np.array([0.6]))
    b = weighted_quantiles(np.array([1.0, 1.0, 1.0, 2.0]), np.ones(4), np.array([0.6]))
    assert a[0] == b[0] == 1.0
    # 90 % of the requests at 1, a burst of 10 % at 5: p90 is the last steady request, p99 the
    # burst's, and any tiny weight moves a quantile only by its own mass
    c = weighted_quantiles(np.array([1.0, 5.0]), np.array([0.9, 0.1]), np.array([0.9, 0.99]))
    assert c.tolist() == [1.0, 5.0]
    d = weighted_quantiles(np.array([1.0, 3.0, 5.0]), np.array([0.9, 1e-9, 0.1]), np.array([0.99]))
    assert d[0] == 5.0


@pytest.mark.parametrize("eng_name", ["vllm", "sglang", "tensorrt-llm"])
def test_search_p99_is_the_steady_state_p99(eng_name: str) -> None:
    # The SLO search scores a sustained service: its p99 at every load point is the steady
    # state's (fixed lengths, no start burst), the same rule as infer's without a burst.
    eng = engine(eng_name)
    work = Workload(input_len=1024, output_len=256)
    args = (
        catalog.model("llama3.1-8b"),
        catalog.cluster("h100-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    kv, _, _ = kv_pool(*args, work)
    c = load_curve(_iteration_model(*args), eng, work, kv)
    tpot99 = _p99(c.iteration_s, c.decode_only_s, c.own_prefill_s, c.x, 255.0)
    for i in np.flatnonzero(c.feasible)[::7]:
        p = _point(c, float(c.x[i]), 0.0, False, kv, work)
        pct = percentiles(p, work, p.x * p.iteration_s)
        assert pct["ttft_p99"] == pytest.approx(c.ttft_s[i] + 0.49 * c.iteration_s[i], rel=1e-9)
        assert pct["tpot_p99"] == pytest.approx(tpot99[i], rel=1e-9)


def _disagg(conc: int, n: int, cv: float = 0.1) -> dict:
    return infer(
        "llama3.1-70b",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="fp8",
        input_len=4096,
        output_len=256,
        input_cv=cv,
        output_cv=cv,
        concurrency=conc,
        num_requests=n,
        prefill_workers=1,
        prefill_tp=2,
        decode_workers=1,
        decode_tp=4,
    ).to_dict()["options"][0]


def test_disaggregated_p99_carries_the_prefill_burst() -> None:
    # 8 prompts at once on one prefill worker that takes two 4k prompts per iteration: the
    # last pair waits for three iterations before it, and with N = 10 C the p99 falls inside
    # the burst. The closed loop is followed request by request (``disagg_closed_loop``) and
    # the percentiles are its requests', weighted by the measured requests each stands for.
    o = _disagg(8, 80)
    assert any("closed loop followed" in x for x in o["notes"]) and not o["saturated"]
    assert o["ttft_ms_p50"] <= o["ttft_ms_p90"] <= o["ttft_ms_p99"]
    assert o["e2e_s_p50"] <= o["e2e_s_p90"] <= o["e2e_s_p99"]
    assert o["ttft_ms_p50"] < o["ttft_ms"] < o["ttft_ms_p99"] / 2.0
    # N >> C: the burst is a smaller share, of the mean and of the tail
    many = _disagg(8, 8 * 1000)
    assert many["ttft_ms"] < o["ttft_ms"]
    assert many["ttft_ms_p99"] < o["ttft_ms_p99"] / 1.5
