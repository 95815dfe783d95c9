"""Which DDP communication hook pays off for a data-parallel job, and by how much.

Each hook of :mod:`gpuscale.runtime.hooks` is priced with the cost model: its gradient sync on
the cluster (:func:`gpuscale.costmodel.grad_sync.sync_costs`), the part of it backward does not
hide, and its encode/decode time; the step is the default step with the default sync replaced.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.costmodel.collectives import LevelBandwidth
from gpuscale.costmodel.communication import data_parallel_interference, exposed_comm_s
from gpuscale.costmodel.compute import microbatch_compute
from gpuscale.costmodel.grad_sync import HookOptions, SyncCost, sync_costs
from gpuscale.costmodel.model_states import grad_reduce_bytes
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import Cluster, ModelSpec, Plan, PlanBatch, Training

FIDELITY_RANK = {"exact": 0, "16-bit": 1, "lossy": 2}
"""Preference among hooks that are about as fast: exact sums first, lossy last."""


@dataclass(frozen=True, slots=True)
class HookRow:
    """One hook priced: its sync, what of it the step waits for, the step, the speed-up."""

    cost: SyncCost
    exposed_s: float
    step_s: float
    speedup: float


@dataclass(frozen=True, kw_only=True, slots=True)
class HookAdvice:
    """Every hook priced, the one to use and why."""

    rows: dict[str, HookRow]
    """Hook name -> priced row; ``default`` is PyTorch's all-reduce."""
    backward_overlap_s: float
    """Backward time the sync can hide behind."""
    step_s: float
    fits: bool
    memory_per_gpu_bytes: float
    gradient_bytes: float
    recommendation: str | None
    """The hook to use; ``None``: keep the default."""
    verdict: str

    @property
    def bandwidth_bound(self) -> bool:
        return self.rows["default"].cost.network_s > self.backward_overlap_s


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def recommend(
    rows: dict[str, HookRow], hidden_s: float, min_gain: float, multi_node: bool
) -> tuple[str | None, str]:
    """The hook to use (None: keep the default) and a sentence that says why."""
    base = rows["default"]
    sync = base.cost.network_s
    best = max(rows.values(), key=lambda r: r.speedup)
    hidden = sync <= hidden_s
    ceiling = base.step_s / (base.step_s - base.exposed_s)
    share = base.exposed_s / base.step_s
    if hidden:
        # Fully overlapped sync still slows the backward it shares the GPU with (profile
        # constant comm_compute_interference): fewer bytes can pay a little even here.
        head = (
            f"not bandwidth-bound: gradient sync ({_ms(sync)} ms) hides behind backward "
            f"({_ms(hidden_s)} ms of overlap) and costs only the slowdown of the compute it "
            f"shares the GPU with ({_ms(base.exposed_s)} ms, {share:.0%} of the step)"
        )
    else:
        where = "" if multi_node else " on one node"
        head = (
            f"bandwidth-bound{where}: gradient sync exposes {_ms(base.exposed_s)} ms "
            f"({share:.0%} of the step; free communication would give {ceiling:.2f}x)"
        )
    if best.speedup < 1.0 + min_gain:
        gain = (
            "no hook beats the default"
            if best.cost.hook == "default"
            else f"no hook gains {min_gain:.0%} (best: {best.cost.hook} {best.speedup:.2f}x)"
        )
        return None, f"{head}; {gain}; keep PyTorch's default all-reduce"
    # Prefer the most faithful hook within min_gain of the fastest one.
    pick = min(
        (r for r in rows.values() if r.speedup * (1.0 + min_gain) >= best.speedup),
        key=lambda r: (FIDELITY_RANK[r.cost.fidelity], -r.speedup),
    )
    text = (
        f"{head}; {pick.cost.hook} makes the step {pick.speedup:.2f}x faster "
        f"({_ms(base.step_s)} -> {_ms(pick.step_s)} ms)"
    )
    if pick.cost.fidelity == "lossy":
        safer = [
            r for r in rows.values() if r.cost.fidelity != "lossy" and r.cost.hook != "default"
        ]
        alt = max(safer, key=lambda r: r.speedup)
        text += (
            f"; it changes the mean gradient and relies on error feedback: compare the loss "
            f"curve with a default run (best non-lossy: {alt.cost.hook}, {alt.speedup:.2f}x)"
        )
    elif pick.cost.fidelity == "16-bit":
        text += "; gradients cross the wire rounded to 16 bits"
    return pick.cost.hook, text


def advise_hooks(
    model: ModelSpec,
    cluster: Cluster,
    training: Training,
    plan: Plan,
    profile: Profile,
    options: HookOptions,
    *,
    min_gain: float,
) -> HookAdvice:
    """Price every hook for ``plan`` (pure data parallelism) and pick one."""
    est = estimate_plan(model, cluster, training, plan, profile)
    mb = microbatch_compute(
        model, cluster.pace_device, training, PlanBatch.from_plans([plan]), profile
    )
    backward = float(mb.backward_s[0])
    hidden = profile.overlap_of("dp") * backward
    # The step's own rule (persistent matmuls on Hopper lose more), so the default row is the step.
    interference = float(
        data_parallel_interference(cluster.pace_device.generation, profile, mb.gemm_fraction)[0]
    )
    entry_bytes = grad_reduce_bytes(training, profile)
    entries = float(est.gradient_bytes_per_gpu[0]) / entry_bytes
    hbm = cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    costs = sync_costs(
        entries,
        entry_bytes,
        plan.dp,
        cluster.gpus_per_node,
        LevelBandwidth.of(cluster, profile),
        hbm,
        options,
    )
    step = float(est.step_time_s[0])
    rest = step - float(est.comm_dp_s[0])
    rows = {}
    for name, c in costs.items():
        exposed = float(exposed_comm_s(c.network_s, hidden, interference))
        step_h = rest + exposed + c.codec_s
        rows[name] = HookRow(cost=c, exposed_s=exposed, step_s=step_h, speedup=step / step_h)
    pick, verdict = recommend(rows, hidden, min_gain, cluster.num_nodes > 1)
    return HookAdvice(
        rows=rows,
        backward_overlap_s=hidden,
        step_s=step,
        fits=bool(est.fits[0]),
        memory_per_gpu_bytes=float(est.memory_per_gpu_bytes[0]),
        gradient_bytes=entries * entry_bytes,
        recommendation=pick,
        verdict=verdict,
    )
