"""Calibrate a profile from one measured training run of the user's own stack.

One measured number pins down one degree of freedom: the fit moves the profile along one
direction, the one the prior knowledge of the stack makes most probable, and reproduces the
measurement exactly; a peak memory, when given, fits one memory parameter separately.

- **The quantities** (:data:`QUANTITIES`), each a named term of the cost model with a physical
  range and a prior spread ``sigma`` (how far, in log scale, that quantity typically differs
  between stacks on the same GPU: the log SD of published figures of several stacks on one GPU,
  ``catalog/data/calibration_priors.yaml``, :data:`SIGMA`):
  ``compute`` (the sustained tensor-core rate: every GEMM efficiency curve of this GPU at the
  run's precision and the fused-attention efficiency, scaled together), ``attention`` (the fused
  attention kernel alone), ``memory_bound`` (achieved HBM bandwidth of the memory-bound kernels:
  norms, activations, rotary, loss, optimizer), ``host`` (the per-kernel launch/host floor),
  ``inter`` and ``intra`` (achieved bandwidth of the network between nodes / inside a node).
- **The rule** (``rule="posterior"``, the default). Each quantity ``k`` is an independent
  log-normal unknown, ``x_k = ln(speed factor) ~ N(0, sigma_k^2)``; to first order the step moves
  by ``-sum_k e_k x_k``, with ``e_k = -d ln(step) / d ln(quantity)`` the step's sensitivity
  (elasticity) at the profile's values. The most probable ``x`` that reproduces the measured step
  (minimum ``sum_k (x_k / sigma_k)^2`` subject to the step: the posterior mean of the linear
  Gaussian model, the Kalman update ``P H^T (H P H^T + R)^-1`` with ``P = diag(sigma^2)``,
  ``H = -e`` and no observation noise, Kalman 1960, J. Basic Eng. 82:35) is
  ``x_k = t * e_k * sigma_k^2``, one scalar ``t``: each quantity takes a share of
  the gap proportional to ``(e_k * sigma_k)^2``, its part of the step's prior uncertainty. ``t`` is
  solved on the full model (not the linearisation) so the run is reproduced exactly, and each
  ``x_k`` is held inside its physical range (the box-constrained optimum keeps the same form,
  ``x_k = clip(t * e_k * sigma_k^2)``). A compute-bound run of a large model thus moves the
  tensor-core rate; the anchor of a small model, whose norms and activations are a fifth of the
  step, moves the memory-bound kernels as well; hidden communication has elasticity 0 and never
  moves. Quantities the step hardly depends on (``e_k`` below :data:`MIN_ELASTICITY`) are left
  alone: the run says nothing about them, and moving them would change other plans where they
  matter without evidence.
- ``rule="smallest_move"`` (the previous rule, kept for comparison): fit the one quantity whose
  own exact fit is the smallest move in prior spreads, ``z = |ln(after / before)| / sigma``. It
  is the posterior's winner-takes-all limit: when two quantities explain the run about as well it
  flips between them on a small change of the measurement, and carries the whole gap on whichever
  it picks.
- ``rule="empirical"``: the posterior rule with the spreads the caller gives (``spreads=``),
  e.g. estimated from other stacks' measured runs by
  :func:`gpuscale.planner.calibrate_prior.empirical_spreads`. Not the default:
  ``benchmarks/calibrate_prior.py`` (held out by source) gives 5.06% against the posterior's
  5.07% with the sourced spreads (5.03% against 5.16% with the spreads before them), and the
  spread it estimates for the network between nodes (1.32 in log scale) is one missed run's
  doing, not a physical spread (docs/investigations/training-calibration.md, branches
  ``calib-prior``, ``calib-spreads``).
- **Identifiability.** For every quantity the value that would reproduce the run alone and its
  ``z`` are reported; every quantity whose ``z`` is within :data:`AMBIGUOUS_Z` of the smallest is
  "also consistent with this run" (``identifiable`` false): one run cannot separate them, which
  is why the posterior splits the gap between them. A second run that differs in what separates
  them (sequence length for attention, model width for the memory-bound share, node count for
  the network) tells them apart.
- Memory: ``memory_allocator_fragmentation``, the caching allocator's reserve over live tensors,
  the framework's memory overhead that multiplies: the model's reserved peak is it times the
  allocated peak (with the layer blocks the allocator keeps cached where backward is the peak;
  :func:`gpuscale.costmodel.memory.training_memory`), and the measured device peak is that plus
  the CUDA context and NCCL buffers, so the fit is monotone. It is fitted after, and
  independently of, the step: no throughput quantity changes memory.
- The fitted values are written as an *overlay* profile (only the keys that moved, under this
  GPU's own ids where the profile keys them by GPU) with a ``fit:`` block saying what run it came
  from, the rule, and for every moved quantity its value before and after and its share of the
  gap.

Every estimate is the cost model's own (:func:`gpuscale.costmodel.step.estimate_plan`), used as a
black box, so the fit stays exact whatever physics the model gains.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuscale.costmodel.profile import PROFILE_SCHEMA_VERSION, GemmCurve, LinkCalibration, Profile
from gpuscale.costmodel.step import GIB, estimate_plan
from gpuscale.errors import InputError
from gpuscale.planner.calibrate_spreads import sourced_spreads
from gpuscale.specs import Cluster, JobOptions, ModelSpec, Plan, Training
from gpuscale.specs.training import LOW_PRECISIONS

MIN_EFFICIENCY = 0.05
"""Lowest efficiency a fitted parameter may take. The generic profile's GEMM curves start at
0.02-0.05 for a 1e8-FLOP GEMM (a few microseconds of work): a whole step's kernels running
slower than that are not slow GEMMs or links but something outside the model (host-bound steps,
a stalled input pipeline, a measurement of one GPU instead of all)."""

MAX_EFFICIENCY = 1.0
"""An efficiency is achieved / rated: above 1 the GPU or link would beat its datasheet."""

MAX_HBM_EFFICIENCY = 0.95
"""Streaming kernels reach at most ~90-93% of HBM peak (STREAM-like copy on A100/H100: ~1.8 of
2.0 and ~3.0 of 3.35 TB/s; NVIDIA's own bandwidthTest figures): a memory-bound share running
faster than 95% of peak means the model counts bytes the stack does not move."""

HOST_US_RANGE = (1.0, 100.0)
"""Per-kernel launch/host floor, microseconds: ~1-2 us with CUDA graphs (NVIDIA, 'Getting
Started with CUDA Graphs', 2019: launch cost per kernel in a graph ~1 us) up to tens of
microseconds per op for Python-eager dispatch; above 100 us per kernel the step is host-bound by
something the model does not describe (data loading, logging, synchronisation)."""

MIN_ELASTICITY = 0.05
"""A parameter that moves the step by under 0.05% per 1% change would need to move 20x further
than the measurement's error to explain it: such a parameter is not what is off."""

AMBIGUOUS_Z = 1.0
"""Quantities whose moves are within one prior spread of the fitted one's explain the run about
as plausibly (the prior odds exp(-(z_k^2 - z^2)/2) stay within ~e^-1 for z ~ 1): reported as
"also consistent", and the fit as not identifiable from this run alone."""

RULES: tuple[str, ...] = ("posterior", "smallest_move", "empirical")
"""How the throughput gap is attributed (module docstring): split by prior uncertainty, all on
the quantity with the smallest move in prior spreads, or split as the posterior does with spreads
estimated from other stacks (``empirical``: :func:`empirical_spreads`; the caller passes them)."""

WARN_FACTOR = 2.0
"""A fitted parameter moved by more than this factor from the profile's value: the measurement
or the run's flags (GPUs, batch, plan) are probably not what was measured."""

FRAGMENTATION_RANGE = (1.0, 4.0)
"""Reserved / allocated of PyTorch's caching allocator is >= 1 by construction; far above the
1.05-1.20 seen in practice (generic.yaml) the gap is a missing term, not allocator slack."""

FRAGMENTATION_PRACTICE = (1.05, 1.20)
"""Reserved / allocated that PyTorch's caching allocator shows in practice (generic.yaml's
``memory_allocator_fragmentation`` and its sources: PyTorch 'CUDA semantics: memory management',
the published_memory README's 5-20%). A fit outside it is kept but flagged: the gap is then
mostly a tensor term the model misses or over-counts, which will not carry to other plans as an
overhead factor (benchmarks/calibrate_run_memory.py: one run's reserve carried to its source's
other peaks moves them from 9.6% to 11.0% mean error)."""

SIGMA: dict[str, float] = sourced_spreads()
"""Prior spread (log scale, one standard deviation) of each quantity between stacks on the same
hardware: the yardstick for "which single quantity explains the run with the least surprise".
Computed by :func:`gpuscale.planner.calibrate_spreads.sourced_spreads` from the published
per-stack figures of ``catalog/data/calibration_priors.yaml`` (each quantity's groups, source,
why that measurement, and arithmetic there): the pooled within-group sample SD of their logs.
compute 0.056 (cuBLAS vs Inductor Triton bf16 GEMMs on A100), attention 0.30 (FlashAttention-2
vs -3 vs cuDNN on H100), memory_bound 0.44 (Megatron vs torch vs Liger norms, SwiGLU and loss
on H100), host 1.38 (CUDA graphs vs C++ vs Python eager launch), inter 0.49 (quiet NDR vs
congested RoCE), intra 0.18 (NVLS vs ring all-reduce on 8x H100). Before these sources the
values were 0.10 / 0.28 / 0.35 / 1.15 / 0.35 / 0.15, ranges read as +/-1 SD."""

QUANTITIES: tuple[str, ...] = tuple(SIGMA)
"""The throughput quantities the fit may move (``only=`` accepts these)."""

_PROBE = 0.98
"""Scale of the elasticity probe (-2%): small enough to stay local, large enough to sit above
the model's rounding (ceil of layers per stage and the like do not depend on the profile)."""

_BISECTIONS = 80
"""Halvings of the log-scale bracket: 80 take a 1e4-wide bracket below 1e-20 relative."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Run:
    """One training run, as ``estimate`` takes it."""

    model: ModelSpec
    cluster: Cluster
    training: Training
    plan: Plan
    job: JobOptions = field(default_factory=JobOptions)

    @property
    def tokens_per_step(self) -> float:
        return float(self.plan.global_batch * self.training.seq_len)


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """What the user measured: the step (from tokens/s of all GPUs or directly) and optionally
    the peak device memory of the busiest GPU."""

    step_s: float
    memory_gib: float | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A throughput quantity the fit may move, with how much the step depends on it and what
    move would explain the measurement."""

    name: str
    """One of :data:`QUANTITIES`."""
    label: str
    """In words, for the output (``sustained tensor-core efficiency``)."""
    value: float
    """The profile's value before the fit (plateau GEMM efficiency; attention or HBM efficiency;
    launch microseconds; link bandwidth efficiency, or GB/s when the profile gives the link an
    absolute measured rate)."""
    elasticity: float
    """``|d ln(step) / d ln(quantity)|`` at the profile's value."""
    lowest_scale: float
    highest_scale: float
    """The physical range of the quantity, as a factor on its speed (see :class:`_Knob`)."""
    sigma: float
    """Prior spread of the quantity between stacks (:data:`SIGMA`)."""
    needed: float | None = None
    """The value that reproduces the measurement, or None when none in the range does (or the
    step is too insensitive to it to try)."""
    z: float | None = None
    """``|ln(needed / value)| / sigma``: the move in units of the prior spread."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fitted:
    """One fitted parameter: what it is, where it sits in the profile, before and after."""

    name: str
    label: str
    keys: tuple[str, ...]
    """Profile keys written (``gemm.h100-sxm-bf16``, ``links.inter``, ...)."""
    before: float
    after: float
    elasticity: float | None = None
    sigma: float | None = None
    z: float | None = None
    why: str = ""
    """Why this quantity (the rule applied to this run), in words."""
    share: float | None = None
    """Its part of the fitted change of ``ln(step)`` (first order, ``e_k x_k / sum_j e_j x_j``):
    the shares of the throughput quantities add to 1; None for memory."""

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCalibration:
    """The outcome of :func:`calibrate_run`: the fitted profile and how it reproduces the run."""

    rule: str
    """The attribution rule applied (:data:`RULES`), or ``only`` when one quantity was asked for."""
    throughput: tuple[Fitted, ...]
    """The throughput quantities moved, the largest share first (one under ``smallest_move`` or
    ``only``)."""
    memory: Fitted | None
    candidates: tuple[Candidate, ...]
    also_consistent: tuple[Candidate, ...]
    """Quantities that explain the run alone about as plausibly as the one that needs the
    smallest move (:data:`AMBIGUOUS_Z`)."""
    measured_step_s: float
    predicted_step_s_before: float
    predicted_step_s_after: float
    measured_memory_gib: float | None
    predicted_memory_gib_before: float
    predicted_memory_gib_after: float
    profile: Profile
    """The calibrated profile (the start profile with the fitted values)."""
    overlay: dict[str, Any]
    """The keys to write into a profile file (without provenance; see :func:`profile_document`)."""
    warnings: tuple[str, ...]

    @property
    def identifiable(self) -> bool:
        """True when no other quantity explains the run about as plausibly."""
        return not self.also_consistent

    @property
    def main(self) -> Fitted:
        """The throughput quantity with the largest share of the gap."""
        return self.throughput[0]


# --- the candidates -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Knob:
    """How to move one quantity of a profile by a *speed* factor ``s`` (``s > 1``: that part of
    the step runs faster): the new profile, the YAML keys for it, and the quantity's value."""

    name: str
    label: str
    value: float
    lowest: float
    highest: float
    apply: Callable[[Profile, float], Profile]
    overlay: Callable[[float], dict[str, Any]]
    keys: tuple[str, ...]
    at: Callable[[float], float] = lambda s: s
    """The quantity's value at speed factor ``s`` relative to ``value`` (``value * s`` for an
    efficiency or a bandwidth; ``value / s`` for a time such as the launch floor)."""


def _scaled_knob(
    name: str,
    label: str,
    value: float,
    lowest: float,
    highest: float,
    apply: Callable[[Profile, float], Profile],
    overlay: Callable[[float], dict[str, Any]],
    keys: tuple[str, ...],
) -> _Knob:
    return _Knob(name, label, value, lowest, highest, apply, overlay, keys, at=lambda s: value * s)


def _compute_knob(run: Run, profile: Profile) -> _Knob:
    device = run.cluster.pace_device
    precisions: list[str] = [run.training.precision]
    # The LM head (FP8 recipes) and unfused attention run on the 16-bit curve; and the sustained
    # tensor-core rate (the clock held under the power cap, the gaps between kernels) is shared
    # by every precision this GPU trains in, so a bf16 run informs the FP8 curve too.
    for p in (device.half_precision, *LOW_PRECISIONS):
        if p in device.peak_tflops and p not in precisions:
            precisions.append(p)
    curves = {
        f"{device.id}-{p}": profile.gemm_curve(device.id, device.generation, p) for p in precisions
    }
    attention = profile.attention(device.id, device.generation)
    plateau = max(curves[f"{device.id}-{run.training.precision}"].efficiency)
    top = max([attention, *(max(c.efficiency) for c in curves.values())])

    def scaled(curve: GemmCurve, s: float) -> GemmCurve:
        return GemmCurve(flops=curve.flops, efficiency=tuple(e * s for e in curve.efficiency))

    def apply(p: Profile, s: float) -> Profile:
        return replace(
            p,
            gemm={**p.gemm, **{k: scaled(c, s) for k, c in curves.items()}},
            attention_efficiency={**p.attention_efficiency, device.id: attention * s},
        )

    def overlay(s: float) -> dict[str, Any]:
        return {
            "gemm": {
                k: {"flops": list(c.flops), "efficiency": [e * s for e in c.efficiency]}
                for k, c in curves.items()
            },
            "attention_efficiency": {device.id: attention * s},
        }

    return _scaled_knob(
        "compute",
        "compute efficiency",
        plateau,
        MIN_EFFICIENCY / plateau,
        MAX_EFFICIENCY / top,
        apply,
        overlay,
        (*(f"gemm.{k}" for k in curves), f"attention_efficiency.{device.id}"),
    )


def _attention_knob(run: Run, profile: Profile) -> _Knob:
    device = run.cluster.pace_device
    attention = profile.attention(device.id, device.generation)

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, attention_efficiency={**p.attention_efficiency, device.id: attention * s})

    def overlay(s: float) -> dict[str, Any]:
        return {"attention_efficiency": {device.id: attention * s}}

    return _scaled_knob(
        "attention",
        "fused attention efficiency",
        attention,
        MIN_EFFICIENCY / attention,
        MAX_EFFICIENCY / attention,
        apply,
        overlay,
        (f"attention_efficiency.{device.id}",),
    )


def _memory_bound_knob(profile: Profile) -> _Knob:
    value = profile.hbm_efficiency

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, hbm_efficiency=value * s)

    def overlay(s: float) -> dict[str, Any]:
        return {"hbm_efficiency": value * s}

    return _scaled_knob(
        "memory_bound",
        "HBM efficiency of memory-bound kernels",
        value,
        MIN_EFFICIENCY / value,
        MAX_HBM_EFFICIENCY / value,
        apply,
        overlay,
        ("hbm_efficiency",),
    )


def _host_knob(profile: Profile) -> _Knob:
    name = "kernel_launch_us"
    value = profile.const(name)

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, constants={**p.constants, name: value / s})

    def overlay(s: float) -> dict[str, Any]:
        return {"constants": {name: value / s}}

    return _Knob(
        name="host",
        label="per-kernel launch/host floor (us)",
        value=value,
        # speed s: the floor becomes value / s, kept inside HOST_US_RANGE
        lowest=value / HOST_US_RANGE[1],
        highest=value / HOST_US_RANGE[0],
        apply=apply,
        overlay=overlay,
        keys=(f"constants.{name}",),
        at=lambda s: value / s,
    )


def _link_knob(run: Run, profile: Profile, level: str) -> _Knob:
    link = run.cluster.inter if level == "inter" else run.cluster.intra
    base = profile.link(level, link.kind, link.id)
    absolute = base.bandwidth_gb_per_s is not None
    value = (
        base.bandwidth_gb_per_s
        if base.bandwidth_gb_per_s is not None
        else base.bandwidth_efficiency
    )
    rated = link.bandwidth_gb_per_s

    def calibration(s: float) -> LinkCalibration:
        if absolute:
            scaled = replace(base, bandwidth_gb_per_s=value * s)
        else:
            scaled = replace(base, bandwidth_efficiency=value * s)
        if base.collective_bandwidth_gb_per_s is not None:
            # a measured collective rate (profile.LinkCalibration) moves with the link
            scaled = replace(
                scaled, collective_bandwidth_gb_per_s=base.collective_bandwidth_gb_per_s * s
            )
        return scaled

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, links={**p.links, level: calibration(s)})

    def overlay(s: float) -> dict[str, Any]:
        c = calibration(s)
        entry: dict[str, Any] = {"bandwidth_efficiency": c.bandwidth_efficiency}
        if c.bandwidth_gb_per_s is not None:
            entry["bandwidth_gb_per_s"] = c.bandwidth_gb_per_s
        if c.latency_us is not None:
            entry["latency_us"] = c.latency_us
        if c.collective_bandwidth_gb_per_s is not None:
            entry["collective_bandwidth_gb_per_s"] = c.collective_bandwidth_gb_per_s
        return {"links": {level: entry}}

    # An absolute rate is bounded by the catalog's rated bandwidth of the link the same way.
    ceiling = rated if absolute else MAX_EFFICIENCY
    floor = MIN_EFFICIENCY * (rated if absolute else 1.0)
    where = "between nodes" if level == "inter" else "inside a node"
    return _scaled_knob(
        level,
        f"{link.id} bandwidth {'(GB/s)' if absolute else 'efficiency'} {where}",
        value,
        floor / value,
        ceiling / value,
        apply,
        overlay,
        (f"links.{level}",),
    )


def _fragmentation_knob(profile: Profile) -> _Knob:
    name = "memory_allocator_fragmentation"
    value = profile.const(name)

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, constants={**p.constants, name: value * s})

    def overlay(s: float) -> dict[str, Any]:
        return {"constants": {name: value * s}}

    return _scaled_knob(
        "memory",
        "allocator reserve over live tensors",
        value,
        FRAGMENTATION_RANGE[0] / value,
        FRAGMENTATION_RANGE[1] / value,
        apply,
        overlay,
        (f"constants.{name}",),
    )


def _knobs(run: Run, profile: Profile) -> list[_Knob]:
    """Every throughput quantity this run can inform (the network between nodes only when the
    run spans nodes, inside a node only when it has more than one GPU)."""
    knobs = [
        _compute_knob(run, profile),
        _attention_knob(run, profile),
        _memory_bound_knob(profile),
        _host_knob(profile),
    ]
    if run.cluster.num_gpus > run.cluster.gpus_per_node:
        knobs.append(_link_knob(run, profile, "inter"))
    if run.cluster.num_gpus > 1:
        knobs.append(_link_knob(run, profile, "intra"))
    return knobs


# --- the fit --------------------------------------------------------------------------------


def predict(run: Run, profile: Profile) -> tuple[float, float]:
    """Step seconds and peak memory (GiB, busiest GPU) of ``run`` under ``profile``."""
    est = estimate_plan(run.model, run.cluster, run.training, run.plan, profile, run.job)
    return float(est.step_time_s[0]), float(est.memory_per_gpu_bytes[0] / GIB)


def _solve(
    f: Callable[[float], float], target: float, lo: float, hi: float, increasing: bool
) -> float | None:
    """The scale in [lo, hi] where the monotone ``f`` equals ``target`` (bisection in log scale),
    or None when ``target`` lies outside f's range over the bracket."""
    sign = 1.0 if increasing else -1.0

    def g(s: float) -> float:
        return sign * (math.log(f(s)) - math.log(target))

    g_lo, g_hi = g(lo), g(hi)
    if g_lo > 0 or g_hi < 0:
        return None
    a, b = math.log(lo), math.log(hi)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (a + b)
        if g(math.exp(mid)) < 0:
            a = mid
        else:
            b = mid
        if b - a < 1e-15:
            break
    return math.exp(0.5 * (a + b))


def _elasticity(run: Run, profile: Profile, knob: _Knob, step: float) -> float:
    probed, _ = predict(run, knob.apply(profile, _PROBE))
    return math.log(probed / step) / -math.log(_PROBE)


def run_elasticities(run: Run, profile: Profile) -> dict[str, float]:
    """``|d ln(step) / d ln(quantity)|`` of ``run`` under ``profile`` for every quantity of
    :data:`QUANTITIES` (0 for one the run cannot inform: no network between nodes on one node):
    the evidence :func:`gpuscale.planner.calibrate_prior.empirical_spreads` reads."""
    step = predict(run, profile)[0]
    out = dict.fromkeys(QUANTITIES, 0.0)
    for knob in _knobs(run, profile):
        out[knob.name] = _elasticity(run, profile, knob, step)
    return out


def _merge_overlay(out: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping):
            out.setdefault(key, {}).update(value)
        else:
            out[key] = value


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryFit:
    """The allocator reserve fitted to one measured peak (:func:`fit_memory`)."""

    fitted: Fitted | None
    """None when no reserve in :data:`FRAGMENTATION_RANGE` reproduces the peak."""
    profile: Profile
    """The profile with the fitted reserve (the one given, when not fitted)."""
    overlay: dict[str, Any]
    warnings: tuple[str, ...]


def fit_memory(
    memory_gib: Callable[[Profile], float], measured_gib: float, profile: Profile
) -> MemoryFit:
    """Fit ``memory_allocator_fragmentation`` so that ``memory_gib(profile)`` (the model's peak
    in the counter the measurement is in: device total for ``calibrate run``) equals
    ``measured_gib``. The reserve multiplies live tensors, so the peak rises with it; a counter it
    does not enter (live tensors alone) cannot be fitted and says so."""
    knob = _fragmentation_knob(profile)
    scale = _solve(
        lambda s: memory_gib(knob.apply(profile, s)),
        measured_gib,
        knob.lowest,
        knob.highest,
        increasing=True,
    )
    if scale is None:
        lo = memory_gib(knob.apply(profile, knob.lowest))
        hi = memory_gib(knob.apply(profile, knob.highest))
        return MemoryFit(
            fitted=None,
            profile=profile,
            overlay={},
            warnings=(
                f"memory not fitted: the measured {measured_gib:.1f} GiB lies outside "
                f"{lo:.1f}-{hi:.1f} GiB, what an allocator reserve of "
                f"{FRAGMENTATION_RANGE[0]:g}-{FRAGMENTATION_RANGE[1]:g}x over the model's live "
                "tensors gives: the model misses or over-counts a tensor term for this run, "
                "which one overhead factor cannot stand for",
            ),
        )
    fitted = Fitted(
        name=knob.name,
        label=knob.label,
        keys=knob.keys,
        before=knob.value,
        after=knob.at(scale),
        why="the only memory parameter: the allocator's reserve multiplies live tensors",
    )
    warnings: tuple[str, ...] = ()
    low, high = FRAGMENTATION_PRACTICE
    if not low <= fitted.after <= high:
        warnings = (
            f"allocator reserve fitted at {fitted.after:.2f}x live tensors, outside the "
            f"{low:g}-{high:g} PyTorch's caching allocator shows: part of the gap is probably "
            "a tensor term the model misses or over-counts, and will not scale like overhead",
        )
    return MemoryFit(
        fitted=fitted,
        profile=knob.apply(profile, scale),
        overlay=knob.overlay(scale),
        warnings=warnings,
    )


def _knob(run: Run, profile: Profile, name: str) -> _Knob:
    return next(k for k in _knobs(run, profile) if k.name == name)


def _apply(
    run: Run, profile: Profile, scales: Mapping[str, float]
) -> tuple[Profile, dict[str, Any], dict[str, float]]:
    """``profile`` with each quantity of ``scales`` moved by its speed factor, the overlay keys
    that write it, and each moved quantity's value after. The knobs are built one after another
    on the profile moved so far (in :data:`QUANTITIES` order), so the fused-attention efficiency,
    which ``compute`` and ``attention`` both scale, takes both factors."""
    moved = profile
    overlay: dict[str, Any] = {}
    after: dict[str, float] = {}
    for name in QUANTITIES:
        if name in scales:
            knob = _knob(run, moved, name)
            moved = knob.apply(moved, scales[name])
            _merge_overlay(overlay, knob.overlay(scales[name]))
            after[name] = knob.at(scales[name])
    return moved, overlay, after


def _posterior(
    run: Run,
    profile: Profile,
    knobs: list[_Knob],
    elasticity: Mapping[str, float],
    step_s: float,
    sigma: Mapping[str, float] = SIGMA,
) -> tuple[dict[str, float] | None, tuple[float, float]]:
    """The speed factors of the posterior rule (module docstring) that reproduce ``step_s``, or
    None when even every quantity at the edge of its range does not; and the steps with every
    quantity at its fastest and at its slowest edge."""
    moved = [k for k in knobs if elasticity[k.name] >= MIN_ELASTICITY]
    weight = {k.name: elasticity[k.name] * sigma[k.name] ** 2 for k in moved}
    edges = {k.name: (math.log(k.lowest), math.log(k.highest)) for k in moved}

    def scales(t: float) -> dict[str, float]:
        return {n: math.exp(min(max(w * t, edges[n][0]), edges[n][1])) for n, w in weight.items()}

    def step_at(t: float) -> float:
        return predict(run, _apply(run, profile, scales(t))[0])[0]

    # Beyond |t| = reach every quantity sits at an edge of its range.
    reach = max((max(-lo, hi) / weight[n] for n, (lo, hi) in edges.items()), default=0.0)
    fastest, slowest = step_at(reach), step_at(-reach)
    if not moved or not fastest <= step_s <= slowest:
        return None, (fastest, slowest)
    # The step falls as t grows (every quantity runs faster): bisection on t.
    lo, hi = -reach, reach
    for _ in range(4 * _BISECTIONS):
        mid = 0.5 * (lo + hi)
        if step_at(mid) > step_s:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(mid)):
            break
    return scales(0.5 * (lo + hi)), (fastest, slowest)


def _refusal(
    run: Run,
    measured: Measured,
    before: float,
    tried: list[tuple[_Knob, float, float]],
    joint: tuple[float, float] | None = None,
) -> InputError:
    """Why no parameter in its physical range reproduces the measurement (``joint``: the steps
    with every quantity at its fastest and at its slowest edge together)."""
    per_gpu = run.tokens_per_step / measured.step_s / run.cluster.num_gpus
    model_per_gpu = run.tokens_per_step / before / run.cluster.num_gpus
    ratio = model_per_gpu / per_gpu
    faster = measured.step_s < before
    reasons = []
    for knob, fastest, slowest in tried:
        edge, step = (knob.highest, fastest) if faster else (knob.lowest, slowest)
        reasons.append(
            f"{knob.label} {knob.at(edge):.3g} gives "
            f"{run.tokens_per_step / step / run.cluster.num_gpus:,.0f}"
        )
    if joint is not None and len(tried) > 1:
        step = joint[0] if faster else joint[1]
        reasons.append(
            f"all of them together give {run.tokens_per_step / step / run.cluster.num_gpus:,.0f}"
        )
    direction = "faster" if faster else "slower"
    return InputError(
        f"the measured {per_gpu:,.0f} tokens/s per GPU is {max(ratio, 1 / ratio):.1f}x {direction} "
        f"than the model's {model_per_gpu:,.0f}, beyond what any parameter in its physical range "
        f"explains ({'; '.join(reasons) or 'no parameter moves this step'}); accepted: the "
        "throughput of all GPUs together (or the step time) of exactly this plan",
        field="measured_tokens_per_s",
    )


def _alone(c: Candidate) -> str:
    """What fitting ``c`` alone would take, in words."""
    if c.needed is None or c.z is None:
        return "alone no value in its range reproduces the run"
    return f"alone it would need {c.needed / c.value - 1.0:+.0%} (z {c.z:.2f})"


def _why(chosen: Candidate, others: list[Candidate], rule: str, share: float) -> str:
    """The rule applied to this run, for one moved quantity, in words."""
    if rule == "only":
        return f"asked for ({chosen.name}); the step's sensitivity to it is {chosen.elasticity:.2f}"
    if rule in ("posterior", "empirical"):
        return (
            f"{share:.0%} of the gap: its part of the step's prior uncertainty, sensitivity "
            f"{chosen.elasticity:.2f} x prior spread +/-{chosen.sigma:.0%}; {_alone(chosen)}"
        )
    move = f"{chosen.needed / chosen.value - 1.0:+.0%}" if chosen.needed else "no move"
    ranked = sorted((c for c in others if c.z is not None), key=lambda c: c.z or 0.0)
    runner = (
        f"; next: {ranked[0].name} would need {ranked[0].needed / ranked[0].value - 1.0:+.0%} "  # type: ignore[operator]
        f"(z {ranked[0].z:.2f})"
        if ranked
        else "; no other quantity in its physical range explains it"
    )
    return (
        f"smallest move relative to its prior spread: {move} of a +/-{chosen.sigma:.0%} "
        f"spread (z {chosen.z:.2f}) at step sensitivity {chosen.elasticity:.2f}{runner}"
    )


def calibrate_run(
    run: Run,
    measured: Measured,
    profile: Profile,
    *,
    only: str | None = None,
    rule: str = "posterior",
    spreads: Mapping[str, float] | None = None,
) -> RunCalibration:
    """Fit ``profile`` to one measured run (see the module docstring for the rule).

    ``rule``: one of :data:`RULES`. ``only``: fit this quantity (one of :data:`QUANTITIES`)
    alone, whatever the rule (for tests and for users who know what differs in their stack).
    ``spreads``: the prior spread of each quantity for ``rule="empirical"`` (required there,
    e.g. :func:`empirical_spreads` of other stacks' runs); the other rules use :data:`SIGMA`."""
    if rule not in RULES:
        raise InputError(f"unknown rule '{rule}'; accepted: {', '.join(RULES)}", field="rule")
    if rule == "empirical":
        if spreads is None or set(spreads) != set(QUANTITIES):
            raise InputError(
                f"rule 'empirical' needs a spread for each of {', '.join(QUANTITIES)}",
                field="spreads",
            )
        if not all(v > 0.0 and math.isfinite(v) for v in spreads.values()):
            raise InputError("every spread must be a positive number", field="spreads")
    sigmas: Mapping[str, float] = spreads if rule == "empirical" and spreads else SIGMA
    before_step, before_memory = predict(run, profile)
    knobs = _knobs(run, profile)
    if only is not None:
        names = [k.name for k in knobs]
        if only not in names:
            raise InputError(
                f"cannot fit '{only}' on this run; accepted: {', '.join(names)}", field="only"
            )

    candidates: list[Candidate] = []
    tried: list[tuple[_Knob, float, float]] = []
    alone: dict[str, float] = {}
    for knob in knobs:
        elasticity = _elasticity(run, profile, knob, before_step)
        sigma = sigmas[knob.name]
        needed = z = None
        if elasticity >= MIN_ELASTICITY or knob.name == only:

            def step_at(s: float, knob: _Knob = knob) -> float:
                return predict(run, knob.apply(profile, s))[0]

            scale = _solve(step_at, measured.step_s, knob.lowest, knob.highest, increasing=False)
            if scale is None:
                tried.append((knob, step_at(knob.highest), step_at(knob.lowest)))
            else:
                alone[knob.name] = scale
                needed, z = knob.at(scale), abs(math.log(scale)) / sigma
        candidates.append(
            Candidate(
                name=knob.name,
                label=knob.label,
                value=knob.value,
                elasticity=elasticity,
                lowest_scale=knob.lowest,
                highest_scale=knob.highest,
                sigma=sigma,
                needed=needed,
                z=z,
            )
        )
    by_name = {c.name: c for c in candidates}
    solvable = [c for c in candidates if c.z is not None]
    # Smallest move in prior spreads; on a tie (a run the profile already matches) the quantity
    # the step is most sensitive to.
    smallest = min(solvable, key=lambda c: (round(c.z or 0.0, 9), -c.elasticity), default=None)
    applied = "only" if only is not None else rule
    scales: dict[str, float] | None
    if only is not None:
        scales = {only: alone[only]} if only in alone else None
    elif rule == "smallest_move":
        scales = {smallest.name: alone[smallest.name]} if smallest is not None else None
    else:
        elasticities = {c.name: c.elasticity for c in candidates}
        scales, joint = _posterior(run, profile, knobs, elasticities, measured.step_s, sigmas)
        if scales is None:
            raise _refusal(run, measured, before_step, tried, joint)
    if scales is None:
        raise _refusal(run, measured, before_step, tried)
    also = tuple(
        c
        for c in candidates
        if only is None
        and smallest is not None
        and c is not smallest
        and c.z is not None
        and c.z <= (smallest.z or 0.0) + AMBIGUOUS_Z
    )

    fitted_profile, overlay, after = _apply(run, profile, scales)
    # Each quantity's part of the change of ln(step), to first order; a run the profile already
    # matches takes the split the rule would give a small gap.
    contribution = {n: by_name[n].elasticity * math.log(s) for n, s in scales.items()}
    prior = {n: (by_name[n].elasticity * by_name[n].sigma) ** 2 for n in scales}
    total = sum(contribution.values())
    shares = (
        {n: c / total for n, c in contribution.items()}
        if total != 0.0
        else {n: v / (sum(prior.values()) or 1.0) for n, v in prior.items()}
    )
    throughput = tuple(
        sorted(
            (
                Fitted(
                    name=n,
                    label=by_name[n].label,
                    keys=_knob(run, profile, n).keys,
                    before=by_name[n].value,
                    after=after[n],
                    elasticity=by_name[n].elasticity,
                    sigma=by_name[n].sigma,
                    z=abs(math.log(s)) / by_name[n].sigma,
                    why=_why(by_name[n], [c for c in candidates if c.name != n], applied, shares[n])
                    + (
                        "; its value also takes compute's factor"
                        if n == "attention" and "compute" in scales
                        else ""
                    ),
                    share=shares[n],
                )
                for n, s in scales.items()
            ),
            key=lambda f: -(f.share or 0.0),
        )
    )
    warnings = [
        f"{f.label} moved {f.after / f.before:.2f}x ({f.before:.3g} -> {f.after:.3g}): "
        "check that the measurement is of all GPUs together and that the plan flags "
        "(--gpus, --gbs, --mbs, --tp, --pp, --recompute, --zero) are the run's"
        for f in throughput
        if not 1.0 / WARN_FACTOR <= scales[f.name] <= WARN_FACTOR
    ]

    memory = None
    after_memory = predict(run, fitted_profile)[1]
    if measured.memory_gib is not None:
        mem = fit_memory(lambda p: predict(run, p)[1], measured.memory_gib, fitted_profile)
        warnings.extend(mem.warnings)
        if mem.fitted is not None:
            memory = mem.fitted
            fitted_profile = mem.profile
            _merge_overlay(overlay, mem.overlay)
            after_memory = predict(run, fitted_profile)[1]
    after_step = predict(run, fitted_profile)[0]
    return RunCalibration(
        rule=applied,
        throughput=throughput,
        memory=memory,
        candidates=tuple(candidates),
        also_consistent=also,
        measured_step_s=measured.step_s,
        predicted_step_s_before=before_step,
        predicted_step_s_after=after_step,
        measured_memory_gib=measured.memory_gib,
        predicted_memory_gib_before=before_memory,
        predicted_memory_gib_after=after_memory,
        profile=fitted_profile,
        overlay=overlay,
        warnings=tuple(warnings),
    )


METHODS: dict[str, str] = {
    "posterior": (
        "gpuscale calibrate run: one measured run; the gap split between the quantities the step "
        "depends on in proportion to their part of its prior uncertainty (posterior mean), "
        "reproducing the run exactly"
    ),
    "smallest_move": (
        "gpuscale calibrate run: one measured run, one quantity (the one that explains it with "
        "the smallest move relative to its prior spread)"
    ),
    "empirical": (
        "gpuscale calibrate run: one measured run; the gap split as the posterior does, with prior "
        "spreads estimated from other stacks' published runs (empirical Bayes)"
    ),
    "only": "gpuscale calibrate run: one measured run, the one quantity asked for (--fit)",
}
"""The ``fit.method`` line of the profile file, per rule."""


def fitted_entry(f: Fitted) -> dict[str, Any]:
    """One fitted parameter as the ``fit:`` block and ``--json`` write it."""
    return {
        "parameter": f.name,
        "label": f.label,
        "keys": list(f.keys),
        "before": f.before,
        "after": f.after,
        "change": f.change,
        "share": f.share,
        "why": f.why,
    }


def candidate_entry(c: Candidate) -> dict[str, Any]:
    """One candidate quantity: its sensitivity, prior spread and the value that would explain
    the run (None: none in its physical range, or the step hardly depends on it)."""
    return {
        "parameter": c.name,
        "label": c.label,
        "elasticity": round(c.elasticity, 4),
        "sigma": c.sigma,
        "before": c.value,
        "needed": c.needed,
        "z": None if c.z is None else round(c.z, 4),
    }


def profile_document(
    cal: RunCalibration,
    run: Run,
    *,
    name: str,
    framework: str,
    start: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The profile file: ``schema_version``, provenance, a ``fit:`` block, then the keys of the
    ``start`` overlay (a ``--profile`` the run was estimated with) with the fitted ones on top.
    Laid over ``framework`` (``--framework F --profile FILE``) it reproduces the measured run."""
    fitted = [*cal.throughput, *([cal.memory] if cal.memory else [])]
    device = run.cluster.pace_device
    keys: dict[str, Any] = {}
    for key, value in (start or {}).items():
        if key not in ("schema_version", "name", "base", "description", "source", "fit"):
            keys[key] = dict(value) if isinstance(value, Mapping) else value
    _merge_overlay(keys, cal.overlay)
    keys["measured_on"] = {
        **dict(keys.get("measured_on") or {}),
        "device": device.id,
        "gpus": run.cluster.num_gpus,
        "inter": run.cluster.inter.id,
    }
    fit = {
        "method": METHODS[cal.rule],
        "rule": cal.rule,
        **dict(provenance or {}),
        "measured_step_s": cal.measured_step_s,
        "measured_tokens_per_s": run.tokens_per_step / cal.measured_step_s,
        "measured_memory_gib": cal.measured_memory_gib,
        "predicted_step_s_before": cal.predicted_step_s_before,
        "predicted_step_s_after": cal.predicted_step_s_after,
        "fitted": [fitted_entry(f) for f in fitted],
        "identifiable": cal.identifiable,
        "also_consistent": [c.name for c in cal.also_consistent],
        "elasticity": {c.name: round(c.elasticity, 4) for c in cal.candidates},
        "candidates": [candidate_entry(c) for c in cal.candidates],
    }
    return {
        "schema_version": PROFILE_SCHEMA_VERSION,
        "name": name,
        "base": framework,
        "description": (
            f"'{framework}' calibrated to one measured run of {run.model.name} on "
            f"{run.cluster.num_gpus} x {device.id}; use with --framework {framework} --profile"
        ),
        "source": "gpuscale calibrate run (the fit: block says which run and what moved)",
        "fit": fit,
        **keys,
    }
