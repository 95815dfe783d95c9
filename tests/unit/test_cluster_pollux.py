"""The Pollux artifact loader and the las (Tiresias) queue order."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cluster import pollux
from gpuscale.cluster.simulate import Failures, simulate
from gpuscale.cluster.slowdown import Shape
from gpuscale.cluster.spec import ClusterSpec, load_cluster
from gpuscale.cluster.trace import Trace
from gpuscale.errors import InputError
from tests.conftest import validation_data

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def artifact() -> Path:
    return validation_data() / "cluster" / "pollux_artifact"


@pytest.fixture(scope="module")
def apps(artifact: Path) -> dict[str, pollux.Application]:
    return pollux.load_applications(artifact / "traces")


@pytest.fixture(scope="module")
def testbed() -> ClusterSpec:
    return load_cluster(EXAMPLES / "pollux-64.yaml")


@pytest.mark.parametrize("load", pollux.JOB_LOADS)
def test_every_shipped_workload_loads(
    artifact: Path, apps: dict[str, pollux.Application], load: str
) -> None:
    paths = pollux.workload_paths(artifact, load)
    assert [p.stem for p in paths] == [f"workload-{i}" for i in range(1, 9)]
    jobs = round(160 * float(load))
    for path in paths:
        w = pollux.read_workload(path, apps)
        assert len(w.trace) == jobs
        assert (np.diff(w.trace.submit_s) >= 0).all()
        assert (w.trace.work_s > pollux.RESTART_S).all()
        assert set(w.trace.model) == set(w.classes)


def test_every_placement_of_up_to_four_servers_is_measured(
    apps: dict[str, pollux.Application],
) -> None:
    # the loader looks placements up with their digits sorted; every such string must exist
    for app in apps.values():
        for servers in range(1, 5):
            for counts in itertools.combinations_with_replacement(range(1, 5), servers):
                assert "".join(map(str, counts)) in app.placements, (app.name, counts)


# Completion times of one job alone on a fixed placement, computed by the artifact's own
# simulator (simulator.py Job.reallocate + Job.step in 60 s ticks, commit c793c708) for job
# classes of workload-6: (application, GPUs, batch, GPUs per server) -> seconds.
ARTIFACT_JCT_S = {
    ("imagenet", 24, 3200, (4,) * 6): 31835,
    ("imagenet", 24, 3200, (2,) * 12): 30361,
    ("imagenet", 48, 6400, (3,) * 16): 18862,
    ("bert", 8, 384, (4, 4)): 2489,
    ("bert", 8, 384, (1,) * 8): 2024,
    ("bert", 16, 384, (4,) * 4): 1354,
    ("yolov3", 4, 64, (4,)): 14132,
    ("yolov3", 4, 64, (1, 1, 1, 1)): 17364,
    ("deepspeech2", 8, 320, (4, 4)): 3560,
    ("deepspeech2", 8, 320, (1,) * 8): 3000,
    ("cifar10", 6, 2048, (4, 2)): 940,
    ("ncf", 1, 32768, (1,)): 77,
}


@pytest.mark.parametrize("case", list(ARTIFACT_JCT_S))
def test_a_lone_job_takes_what_the_artifacts_simulator_says(
    apps: dict[str, pollux.Application], case: tuple[str, int, int, tuple[int, ...]]
) -> None:
    name, gpus, batch, counts = case
    cls = pollux.job_class(apps[name], gpus, batch)
    jct = cls.steps * pollux.step_time_s(apps[name], cls, counts) + pollux.RESTART_S
    # the artifact rounds every epoch to whole seconds (cifar10: 100 epochs of ~9 s)
    assert jct == pytest.approx(ARTIFACT_JCT_S[case], rel=0.02)


def test_conservation_on_a_workload_with_failures_and_preemption(
    artifact: Path, apps: dict[str, pollux.Application], testbed: ClusterSpec
) -> None:
    w = pollux.read_workload(artifact / "workloads" / "workload-6.csv", apps)
    model = pollux.ArtifactSpeeds(testbed, apps, w.classes)
    fail = Failures(node_mtbf_s=24 * 3600.0, repair_s=1800.0, max_restarts=1)
    for order in ("fifo", "las"):
        r = simulate(w.trace, model, policy="first-fit", order=order, failures=fail, seed=2)
        assert r.node_failures > 0
        assert r.jobs_submitted == 160
        assert r.jobs_completed + r.jobs_failed == 160
        assert (r.jct_s > 0).all()
    clean = simulate(w.trace, model, policy="topology", order="las")
    assert (clean.jobs_completed, clean.jobs_failed, clean.node_failures) == (160, 0, 0)


class _Unit:
    """A speed model where every placement runs at trace speed."""

    placement_detail = False
    default_model = ""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec

    def speed(self, model: str, n: int, shape: Shape) -> float:
        return 1.0

    def replanned_speed(self, model: str, n: int, shape: Shape) -> float:
        return 1.0


def _trace(submit: list[float], gpus: list[int], work: list[float]) -> Trace:
    return Trace(
        job_id=tuple(str(i) for i in range(len(submit))),
        submit_s=np.asarray(submit, dtype=float),
        gpus=np.asarray(gpus, dtype=np.int64),
        work_s=np.asarray(work, dtype=float),
        model=("",) * len(submit),
    )


def test_las_preempts_a_demoted_long_job_for_a_new_one(testbed: ClusterSpec) -> None:
    # a 64-GPU job of 100 h is past 16 GPU-hours after 15 minutes and drops to queue 1; a 64-GPU
    # job of 10 minutes arrives at 2 h: las stops the long one, runs the short one (done before
    # its own 15 minutes), then resumes the long one, which pays one restart
    trace = _trace([0.0, 7200.0], [64, 64], [100 * 3600.0, 600.0])
    unit = _Unit(testbed)
    fifo = simulate(trace, unit, policy="topology", order="fifo")
    las = simulate(trace, unit, policy="topology", order="las", preempt_restart_s=30.0)
    assert fifo.jct_s.tolist() == pytest.approx([100 * 3600.0, 98 * 3600.0 + 600.0])
    assert las.jct_s.tolist() == pytest.approx([100 * 3600.0 + 600.0 + 30.0, 600.0])


def test_las_orders_queue_one_by_demotion(testbed: ClusterSpec) -> None:
    # as the artifact's tiresias.py: a job demoted later queues behind one demoted earlier, so
    # the new job, once past its own 15 minutes, yields to the first one again
    trace = _trace([0.0, 7200.0], [64, 64], [100 * 3600.0, 3600.0])
    las = simulate(trace, _Unit(testbed), policy="topology", order="las", preempt_restart_s=0.0)
    assert las.jct_s.tolist() == pytest.approx([100 * 3600.0 + 900.0, 99 * 3600.0])


def test_las_keeps_queue_zero_first_and_skips_what_does_not_fit(testbed: ClusterSpec) -> None:
    # 48 GPUs busy (for less than its 16 GPU-hours: 1,200 s); a 32-GPU job cannot start, a
    # 16-GPU job behind it can (no head-of-line wait)
    trace = _trace([0.0, 1.0, 2.0], [48, 32, 16], [1000.0, 600.0, 600.0])
    r = simulate(trace, _Unit(testbed), policy="topology", order="las")
    assert r.jct_s[2] == pytest.approx(600.0)
    assert r.jct_s[1] == pytest.approx(1000.0 - 1.0 + 600.0)
    fifo = simulate(trace, _Unit(testbed), policy="topology", order="fifo")
    assert fifo.jct_s[2] == pytest.approx(1000.0 - 2.0 + 600.0)


def test_bad_inputs_are_one_line_errors(
    artifact: Path, apps: dict[str, pollux.Application], tmp_path: Path
) -> None:
    bad = tmp_path / "w.csv"
    bad.write_text("name,time,application,num_replicas,batch_size\nx-0,0,gpt5,4,64\n")
    with pytest.raises(InputError, match="application 'gpt5' unknown; accepted: bert"):
        pollux.read_workload(bad, apps)
    bad.write_text("name,time,app\nx,0,bert\n")
    with pytest.raises(InputError, match="needs columns"):
        pollux.read_workload(bad, apps)
    with pytest.raises(InputError, match="4-GPU servers"):
        pollux.ArtifactSpeeds(load_cluster(EXAMPLES / "lab-64.yaml"), apps, {})
    with pytest.raises(InputError, match="job load must be one of"):
        pollux.workload_paths(artifact, "3.0")
    with pytest.raises(InputError, match="largest validated"):
        pollux.job_class(apps["bert"], 128, 384)


def test_an_interval_scheduler_starts_jobs_on_its_ticks(testbed: ClusterSpec) -> None:
    # decisions every 60 s from t = 0: a job submitted at 10 s starts at 60 s; one submitted
    # at 130 s behind the full cluster waits for the first tick after the other ends (860 s)
    trace = _trace([10.0, 130.0], [64, 8], [800.0, 100.0])
    r = simulate(trace, _Unit(testbed), policy="topology", order="las", schedule_every_s=60.0)
    assert r.queue_s.tolist() == pytest.approx([50.0, 900.0 - 130.0])
    assert r.jct_s.tolist() == pytest.approx([50.0 + 800.0, 900.0 - 130.0 + 100.0])
    with pytest.raises(InputError, match="schedule interval must be >= 0"):
        simulate(trace, _Unit(testbed), policy="topology", schedule_every_s=-1.0)


_CELL = st.one_of(
    st.integers(-5, 300).map(str),
    st.sampled_from(["", "x", "1.5", "nan", "1e9", "384", "4096"]),
)
_ROW = st.tuples(
    st.one_of(st.floats(-10, 1e6).map(repr), st.sampled_from(["nan", "inf", "", "t"])),
    st.sampled_from([*pollux.MAX_EPOCHS, "gpt", ""]),
    _CELL,
    _CELL,
)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_ROW, min_size=1, max_size=6))
def test_any_workload_file_loads_or_is_one_clear_error(
    apps: dict[str, pollux.Application], rows: list[tuple[str, str, str, str]]
) -> None:
    body = "".join(f"j{i},{t},{a},{g},{b}\n" for i, (t, a, g, b) in enumerate(rows))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.csv"
        path.write_text("name,time,application,num_replicas,batch_size\n" + body)
        try:
            w = pollux.read_workload(path, apps)
        except InputError as e:
            assert "\n" not in str(e)
            return
    assert len(w.trace) == len(rows)
    assert (np.diff(w.trace.submit_s) >= 0).all()
    assert np.isfinite(w.trace.work_s).all() and (w.trace.work_s > pollux.RESTART_S).all()
