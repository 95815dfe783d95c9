"""The simulator: conservation under failures, queue orders, degradations."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuscale.cluster.simulate import Degradation, Failures, simulate
from gpuscale.cluster.slowdown import SlowdownModel
from gpuscale.cluster.spec import load_cluster
from gpuscale.cluster.trace import Trace, synthetic_philly

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def lab() -> SlowdownModel:
    return SlowdownModel(load_cluster(EXAMPLES / "lab-64.yaml"))


def _trace(submit: list[float], gpus: list[int], work: list[float]) -> Trace:
    return Trace(
        job_id=tuple(str(i) for i in range(len(submit))),
        submit_s=np.asarray(submit, dtype=float),
        gpus=np.asarray(gpus, dtype=np.int64),
        work_s=np.asarray(work, dtype=float),
        model=("",) * len(submit),
    )


@pytest.mark.parametrize("policy", ["first-fit", "random", "topology"])
def test_conservation_under_failures(lab: SlowdownModel, policy: str) -> None:
    trace = synthetic_philly(600, seed=4, load_gpus=50)
    fail = Failures(
        node_mtbf_s=20 * 3600.0, repair_s=3600.0, checkpoint_every_s=1800.0, max_restarts=2
    )
    r = simulate(trace, lab, policy=policy, failures=fail, seed=1)
    assert r.node_failures > 0 and r.restarts > 0
    assert r.jobs_submitted == 600
    assert r.jobs_completed + r.jobs_failed == r.jobs_submitted
    assert r.jobs_failed > 0  # some job met more than two failures
    assert (r.jct_s > 0).all()


def test_too_large_job_is_reported_failed(lab: SlowdownModel) -> None:
    r = simulate(_trace([0, 1], [128, 1], [100, 100]), lab, policy="topology")
    assert (r.jobs_completed, r.jobs_failed) == (1, 1)


def test_a_lone_packed_job_runs_its_trace_duration(lab: SlowdownModel) -> None:
    r = simulate(_trace([0], [8], [1000.0]), lab, policy="first-fit")
    assert r.avg_jct_s == pytest.approx(1000.0)  # node 0 is an A100, the reference type
    assert r.gpu_utilization == pytest.approx(8 / 64)


def test_sjf_beats_fifo_on_a_long_head(lab: SlowdownModel) -> None:
    # a cluster-wide long job holds everything; behind it one long and many short jobs wait
    submit = [0.0, 1.0] + [2.0] * 20
    gpus = [64, 64] + [8] * 20
    work = [1000.0, 5000.0] + [10.0] * 20
    fifo = simulate(_trace(submit, gpus, work), lab, policy="topology", order="fifo")
    sjf = simulate(_trace(submit, gpus, work), lab, policy="topology", order="sjf")
    assert sjf.avg_jct_s < 0.5 * fifo.avg_jct_s


def test_core_degradation_slows_cross_pod_jobs(lab: SlowdownModel) -> None:
    trace = _trace([0.0], [64], [1000.0])  # 64 GPUs: both pods of the lab
    base = simulate(trace, lab, policy="topology")
    slow = simulate(
        trace,
        lab,
        policy="topology",
        degradations=(Degradation(level="core", index=0, factor=0.05, start_s=0.0, end_s=1e9),),
    )
    assert slow.avg_jct_s > base.avg_jct_s


def test_adaptive_jobs_replan_under_a_degraded_core(lab: SlowdownModel) -> None:
    # 64 GPUs: both pods of the lab, so the ring crosses the core; the core drops to 5% for
    # most of the run. gpt3-13b's packed plan (ZeRO-3) suffers; a re-plan recovers most of it.
    trace = Trace(
        job_id=("big",),
        submit_s=np.zeros(1),
        gpus=np.array([64]),
        work_s=np.array([20_000.0]),
        model=("gpt3-13b",),
    )
    worse = (Degradation(level="core", index=0, factor=0.05, start_s=1000.0, end_s=1e7),)
    static = simulate(trace, lab, policy="topology", degradations=worse)
    adaptive = simulate(trace, lab, policy="topology", degradations=worse, adaptive=True)
    assert adaptive.replans == 1 and static.replans == 0
    assert adaptive.avg_jct_s < 0.8 * static.avg_jct_s
