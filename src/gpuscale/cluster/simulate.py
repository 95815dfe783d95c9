"""Discrete-event simulation of a trace on a cluster: arrivals, a queue (FIFO or shortest job
first, no backfilling: the head waits until it fits; or Tiresias' preemptive two-queue least
attained service), placement, runs at the cost model's speed on the allocation, completions,
node failures (restart from the last checkpoint) and link degradations.

Conservation: every submitted job ends completed or failed (a job larger than the cluster, or
one that failed more than ``max_restarts`` times); nothing is dropped.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpuscale.cluster.choices import ORDERS as ORDERS
from gpuscale.cluster.placement import Allocation, ClusterState, make_policy
from gpuscale.cluster.slowdown import SpeedModel
from gpuscale.cluster.spec import NETWORK_LEVELS
from gpuscale.cluster.trace import Trace
from gpuscale.errors import InputError, require

LAS_THRESHOLD_GPU_S = 16 * 3600.0
"""Queue-0 limit of attained service: 16 GPU-hours (Pollux artifact ``tiresias.py``,
``_queue_threshold = 3600 * 16`` in GPU-seconds)."""

_ARRIVE, _DONE, _FAIL, _REPAIR, _DEGRADE_ON, _DEGRADE_OFF, _DEMOTE, _TICK = range(8)


MIN_NODE_MTBF_S = 3600.0
"""Shortest mean time between failures of one node: an hour (real nodes run thousands of hours
between failures; Llama 3's run saw about one interruption per 2,000 GPU-days)."""
MAX_REPAIR_S = 365 * 24 * 3600.0
"""Longest repair: a year (a node out for longer is a node removed from the cluster file)."""
MAX_RESTARTS = 1000


@dataclass(frozen=True, kw_only=True, slots=True)
class Failures:
    """Node failures: exponential times between failures per node (the usual reliability model;
    Meta's Llama 3 run saw 419 unexpected interruptions in 54 days on 16,384 GPUs, i.e. about one
    per 2,000 GPU-days: Llama Team, "The Llama 3 Herd of Models", 2024, Sec. 3.3.4)."""

    node_mtbf_s: float
    repair_s: float = 4 * 3600.0
    checkpoint_every_s: float = 3600.0
    """Run time between checkpoints; a failure loses the work since the last one."""
    restart_s: float = 300.0
    """Time to reload the checkpoint and rejoin, charged as extra run time."""
    max_restarts: int = 10

    def __post_init__(self) -> None:
        # Bounded so that a run always ends: every failure is an event, and a node failing more
        # than hourly, a repair longer than a year or a job restarted a thousand times only
        # multiplies events (an MTBF of 1e-6 h or a repair of 1e9 h ran for hours).
        require(
            MIN_NODE_MTBF_S <= self.node_mtbf_s < math.inf,
            f"--node-mtbf-h must be a number >= {MIN_NODE_MTBF_S / 3600:g}, "
            f"got {self.node_mtbf_s / 3600:g}",
            field="node_mtbf_h",
        )
        require(
            0 <= self.repair_s <= MAX_REPAIR_S,
            f"--repair-h must be from 0 to {MAX_REPAIR_S / 3600:g}, got {self.repair_s / 3600:g}",
            field="repair_h",
        )
        require(
            0 < self.checkpoint_every_s < math.inf,
            "--checkpoint-min must be a number > 0",
            field="checkpoint_min",
        )
        require(
            0 <= self.max_restarts <= MAX_RESTARTS,
            f"--max-restarts must be from 0 to {MAX_RESTARTS}, got {self.max_restarts}",
            field="max_restarts",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Degradation:
    """A switch level's links run at ``factor`` of their rate from ``start_s`` to ``end_s``;
    ``index`` names the leaf or pod (ignored for the core)."""

    level: str
    index: int
    factor: float
    start_s: float
    end_s: float

    def __post_init__(self) -> None:
        require(
            self.level in NETWORK_LEVELS,
            f"degradation level '{self.level}' unknown; accepted: {', '.join(NETWORK_LEVELS)}",
            field="degrade",
        )
        require(0 < self.factor <= 1, "degradation factor must be in (0, 1]", field="degrade")
        require(
            self.end_s > self.start_s >= 0, "degradation needs 0 <= start < end", field="degrade"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class SimResult:
    policy: str
    order: str
    jobs_submitted: int
    jobs_completed: int
    jobs_failed: int
    avg_jct_s: float
    p95_jct_s: float
    avg_queue_s: float
    p95_queue_s: float
    makespan_s: float
    gpu_utilization: float
    """Allocated GPU-seconds over (GPUs x makespan)."""
    throughput_gpus: float
    """Aggregate training throughput: completed work, in reference-GPU-seconds at packed speed,
    per second of makespan (the packed-equivalent GPUs kept busy on useful work)."""
    mean_speed: float
    """GPU-time-weighted speed of every run relative to packed (1.0 = as fast as packed)."""
    fragmentation: float
    """Time average of the share of free GPUs that sit on partly used nodes."""
    restarts: int
    node_failures: int
    replans: int
    """Plan changes of adaptive jobs (each paid a restart)."""
    jct_s: np.ndarray = field(repr=False)
    queue_s: np.ndarray = field(repr=False)

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "policy": self.policy,
            "order": self.order,
            "jobs_submitted": self.jobs_submitted,
            "jobs_completed": self.jobs_completed,
            "jobs_failed": self.jobs_failed,
            "avg_jct_s": self.avg_jct_s,
            "p95_jct_s": self.p95_jct_s,
            "avg_queue_s": self.avg_queue_s,
            "p95_queue_s": self.p95_queue_s,
            "makespan_s": self.makespan_s,
            "gpu_utilization": self.gpu_utilization,
            "throughput_gpus": self.throughput_gpus,
            "mean_speed": self.mean_speed,
            "fragmentation": self.fragmentation,
            "restarts": self.restarts,
            "node_failures": self.node_failures,
            "replans": self.replans,
        }


def simulate(
    trace: Trace,
    model: SpeedModel,
    *,
    policy: str,
    order: str = "fifo",
    seed: int = 0,
    failures: Failures | None = None,
    degradations: tuple[Degradation, ...] = (),
    adaptive: bool = False,
    replan_restart_s: float = 300.0,
    las_threshold_gpu_s: float = LAS_THRESHOLD_GPU_S,
    preempt_restart_s: float = 30.0,
    schedule_every_s: float = 0.0,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Run ``trace`` on the cluster of ``model`` under one placement policy and queue order.

    ``adaptive``: when a degradation changes what a running job's link can carry, the job
    re-plans (the planner's best plan for the degraded shape, never slower than its kept plan)
    and pays ``replan_restart_s`` of stopped time each time its plan changes, there and back.
    ``las_threshold_gpu_s``, ``preempt_restart_s``: the ``las`` order's queue-0 limit and the
    cost of resuming a preempted job (30 s: the Pollux artifact's ``Job.reallocate``).
    ``schedule_every_s``: > 0 makes placement decisions only every that many seconds, as
    interval schedulers do (the Pollux artifact: 60 s), instead of at every event."""
    require(
        order in ORDERS, f"--order must be one of {', '.join(ORDERS)}, got '{order}'", field="order"
    )
    spec = model.spec
    for d in degradations:
        limit = {"leaf": spec.num_leaves, "spine": spec.num_pods, "core": 1}[d.level]
        if d.level != "core" and not 0 <= d.index < limit:
            raise InputError(
                f"degradation {d.level} index {d.index} out of range; accepted: 0..{limit - 1}",
                field="degrade",
            )
    place = make_policy(policy, seed).place
    detail = model.placement_detail
    state = ClusterState(spec)
    rng = np.random.default_rng(seed + 1)
    n_jobs = len(trace)
    gpus = trace.gpus
    work = trace.work_s.copy()  # remaining reference seconds
    models = [m or model.default_model for m in trace.model]
    biggest = state.up_capacity

    start = np.full(n_jobs, np.nan)
    end = np.full(n_jobs, np.nan)
    failed = np.zeros(n_jobs, dtype=bool)
    restarts = np.zeros(n_jobs, dtype=np.int64)
    speed = np.ones(n_jobs)
    run_start = np.zeros(n_jobs)  # start of the current attempt or of the last speed change
    attempt_start = np.zeros(n_jobs)
    version = np.zeros(n_jobs, dtype=np.int64)
    replanned = np.zeros(n_jobs, dtype=bool)
    replans = 0
    allocs: dict[int, Allocation] = {}
    on_node: dict[int, set[int]] = {}
    done_gpu_s = 0.0
    busy_gpu_s = 0.0
    speed_gpu_s = 0.0
    frag_area = 0.0
    frag_last = 0.0
    node_failures = 0
    # Repair times of the nodes now down, in order (one repair time for all, so first down, first
    # back): while every node is down no failure can land, and the next is drawn from the first
    # repair on (the failure process is memoryless), not stepped through a year of no-ops.
    repairs_due: deque[float] = deque()
    active: list[Degradation] = []

    events: list[tuple[float, int, int, int, int]] = []
    seq = 0

    def push(t: float, kind: int, what: int, ver: int = 0) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, what, ver))

    for i, d in enumerate(degradations):
        push(d.start_s, _DEGRADE_ON, i)
        push(d.end_s, _DEGRADE_OFF, i)
    mtbf_all = failures.node_mtbf_s / spec.num_nodes if failures else 0.0
    require(schedule_every_s >= 0, "schedule interval must be >= 0 s", field="schedule_every_s")
    if schedule_every_s > 0 and n_jobs:
        # ticks at whole multiples of the interval (the artifact's clock starts at 0)
        first = (np.floor(trace.submit_s[0] / schedule_every_s) + 1) * schedule_every_s
        push(float(first), _TICK, 0)
    if failures:
        push(float(rng.exponential(mtbf_all)), _FAIL, int(rng.integers(spec.num_nodes)))

    fifo: deque[int] = deque()
    sjf: list[tuple[float, int]] = []
    use_sjf = order == "sjf"
    use_las = order == "las"
    queues: tuple[list[int], list[int]] = ([], [])  # las: every unfinished job, queue 0 and 1
    in_q0 = np.zeros(n_jobs, dtype=bool)
    served = np.zeros(n_jobs)  # las: GPU-seconds of finished attempts
    stint = np.zeros(n_jobs, dtype=np.int64)  # las: attempt counter, to drop stale demotions
    finished = 0

    def degrade_for(alloc: Allocation, level: int) -> float:
        factor = 1.0
        for d in active:
            lv = NETWORK_LEVELS.index(d.level) + 1
            if level < lv:
                continue
            member = state.leaf if d.level == "leaf" else state.pod
            if d.level == "core" or (member[alloc.nodes] == d.index).any():
                factor = min(factor, d.factor)
        return factor

    def set_speed(j: int, now: float, fresh: bool = False) -> None:
        nonlocal replans
        alloc = allocs[j]
        shape = state.shape(alloc, counts=detail)
        if active and shape.level > 0:
            f = degrade_for(alloc, shape.level)
            if f < 1.0:
                shape = state.shape(alloc, degrade=f, counts=detail)
        kept = model.speed(models[j], int(gpus[j]), shape)
        speed[j] = kept
        if adaptive:
            better = shape.degrade < 1.0 and (
                model.replanned_speed(models[j], int(gpus[j]), shape) > kept * 1.001
            )
            if better:
                speed[j] = model.replanned_speed(models[j], int(gpus[j]), shape)
            if fresh:
                replanned[j] = better  # a job starting now starts on the better plan
            elif better != replanned[j]:
                # a plan change stops the job for a restart: charge it as work at the new speed
                work[j] += replan_restart_s * speed[j]
                replanned[j] = better
                replans += 1
        version[j] += 1
        push(now + work[j] / speed[j], _DONE, j, int(version[j]))

    def advance(j: int, now: float) -> None:
        """Book the work job ``j`` did since its last update."""
        nonlocal speed_gpu_s
        dt = now - run_start[j]
        work[j] = max(work[j] - dt * speed[j], 0.0)
        speed_gpu_s += dt * speed[j] * gpus[j]
        run_start[j] = now

    def release(j: int, now: float) -> None:
        nonlocal busy_gpu_s
        alloc = allocs.pop(j)
        busy_gpu_s += (now - attempt_start[j]) * gpus[j]
        served[j] += (now - attempt_start[j]) * gpus[j]
        stint[j] += 1
        for node in alloc.nodes.tolist():
            on_node[node].discard(j)
        state.give(alloc)

    def start_job(j: int, alloc: Allocation, now: float) -> None:
        state.take(alloc)
        allocs[j] = alloc
        for node in alloc.nodes.tolist():
            on_node.setdefault(node, set()).add(j)
        if np.isnan(start[j]):
            start[j] = now
        attempt_start[j] = now
        run_start[j] = now
        set_speed(j, now, fresh=True)
        if use_las and in_q0[j]:
            left = max(las_threshold_gpu_s - served[j], 0.0) / gpus[j]
            push(now + left, _DEMOTE, j, int(stint[j]))

    def schedule(now: float) -> None:
        if use_las:
            schedule_las(now)
            return
        while fifo or sjf:
            j = sjf[0][1] if use_sjf else fifo[0]
            alloc = place(state, int(gpus[j]))
            if alloc is None:
                return
            if use_sjf:
                heapq.heappop(sjf)
            else:
                fifo.popleft()
            start_job(j, alloc, now)

    def schedule_las(now: float) -> None:
        budget = state.up_capacity
        chosen: list[int] = []
        for j in queues[0] + queues[1]:
            if gpus[j] <= budget:
                chosen.append(j)
                budget -= int(gpus[j])
        keep = set(chosen)
        for j in [j for j in allocs if j not in keep]:  # preempt: stop, keep the work done
            advance(j, now)
            release(j, now)
            version[j] += 1
            replanned[j] = False
            work[j] += preempt_restart_s
        for j in chosen:
            if j not in allocs:
                alloc = place(state, int(gpus[j]))
                if alloc is not None:
                    start_job(j, alloc, now)

    def forget(j: int) -> None:
        """A finished job leaves the las queues."""
        if use_las:
            queues[0 if in_q0[j] else 1].remove(j)

    def enqueue(j: int, front: bool = False) -> None:
        if use_las:
            if not front:  # a new job; a restarted one keeps its place
                queues[0].append(j)
                in_q0[j] = True
        elif use_sjf:
            heapq.heappush(sjf, (float(work[j]), j))
        elif front:
            fifo.appendleft(j)
        else:
            fifo.append(j)

    next_arrival = 0
    tick = max(1, n_jobs // 200)
    while finished < n_jobs:
        t_arr = trace.submit_s[next_arrival] if next_arrival < n_jobs else np.inf
        if events and events[0][0] <= t_arr:
            now, _, kind, what, ver = heapq.heappop(events)
        else:
            now, kind, what, ver = float(t_arr), _ARRIVE, next_arrival, 0
            next_arrival += 1
        if now > frag_last:
            if state.total_free:
                frag_area += (now - frag_last) * state.partial_free / state.total_free
            frag_last = now
        if kind == _ARRIVE:
            if gpus[what] > biggest:
                failed[what] = True
                end[what] = now
                finished += 1
            else:
                enqueue(what)
        elif kind == _DONE:
            j = what
            if j not in allocs or ver != version[j]:
                continue  # superseded by a speed change, or the job was killed
            advance(j, now)
            done_gpu_s += float(trace.work_s[j] * gpus[j])
            release(j, now)
            forget(j)
            end[j] = now
            finished += 1
        elif kind == _FAIL and failures is not None:
            node = what
            if state.up[node]:
                node_failures += 1
                for j in sorted(on_node.get(node, ())):
                    advance(j, now)
                    ran = now - attempt_start[j]
                    lost = (ran % failures.checkpoint_every_s) * speed[j]
                    work[j] += lost + failures.restart_s
                    release(j, now)
                    version[j] += 1
                    replanned[j] = False
                    restarts[j] += 1
                    if restarts[j] > failures.max_restarts:
                        forget(j)
                        failed[j] = True
                        end[j] = now
                        finished += 1
                    else:
                        enqueue(j, front=True)
                state.node_down(node)
                push(now + failures.repair_s, _REPAIR, node)
                repairs_due.append(now + failures.repair_s)
            if finished < n_jobs:
                draw_from = now if len(repairs_due) < spec.num_nodes else max(now, repairs_due[0])
                push(
                    draw_from + float(rng.exponential(mtbf_all)),
                    _FAIL,
                    int(rng.integers(spec.num_nodes)),
                )
        elif kind == _REPAIR:
            state.node_up(what)
            repairs_due.popleft()
        elif kind == _DEMOTE:
            j = what
            if j in allocs and ver == stint[j] and in_q0[j]:
                queues[0].remove(j)
                queues[1].append(j)
                in_q0[j] = False
        elif kind in (_DEGRADE_ON, _DEGRADE_OFF):
            d = degradations[what]
            if kind == _DEGRADE_ON:
                active.append(d)
            else:
                active.remove(d)
            for j in list(allocs):
                advance(j, now)
                set_speed(j, now)
        if kind == _TICK:
            if finished < n_jobs:
                push(now + schedule_every_s, _TICK, 0)
            schedule(now)
        elif schedule_every_s <= 0:
            schedule(now)
        if progress is not None and (finished % tick == 0 or finished == n_jobs):
            progress(finished, n_jobs)

    completed = ~failed
    jct = (end - trace.submit_s)[completed]
    queue = (start - trace.submit_s)[completed]
    makespan = float(np.nanmax(end) - trace.submit_s[0]) if n_jobs else 0.0
    capacity = float(state.capacity.sum())
    span = max(makespan, 1e-9)
    return SimResult(
        policy=policy,
        order=order,
        jobs_submitted=n_jobs,
        jobs_completed=int(completed.sum()),
        jobs_failed=int(failed.sum()),
        avg_jct_s=float(jct.mean()) if jct.size else 0.0,
        p95_jct_s=float(np.percentile(jct, 95)) if jct.size else 0.0,
        avg_queue_s=float(queue.mean()) if queue.size else 0.0,
        p95_queue_s=float(np.percentile(queue, 95)) if queue.size else 0.0,
        makespan_s=makespan,
        gpu_utilization=busy_gpu_s / (capacity * span),
        throughput_gpus=done_gpu_s / span,
        mean_speed=speed_gpu_s / busy_gpu_s if busy_gpu_s else 1.0,
        fragmentation=frag_area / span,
        restarts=int(restarts.sum()),
        node_failures=node_failures,
        replans=replans,
        jct_s=jct,
        queue_s=queue,
    )
