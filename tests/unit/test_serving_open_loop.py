"""The open-loop (Poisson) admission wait: one exact finite-run FIFO model at every rate.

Before, the wait jumped at the capacity: the Sakasegawa M/D/c approximation with rho capped at
0.999 gave ~70 s at 0.999 x capacity, while the finite-run formula ``N/2 (1/cap - 1/rate)``
gave ~0.7 s at 1.01 x. A benchmark of N requests never waits longer than N arrivals can build.
"""

from __future__ import annotations

import heapq
from itertools import pairwise

import numpy as np
import pytest

from gpuscale.api import infer
from gpuscale.planner.serving.steady_state import (
    Workload,
    _fifo_wait,
    _unit_arrivals,
    closed_loop,
    finite_run_wait,
    load_curve,
    needs_capacity,
    open_loop,
    resolve_capacity,
)
from tests.unit.test_serving_capacity import _setup

WORK = Workload(input_len=1024.0, output_len=512.0, input_cv=0.3, output_cv=0.3)


def _naive_wait(arrivals: np.ndarray, servers: int, service_s: float) -> float:
    """Event by event: each arrival, in order, takes the server that frees first."""
    free = [0.0] * servers
    total = 0.0
    for a in arrivals:
        start = max(a, heapq.heappop(free))
        heapq.heappush(free, start + service_s)
        total += start - a
    return total / len(arrivals)


@pytest.mark.parametrize("servers", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("load", [0.5, 0.95, 1.3])
def test_recursion_matches_an_event_by_event_simulation(servers: int, load: float) -> None:
    rng = np.random.default_rng(servers)
    service = 2.5
    arrivals = np.cumsum(rng.exponential(service / (load * servers), size=(3, 37)), axis=1)
    exact = np.mean([_naive_wait(row, servers, service) for row in arrivals])
    assert _fifo_wait(arrivals, servers, service) == pytest.approx(exact, rel=1e-12, abs=1e-12)


def test_fractional_slots_lie_between_floor_and_ceiling() -> None:
    lo, hi = (finite_run_wait(3.0, c, 2.0, 500) for c in (6.0, 7.0))
    mid = finite_run_wait(3.0, 6.25, 2.0, 500)
    assert hi < lo and mid == pytest.approx(0.75 * lo + 0.25 * hi)


def test_fixed_arrivals_make_the_wait_deterministic() -> None:
    assert finite_run_wait(3.1, 7.3, 2.0, 800) == finite_run_wait(3.1, 7.3, 2.0, 800)
    assert not _unit_arrivals(800).flags.writeable


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7])
def test_one_slot_is_the_exact_md1_wait(rho: float) -> None:
    # Pollaczek-Khinchine for M/D/1: W = rho S / (2 (1 - rho)).
    service = 1.7
    w = finite_run_wait(rho / service, 1.0, service, 100_000)
    assert w == pytest.approx(rho * service / (2.0 * (1.0 - rho)), rel=0.03)


@pytest.mark.parametrize("servers", [2, 4, 16, 64])
@pytest.mark.parametrize("rho", [0.5, 0.7])
def test_low_load_agrees_with_the_md_c_approximation(servers: int, rho: float) -> None:
    # Sakasegawa (1977): W ~ rho^(sqrt(2(c+1)) - 1) / (c (1 - rho)) * S / 2 for M/D/c; it
    # overstates small waits of many servers, so it is held to 15% or 1% of the service time.
    service = 1.0
    w = finite_run_wait(rho * servers / service, servers, service, 100_000)
    approx = rho ** (np.sqrt(2.0 * (servers + 1.0)) - 1.0) / (servers * (1.0 - rho)) * service / 2
    assert abs(w - approx) <= 0.15 * approx + 0.01 * service


@pytest.mark.parametrize("servers", [1.0, 8.0, 30.5])
@pytest.mark.parametrize("over", [1.1, 1.5])
def test_past_capacity_a_long_run_waits_half_its_build_up(servers: float, over: float) -> None:
    service, n = 4.0, 20_000
    cap = servers / service
    w = finite_run_wait(over * cap, servers, service, n)
    assert w == pytest.approx(n / 2.0 * (1.0 / cap - 1.0 / (over * cap)), rel=0.03)


def test_wait_rises_with_the_rate_through_the_capacity() -> None:
    rates = np.linspace(0.2, 1.6, 71)
    waits = [finite_run_wait(r, 7.4, 7.4, 1000) for r in rates]
    assert all(b >= a for a, b in pairwise(waits))
    assert waits[0] < 1e-3 and waits[-1] > 100.0


def _curve():
    it, eng, kv = _setup(64)
    coarse = load_curve(it, eng, WORK, kv)
    assert needs_capacity(coarse, rate=1.0)
    curve = resolve_capacity(it, eng, WORK, kv, coarse)
    return curve, kv, closed_loop(curve, 10_000.0, kv, WORK).x


def test_open_loop_is_continuous_and_rising_across_the_capacity() -> None:
    curve, kv, cap = _curve()
    fractions = [0.5, 0.9, 0.97, 0.99, 0.995, 0.999, 1.0, 1.001, 1.005, 1.01, 1.03, 1.2]
    pts = [open_loop(curve, f * cap, kv, WORK, 1000) for f in fractions]
    waits = [p.queue_s for p in pts]
    ttft = [p.ttft_s for p in pts]
    assert all(b >= a for a, b in pairwise(waits))
    assert all(b >= a * (1.0 - 1e-9) for a, b in pairwise(ttft))
    # No jump: 0.99, 1.0 and 1.01 x capacity wait within a small factor of one another, and
    # the wait just below the capacity is close to the wait just above it.
    w99, w100, w101 = (waits[fractions.index(f)] for f in (0.99, 1.0, 1.01))
    assert 0.0 < w99 <= w100 <= w101 <= 3.0 * w99
    below, above = waits[fractions.index(0.999)], waits[fractions.index(1.001)]
    assert above <= 1.1 * below
    # Light load barely waits; past the capacity the engine serves the capacity.
    assert waits[0] < 1e-3 * pts[0].e2e_s
    assert [p.saturated for p in pts] == [f >= 1.0 for f in fractions]
    assert pts[-1].x == pytest.approx(cap, rel=1e-12)


def test_open_loop_wait_is_bounded_by_what_the_run_builds() -> None:
    curve, kv, cap = _curve()
    for n in (200, 1000, 5000):
        p = open_loop(curve, 0.999 * cap, kv, WORK, n)
        # Below the capacity the queue grows no faster than the surplus of a run at the
        # capacity's rate plus its Poisson spread over the whole run (sqrt(N) arrivals).
        assert p.queue_s <= np.sqrt(n) / cap
    waits = [open_loop(curve, 1.2 * cap, kv, WORK, n).queue_s for n in (500, 2000, 8000)]
    bound = [n / 2.0 * (1.0 / cap - 1.0 / (1.2 * cap)) for n in (500, 2000, 8000)]
    # Past it, the fluid build-up plus the same Poisson spread (the slots the run starts with
    # take a little off; the spread adds its running maximum).
    assert all(
        w <= b + np.sqrt(n) / cap for w, b, n in zip(waits, bound, (500, 2000, 8000), strict=True)
    )
    assert waits[-1] == pytest.approx(bound[-1], rel=0.05)


def test_open_loop_through_the_api_rises_with_the_rate() -> None:
    kw = {"gpu": "h100-sxm", "engine": "vllm"}
    cap = infer("llama3.1-8b", request_rate=1e5, **kw).to_dict()["options"][0]["requests_per_s"]
    opts = [
        infer("llama3.1-8b", request_rate=f * cap, **kw).to_dict()["options"][0]
        for f in (0.5, 0.99, 1.01, 1.2)
    ]
    waits = [o["queue_wait_ms"] for o in opts]
    assert all(b >= a for a, b in pairwise(waits))
    assert waits[2] <= 3.0 * max(waits[1], 1.0)  # no jump at the capacity
