"""The staggered steady state's capacity is resolved, not read off its grid of loads.

A closed loop of ``C`` requests with room for ``C`` running requests (``max_num_seqs`` and KV
pages) never queues; past the capacity the queue grows by Little's law, ``dC / capacity``, from
zero; an open loop saturates at the same capacity. Before the capacity was resolved the top
feasible grid point sat up to 15% below it: vLLM Qwen3-32B TP2 at C=64 with ``max_num_seqs=64``
showed a 652 ms queue."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import _iteration_model, kv_pool
from gpuscale.planner.serving.steady_state import (
    CAPACITY_TOL,
    Workload,
    closed_loop,
    kv_capacity_requests,
    load_curve,
    needs_capacity,
    open_loop,
    refine_edge,
    resolve_capacity,
)

WORK = Workload(input_len=1024.0, output_len=512.0, input_cv=0.3, output_cv=0.3)


def _setup(max_num_seqs: int, kv_requests: float | None = None):
    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h100-sxm", 1)
    eng = dataclasses.replace(engine("vllm"), max_num_seqs=max_num_seqs)
    prof = load_profile(eng.cost_profile)
    fmt = weight_format("bf16")
    kv, _, _ = kv_pool(m, cl, Parallelism(), fmt, "bf16", prof, eng, WORK)
    if kv_requests is not None:
        kv = kv * kv_requests / kv_capacity_requests(kv, WORK, eng)
    it = _iteration_model(m, cl, Parallelism(), fmt, "bf16", prof, eng)
    return it, eng, kv


def _point(max_num_seqs: int, conc: float, kv_requests: float | None = None):
    it, eng, kv = _setup(max_num_seqs, kv_requests)
    curve = load_curve(it, eng, WORK, kv)
    if needs_capacity(curve, conc):
        curve = resolve_capacity(it, eng, WORK, kv, curve)
    return closed_loop(curve, conc, kv, WORK)


@pytest.mark.parametrize("cap", [8, 24, 64, 100, 256])
def test_concurrency_at_the_running_cap_never_queues(cap: int) -> None:
    p = _point(cap, float(cap))
    assert not p.saturated and p.queue_s == 0.0
    assert p.running <= cap * (1.0 + 1e-9)


@pytest.mark.parametrize("room", [12.0, 40.0, 90.0])
def test_concurrency_within_the_kv_room_never_queues(room: float) -> None:
    p = _point(1024, room, kv_requests=room)
    assert not p.saturated and p.queue_s == 0.0


def test_queue_starts_at_the_cap_and_grows_by_littles_law() -> None:
    # Below the cap: no queue. Past it the engine runs at its capacity x* and the surplus
    # waits: queue(C) = C / x* - e2e(x*), continuous (zero at the capacity) and rising with
    # slope 1 / x*, with no jump where the grid's top feasible point used to sit.
    cap = 64
    concs = np.linspace(48.0, 80.0, 129)
    pts = [_point(cap, float(c)) for c in concs]
    queue = np.array([p.queue_s for p in pts])
    ttft = np.array([p.ttft_s for p in pts])
    assert (queue[concs <= cap] == 0.0).all()
    assert all(b >= a for a, b in pairwise(ttft))
    sat = [p for p in pts if p.saturated]
    x_star = sat[0].x
    assert all(p.x == pytest.approx(x_star) for p in sat)
    for (c0, p0), (c1, p1) in pairwise(zip(concs, pts, strict=True)):
        if p0.saturated and p1.saturated:
            assert p1.queue_s - p0.queue_s == pytest.approx((c1 - c0) / x_star, rel=1e-6)
    # Continuous at the capacity: the first queued point waits no more than its surplus of
    # requests over the last unqueued one takes to drain at x*.
    first = int(np.flatnonzero(queue > 0)[0])
    assert queue[first] <= (concs[first] - concs[first - 1]) / x_star * (1.0 + 1e-6)


def test_open_loop_saturates_at_the_resolved_capacity() -> None:
    it, eng, kv = _setup(64)
    coarse = load_curve(it, eng, WORK, kv)
    assert needs_capacity(coarse, rate=1.0)
    curve = resolve_capacity(it, eng, WORK, kv, coarse)
    cap = closed_loop(curve, 10_000.0, kv, WORK).x
    top_coarse = float(coarse.x[np.flatnonzero(coarse.feasible)[-1]])
    # The coarse grid's top feasible load is below the capacity: a rate between the two is
    # served, not saturated, and one past the capacity runs at it (the same x as a saturated
    # closed loop).
    assert top_coarse < cap * (1.0 - 1e-3)
    between = open_loop(curve, (top_coarse + cap) / 2.0, kv, WORK, 1000)
    assert not between.saturated and between.x == pytest.approx((top_coarse + cap) / 2.0)
    past = open_loop(curve, cap * 1.01, kv, WORK, 1000)
    assert past.saturated and past.x == pytest.approx(cap, rel=1e-12)
    # At the capacity the running requests fill the cap.
    assert past.running == pytest.approx(64.0, rel=1e-5)


def test_refine_edge_brackets_the_edge_to_the_tolerance() -> None:
    edge = 1.234567
    grid = np.geomspace(0.01, 10.0, 50)
    extra = refine_edge(grid, grid <= edge, lambda g: g <= edge)
    merged = np.unique(np.concatenate([grid, extra]))
    top = merged[merged <= edge].max()
    nxt = merged[merged > edge].min()
    assert edge - top <= CAPACITY_TOL * nxt and nxt - edge <= CAPACITY_TOL * nxt
    assert refine_edge(grid, grid <= 100.0, lambda g: g <= 100.0).size == 0  # edge past the grid


def test_api_running_cap_equal_to_concurrency_adds_no_queue() -> None:
    kw = {
        "gpu": "h200-sxm",
        "engine": "vllm",
        "tp": 2,
        "concurrency": 64,
        "input_cv": 0.3,
        "output_cv": 0.3,
    }
    at_cap = infer("qwen3-32b", engine_options={"max_num_seqs": 64}, **kw).to_dict()["options"][0]
    roomy = infer("qwen3-32b", engine_options={"max_num_seqs": 256}, **kw).to_dict()["options"][0]
    assert at_cap["queue_wait_ms"] == 0.0 and not at_cap["saturated"]
    # The same operating point; the resolved curve interpolates more finely near the cap.
    assert at_cap["ttft_ms"] == pytest.approx(roomy["ttft_ms"], rel=1e-4)
