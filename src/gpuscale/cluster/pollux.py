"""The Pollux OSDI'21 artifact's workloads, run on our simulator at its measured step times.

Pollux (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for Goodput-Optimized Deep
Learning", OSDI 2021, Sec. 5.3) ships eight 160-job workloads (rows: name, submit time,
application, GPUs, batch size) and, per application, step times measured on a 16 x 4-T4 AWS
testbed for every placement of up to 4 servers (``placements.csv``: the placement string has one
digit per server, its GPUs there), step times at 6 to 16 servers (``scalability.csv``), and
training curves per batch size (``validation-<batch>.csv``: progress, gradient statistics).

This module repeats the artifact simulator's arithmetic for rigid jobs, the shape of its
Tiresias+TunedJobs baseline (fixed GPUs and batch size; ``simulator/simulator.py`` and
``simulator/applications.py`` at the commit in ``data/validation/cluster/pollux_artifact/
SOURCES.md``), in our own code:

- per-GPU batch (``Job.update_local_bsz``): local = ceil(B / R); accumulation steps
  a = ceil(local / max_local) - 1, at least 1 on one GPU when B exceeds the smallest validated
  batch; atomic = ceil(local / (a + 1)), capped so R (a + 1) atomic <= the largest validated batch;
- time per step on a placement (``Job.step``): step + a (step - sync), (step, sync) measured for
  that placement at the atomic batch, interpolated in the batch (``get_throughput``);
- work (``Job.step``): the job runs until its progress reaches the last epoch's
  (``get_progress(max_epochs)``, the least over the validated batches); one step adds
  gain = (var + sqr) / (var / s + sqr) progress, s = batch / smallest validated batch, with the
  gradient statistics of the current epoch interpolated between validated batches (the
  statistical efficiency of Pollux Sec. 3.1, Eq. 6 as the simulator applies it);
- 30 s of restart on each (re)allocation (``Job.reallocate``, ``rescale_time = 30``).

A job's trace work is then (steps) x (time per step packed) + 30 s, and its speed on any other
placement is packed / that placement's time per step, so first-fit and topology-aware placement
meet exactly the packed-versus-spread differences the artifact measured.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from gpuscale import files
from gpuscale.cluster.slowdown import Shape
from gpuscale.cluster.spec import ClusterSpec
from gpuscale.cluster.trace import Trace
from gpuscale.errors import InputError, require

GPUS_PER_SERVER = 4
"""The testbed's servers: AWS g4dn.12xlarge, 4 x T4 (artifact ``benchmark/main.tf``)."""
RESTART_S = 30.0
"""Stopped time on every (re)allocation (artifact ``simulator.py``, ``Job.reallocate``)."""
MAX_EPOCHS: dict[str, int] = {
    "bert": 2,
    "cifar10": 100,
    "deepspeech2": 80,
    "imagenet": 90,
    "ncf": 10,
    "yolov3": 50,
}
"""Epochs per application (artifact ``applications.py``, ``APPLICATIONS``)."""
MAX_LOCAL_BATCH: dict[str, int] = {"yolov3": 8}
"""Per-GPU batch caps that override the largest measured one (``APPLICATIONS``: yolov3)."""
JOB_LOADS: tuple[str, ...] = ("0.5", "1.0", "1.5", "2.0")
"""The artifact's relative job loads (``workloads-0.5/`` ... ``workloads-2.0/``; 1.0 is
``workloads/``), Pollux Fig. 8a."""

_Curve = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Per-GPU batch (ascending), step time, sync time."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Application:
    """One application's measured tables."""

    name: str
    max_epochs: int
    min_local_batch: int
    max_local_batch: int
    placements: dict[str, _Curve]
    """Placement string with its digits ascending (node order does not change a step) ->
    measured curve."""
    grid: dict[tuple[int, int], _Curve]
    """(servers, GPUs) -> curve: the placement table averaged over placements of the same
    size (as the artifact does) plus ``scalability.csv`` (6 to 16 servers)."""
    validation: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]
    """Validated batch size -> per epoch (progress, grad_sqr, grad_var)."""

    @property
    def init_batch(self) -> int:
        return min(self.validation)

    @property
    def max_batch(self) -> int:
        return max(self.validation)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobClass:
    """A rigid job of the artifact: application, GPUs and batch size, and what follows."""

    app: str
    gpus: int
    batch: int
    """The workload's batch size."""
    atomic_batch: int
    """Per-GPU batch of one micro-step."""
    accum_steps: int
    steps: float
    """Optimizer steps to reach the last epoch's progress."""

    @property
    def key(self) -> str:
        """The trace's model column for this class."""
        return f"{self.app}:{self.gpus}:{self.batch}"


def _csv(path: Path) -> tuple[list[str], np.ndarray]:
    text = files.read_text(path, label="artifact table", field="data", expected="a CSV table")
    rows = list(csv.reader(io.StringIO(text, newline="")))
    require(len(rows) > 1, f"{path} has no rows", field="data")
    try:
        values = np.array([[float(c) for c in r] for r in rows[1:] if r], dtype=float)
    except ValueError:
        raise InputError(f"{path}: every cell must be a number", field="data") from None
    return [h.strip() for h in rows[0]], values


def _averaged(by_bsz: dict[float, list[tuple[float, float]]]) -> _Curve:
    """A curve over ascending per-GPU batch, (step, sync) averaged where measured twice."""
    b = np.array(sorted(by_bsz))
    mean = np.array([np.mean(by_bsz[x], axis=0) for x in b.tolist()])
    return b, mean[:, 0], mean[:, 1]


def load_application(folder: Path, name: str) -> Application:
    """Read ``folder/<name>/{placements,scalability,validation-*}.csv``."""
    where = folder / name
    head, rows = _csv(where / "placements.csv")
    require(
        head == ["placement", "local_bsz", "step_time", "sync_time"],
        f"{where}/placements.csv: unexpected header {head}",
        field="data",
    )
    keys = ["".join(sorted(str(int(p)))) for p in rows[:, 0]]
    # Orders of the same servers ("1212", "1122") are one placement measured twice: averaged.
    same: dict[str, dict[float, list[tuple[float, float]]]] = {}
    # The artifact's interpolation points: the mean over same-size placements at each batch,
    # then the scalability rows (``get_throughput``: groupby(num_nodes, num_replicas, local_bsz)).
    points: dict[tuple[int, int], dict[float, list[tuple[float, float]]]] = {}
    for k, r in zip(keys, rows, strict=True):
        same.setdefault(k, {}).setdefault(float(r[1]), []).append((r[2], r[3]))
        size = (len(k), sum(int(c) for c in k))
        points.setdefault(size, {}).setdefault(float(r[1]), []).append((r[2], r[3]))
    placements = {k: _averaged(by_bsz) for k, by_bsz in same.items()}
    head, scal = _csv(where / "scalability.csv")
    require(
        head == ["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"],
        f"{where}/scalability.csv: unexpected header {head}",
        field="data",
    )
    for r in scal:
        size = (int(r[0]), int(r[1]))
        points.setdefault(size, {}).setdefault(float(r[2]), []).append((r[3], r[4]))
    grid = {size: _averaged(by_bsz) for size, by_bsz in points.items()}
    validation = {}
    for path in sorted(where.glob("validation-*.csv")):
        head, v = _csv(path)
        col = {h: i for i, h in enumerate(head)}
        validation[int(path.stem.split("-")[-1])] = (
            v[:, col["progress"]],
            v[:, col["grad_sqr"]],
            v[:, col["grad_var"]],
        )
    require(bool(validation), f"{where}: no validation-*.csv", field="data")
    return Application(
        name=name,
        max_epochs=MAX_EPOCHS[name],
        min_local_batch=int(rows[:, 1].min()),
        max_local_batch=MAX_LOCAL_BATCH.get(name, int(rows[:, 1].max())),
        placements=placements,
        grid=grid,
        validation=validation,
    )


@cache
def load_applications(folder: Path) -> dict[str, Application]:
    """Every application of the artifact under ``folder`` (``.../pollux_artifact/traces``)."""
    return {name: load_application(folder, name) for name in MAX_EPOCHS}


def _at(curve: _Curve, bsz: float) -> tuple[float, float]:
    # The artifact interpolates linearly in the batch (interp1d); outside the measured batches
    # it would fail, we hold the nearest measured value.
    b, step, sync = curve
    return float(np.interp(bsz, b, step)), float(np.interp(bsz, b, sync))


def _bracket(values: list[int], x: float) -> tuple[int, int, float]:
    """Neighbours of ``x`` in ascending ``values`` (clamped at the ends) and x's weight on the
    upper one."""
    lo = max((v for v in values if v <= x), default=values[0])
    hi = min((v for v in values if v >= x), default=values[-1])
    return lo, hi, 0.0 if hi == lo else (x - lo) / (hi - lo)


def throughput(app: Application, counts: tuple[int, ...], bsz: float) -> tuple[float, float]:
    """(step time, sync time) in seconds on servers holding ``counts`` GPUs at per-GPU batch
    ``bsz``: the measured placement when the table has it (every placement of up to 4 servers),
    else piecewise-linear over (servers, GPUs, batch) on the averaged grid, servers capped at 16
    as in the artifact (it triangulates the same points, LinearNDInterpolator; a grid
    interpolation of the same points differs from it inside a cell only)."""
    key = "".join(str(c) for c in sorted(c for c in counts if c))
    if key in app.placements:
        return _at(app.placements[key], bsz)
    servers = min(len(key), 16)
    gpus = sum(counts)
    nodes = sorted({s for s, _ in app.grid})
    n0, n1, wn = _bracket(nodes, servers)

    def at_nodes(n: int) -> np.ndarray:
        reps = sorted(r for s, r in app.grid if s == n)
        r0, r1, wr = _bracket(reps, gpus)
        a = np.array(_at(app.grid[n, r0], bsz))
        return a + wr * (np.array(_at(app.grid[n, r1], bsz)) - a)

    low = at_nodes(n0)
    out = low + wn * (at_nodes(n1) - low)
    return float(out[0]), float(out[1])


def packed(gpus: int) -> tuple[int, ...]:
    """The fewest servers: full ones, then the rest (the artifact's reference placement)."""
    full, rest = divmod(gpus, GPUS_PER_SERVER)
    return (GPUS_PER_SERVER,) * full + ((rest,) if rest else ())


def step_time_s(app: Application, job: JobClass, counts: tuple[int, ...]) -> float:
    """Seconds per optimizer step of ``job`` on ``counts``: step + accum x (step - sync)."""
    step, sync = throughput(app, counts, job.atomic_batch)
    return step + job.accum_steps * (step - sync)


def _grad_stats(app: Application, batch: float, epoch: int) -> tuple[float, float]:
    """Gradient (sqr, var) at ``epoch``, linear between the validated batches around
    ``batch`` (``Application.get_grad_stats``)."""
    lo, hi, w = _bracket(sorted(app.validation), batch)
    _, sqr0, var0 = app.validation[lo]
    _, sqr1, var1 = app.validation[hi]
    return (
        float(sqr0[epoch] + w * (sqr1[epoch] - sqr0[epoch])),
        float(var0[epoch] + w * (var1[epoch] - var0[epoch])),
    )


def job_class(app: Application, gpus: int, batch: int) -> JobClass:
    """The rigid job (``app``, ``gpus``, ``batch``): its micro-batching and its steps."""
    require(
        app.min_local_batch * gpus <= app.max_batch,
        f"{app.name}: {gpus} GPUs need a batch of at least {app.min_local_batch * gpus}, "
        f"the largest validated is {app.max_batch}",
        field="workload",
    )
    # Job.update_local_bsz, with the target batch given
    local = math.ceil(batch / gpus - 1e-8)
    accum = math.ceil(local / app.max_local_batch - 1e-8) - 1
    if gpus == 1 and batch > app.init_batch:
        accum = max(1, accum)
    atomic = math.ceil(local / (accum + 1) - 1e-8)
    atomic = min(atomic, int(app.max_batch / (gpus * (accum + 1))))
    real = gpus * atomic * (accum + 1)
    require(
        app.init_batch <= real <= app.max_batch,
        f"{app.name}: batch {real} outside the validated {app.init_batch}..{app.max_batch}",
        field="workload",
    )
    # Job.step: progress per step = gain; progress targets per epoch = least over batches
    target = np.min([v[0][: app.max_epochs] for v in app.validation.values()], axis=0)
    done = np.concatenate([[0.0], target])
    scale = real / app.init_batch
    steps = 0.0
    for epoch in range(app.max_epochs):
        sqr, var = _grad_stats(app, real, epoch)
        gain = (var + sqr) / (var / scale + sqr)
        steps += (done[epoch + 1] - done[epoch]) / gain
    return JobClass(
        app=app.name, gpus=gpus, batch=batch, atomic_batch=atomic, accum_steps=accum, steps=steps
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Workload:
    """One artifact workload as a trace, with its job classes by the trace's model column."""

    name: str
    trace: Trace
    classes: dict[str, JobClass]


def read_workload(path: Path, apps: dict[str, Application]) -> Workload:
    """Read an artifact workload CSV (name,time,application,num_replicas,batch_size)."""
    text = files.read_text(path, label="workload", field="workload", expected="a workload CSV")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    want = {"name", "time", "application", "num_replicas", "batch_size"}
    require(
        bool(rows) and want <= set(rows[0]),
        f"{path}: needs columns {', '.join(sorted(want))}",
        field="workload",
    )
    classes: dict[str, JobClass] = {}
    names: list[str] = []
    submit: list[float] = []
    gpus: list[int] = []
    work: list[float] = []
    models: list[str] = []
    for row_no, row in enumerate(rows, start=2):
        where = f"{path} row {row_no}"
        name = (row["application"] or "").strip()
        if name not in apps:
            raise InputError(
                f"{where}: application '{name}' unknown; accepted: {', '.join(apps)}",
                field="workload",
            )
        try:
            t = float(row["time"])
            n, batch = int(row["num_replicas"]), int(row["batch_size"])
        except (TypeError, ValueError):
            raise InputError(
                f"{where}: time must be seconds and num_replicas, batch_size integers, got "
                f"'{row['time']}', '{row['num_replicas']}', '{row['batch_size']}'",
                field="workload",
            ) from None
        require(
            math.isfinite(t) and t >= 0 and n >= 1 and batch >= 1,
            f"{where}: needs time >= 0, num_replicas >= 1 and batch_size >= 1",
            field="workload",
        )
        key = f"{name}:{n}:{batch}"
        if key not in classes:
            classes[key] = job_class(apps[name], n, batch)
        cls = classes[key]
        names.append(row["name"] or str(row_no - 1))
        submit.append(t)
        gpus.append(n)
        work.append(cls.steps * step_time_s(apps[name], cls, packed(n)) + RESTART_S)
        models.append(key)
    order = np.argsort(np.asarray(submit), kind="stable")
    return Workload(
        name=path.stem,
        trace=Trace(
            job_id=tuple(names[i] for i in order),
            submit_s=np.asarray(submit)[order],
            gpus=np.asarray(gpus, dtype=np.int64)[order],
            work_s=np.asarray(work)[order],
            model=tuple(models[i] for i in order),
        ),
        classes=classes,
    )


def workload_paths(folder: Path, load: str = "1.0") -> list[Path]:
    """The 8 workload CSVs of one relative job load under ``folder`` (``.../pollux_artifact``)."""
    require(load in JOB_LOADS, f"job load must be one of {', '.join(JOB_LOADS)}", field="job_load")
    sub = folder / ("workloads" if load == "1.0" else f"workloads-{load}")
    return sorted(sub.glob("workload-*.csv"), key=lambda p: int(p.stem.split("-")[-1]))


class ArtifactSpeeds:
    """Job speeds from the artifact's measured step times: packed time per step over the time
    per step on the GPUs the job got (a speed model for :func:`gpuscale.cluster.simulate`)."""

    placement_detail = True
    """Shapes must carry the GPUs per server: the tables distinguish 1+3 from 2+2."""
    default_model = ""

    def __init__(
        self, spec: ClusterSpec, apps: dict[str, Application], classes: dict[str, JobClass]
    ) -> None:
        per = {int(t.gpus_per_node) for t in spec.node_types}
        require(
            per == {GPUS_PER_SERVER},
            f"the Pollux tables were measured on {GPUS_PER_SERVER}-GPU servers; cluster "
            f"'{spec.name}' has {sorted(per)} GPUs per node (use examples/pollux-64.yaml)",
            field="cluster",
        )
        self.spec = spec
        self._apps = apps
        self._classes = classes
        self._cache: dict[tuple[str, tuple[int, ...]], float] = {}

    def speed(self, model: str, n: int, shape: Shape) -> float:
        require(bool(shape.counts), "ArtifactSpeeds needs shapes with counts", field="shape")
        require(
            shape.degrade == 1.0,
            "the Pollux tables have no degraded links; simulate them without degradations",
            field="degrade",
        )
        key = (model, shape.counts)
        hit = self._cache.get(key)
        if hit is None:
            cls = self._classes[model]
            app = self._apps[cls.app]
            ref = step_time_s(app, cls, packed(n))
            hit = ref / step_time_s(app, cls, shape.counts)
            self._cache[key] = hit
        return hit

    def replanned_speed(self, model: str, n: int, shape: Shape) -> float:
        """Data-parallel jobs at a fixed batch have one plan: nothing to re-plan to."""
        return self.speed(model, n, shape)
