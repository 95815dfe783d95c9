"""How fast a job runs on the GPUs it got: the cost model's step time on the allocation's shape.

A job class is (model, GPU count). Its plan is the planner's best plan on a packed allocation of
the reference node type (the first in the cluster file), with tensor parallelism capped at the
NVLink domain (Narayanan et al. 2021, arXiv:2104.04473, Sec. 3.2: keep TP inside a server, PP/DP
across the slower levels). The same plan is then priced by the cost model on the shape it
actually got: which node type paces it, the highest switch level its ring crosses, and how many
of its ranks share a node (and so that node's NICs). Speed = packed reference step time / this
step time, so a job spread across leaves under an oversubscribed core runs slower, one packed on
a faster generation runs faster.

The simulator meets a few dozen distinct shapes over 100k jobs, so every step time is computed
once and cached (the speed target of ``benchmarks/cluster_sim.py``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gpuscale import catalog
from gpuscale.cluster.choices import DEFAULT_MODEL as DEFAULT_MODEL
from gpuscale.cluster.spec import ClusterSpec, NodeType
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import estimate_batch, estimate_plan
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.enumerate import SearchSpace, enumerate_plans
from gpuscale.planner.search import Hardware, Workload, search_count
from gpuscale.specs import Cluster, Plan, Training


def largest_divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is <= ``cap``: ranks per node of an even split."""
    for d in range(min(n, cap), 0, -1):
        if n % d == 0:
            return d
    return 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """What of an allocation the cost model sees."""

    node_type: int
    """The slowest node type in the allocation (it paces every synchronous step)."""
    level: int
    """0 one node, 1 one leaf, 2 one pod (spine), 3 across pods (core)."""
    per_node: int
    """Fewest of the job's GPUs on any one of its nodes."""
    degrade: float = 1.0
    """Bandwidth factor (<= 1) on the highest level crossed (a degraded link)."""
    counts: tuple[int, ...] = ()
    """The job's GPUs per node, ascending; filled only for speed models that read it
    (``placement_detail``), so the cost model's cache keys stay few."""


class SpeedModel(Protocol):
    """What the simulator asks of a speed model: this cost model, or measured tables
    (:class:`gpuscale.cluster.pollux.ArtifactSpeeds`)."""

    spec: ClusterSpec
    default_model: str
    placement_detail: bool
    """Whether shapes must carry the GPUs per node (``Shape.counts``)."""

    def speed(self, model: str, n: int, shape: Shape) -> float: ...

    def replanned_speed(self, model: str, n: int, shape: Shape) -> float: ...


class SlowdownModel:
    """Cached cost-model speeds of job classes on allocation shapes."""

    placement_detail = False

    def __init__(
        self,
        spec: ClusterSpec,
        *,
        profile: Profile | None = None,
        default_model: str = DEFAULT_MODEL,
    ) -> None:
        self.spec = spec
        self.profile = profile or load_profile("generic")
        self.default_model = default_model
        catalog.model(default_model)
        self._plans: dict[tuple[str, int], Plan | None] = {}
        self._steps: dict[tuple[str, int, Shape], float] = {}
        self._speeds: dict[tuple[str, int, Shape], float] = {}
        self._replanned: dict[tuple[str, int, Shape], float] = {}
        gpn = spec.gpus_per_node
        self._leaf_gpus = int(
            max(gpn[spec.node_leaf == leaf].sum() for leaf in range(spec.num_leaves))
        )

    @property
    def reference(self) -> NodeType:
        return self.spec.node_types[0]

    def plan(self, model: str, n: int) -> Plan | None:
        """The planner's best plan for ``n`` GPUs of the reference type, packed; ``None`` when
        no plan fits memory (the job then runs at its trace speed wherever it lands)."""
        key = (model, n)
        if key not in self._plans:
            ref = self.reference
            spec = catalog.model(model)
            seq = int(defaults.seq_len(spec).value)
            gbs = int(defaults.global_batch(spec, seq).value)
            gbs = max(gbs, n)  # every GPU gets at least one sequence per step
            gbs = -(-gbs // n) * n
            per = largest_divisor_at_most(n, ref.gpus_per_node)
            nic = ref.nic.id if ref.nic.id in catalog.links() else catalog.DEFAULT_INTER
            nics = max(1, ref.nics_per_node * per // ref.gpus_per_node)
            hardware = Hardware(gpu=ref.gpu.id, inter=nic, gpus_per_node=per, nics_per_node=nics)
            workload = Workload(
                model=spec,
                training=Training(seq_len=seq, precision=ref.gpu.half_precision),  # type: ignore[arg-type]
                global_batch=gbs,
                tokens=float(gbs * seq),
            )
            space = SearchSpace(
                max_tp=ref.nvlink_domain, micro_batches=(1, 2, 4), recompute=("none", "full")
            )
            best = search_count(workload, hardware, self.profile, n, top_k=1, space=space).best
            self._plans[key] = best.plan if best is not None else None
        return self._plans[key]

    def packed_shape(self, n: int, node_type: int = 0) -> Shape:
        gpn = self.spec.node_types[node_type].gpus_per_node
        level = 0 if n <= gpn else (1 if n <= self._leaf_gpus else 2)
        return Shape(node_type=node_type, level=level, per_node=largest_divisor_at_most(n, gpn))

    def _cluster(self, n: int, shape: Shape) -> Cluster:
        nt = self.spec.node_types[shape.node_type]
        per = largest_divisor_at_most(n, shape.per_node) if shape.level > 0 else n
        intra = nt.intra if per <= nt.nvlink_domain else catalog.link(nt.gpu.pcie)
        if shape.level == 0:
            inter = nt.nic
        else:
            rate = self.spec.level_bandwidth_gb_per_s(shape.level, nt.nic) * shape.degrade
            inter = dataclasses.replace(nt.nic, bandwidth_gb_per_s=rate)
        return Cluster(
            device=nt.gpu,
            num_gpus=n,
            gpus_per_node=per,
            intra=intra,
            inter=inter,
            nics_per_node=max(1, nt.nics_per_node * per // nt.gpus_per_node),
        )

    def step_time_s(self, model: str, n: int, shape: Shape) -> float | None:
        plan = self.plan(model, n)
        if plan is None:
            return None
        key = (model, n, shape)
        if key not in self._steps:
            spec = catalog.model(model)
            seq = int(defaults.seq_len(spec).value)
            device = self.spec.node_types[shape.node_type].gpu
            training = Training(seq_len=seq, precision=device.half_precision)  # type: ignore[arg-type]
            try:
                est = estimate_plan(spec, self._cluster(n, shape), training, plan, self.profile)
            except InputError:
                return None
            self._steps[key] = float(est.step_time_s[0])
        return self._steps[key]

    def speed(self, model: str, n: int, shape: Shape) -> float:
        """Work per second relative to the packed reference allocation (1.0 = trace speed)."""
        key = (model, n, shape)
        hit = self._speeds.get(key)
        if hit is not None:
            return hit
        ref = self.step_time_s(model, n, self.packed_shape(n))
        here = self.step_time_s(model, n, shape)
        value = 1.0 if ref is None or here is None else ref / here
        self._speeds[key] = value
        return value

    def replanned_speed(self, model: str, n: int, shape: Shape) -> float:
        """Speed of the best plan for this shape (the planner's search re-run on the degraded
        cluster), relative to packed; never below the kept plan's speed."""
        key = (model, n, shape)
        hit = self._replanned.get(key)
        if hit is not None:
            return hit
        kept = self.speed(model, n, shape)
        ref = self.step_time_s(model, n, self.packed_shape(n))
        value = kept
        if ref is not None:
            spec = catalog.model(model)
            seq = int(defaults.seq_len(spec).value)
            plan = self.plan(model, n)
            gbs = plan.global_batch if plan is not None else n
            device = self.spec.node_types[shape.node_type].gpu
            training = Training(seq_len=seq, precision=device.half_precision)  # type: ignore[arg-type]
            cluster = self._cluster(n, shape)
            space = SearchSpace(
                max_tp=self.spec.node_types[shape.node_type].nvlink_domain,
                micro_batches=(1, 2, 4),
                recompute=("none", "full"),
            )
            plans = enumerate_plans(spec, n, global_batch=gbs, seq_len=seq, space=space)
            if len(plans):
                est = estimate_batch(spec, cluster, training, plans, self.profile)
                fits = np.asarray(est.fits, dtype=bool)
                if fits.any():
                    best = float(np.asarray(est.step_time_s)[fits].min())
                    value = max(kept, ref / best)
        self._replanned[key] = value
        return value
