"""Calibrate a profile from one measured training run of the user's own stack.

One measured number can pin down one parameter, so the fit moves exactly one throughput
parameter, chosen by a stated rule, and (when a peak memory is also given) one memory parameter:

- **Which throughput parameter.** Each candidate is scaled by -2% and the change of the predicted
  step is measured: its *elasticity* ``-d ln(step) / d ln(parameter)``. The candidate the step is
  most sensitive to is fitted (a compute-bound step moves with the compute efficiency, a step
  dominated by exposed inter-node communication with that network's bandwidth efficiency; hidden
  communication has elasticity 0, so it is never blamed). Candidates that move the step by less
  than :data:`MIN_ELASTICITY` are never fitted: explaining a measurement with them would take an
  implausible change. When the most sensitive candidate would have to leave its physical range,
  the next one is tried; when none can, the measurement is refused.
- **Candidates**: ``compute`` (one multiplicative scale on this GPU's GEMM efficiency curve at the
  run's precision, the 16-bit curve too, and its fused-attention efficiency: the tensor-core
  kernels), ``inter`` (bandwidth efficiency of the network between nodes), ``intra`` (of the
  NVLink/PCIe level inside a node). Memory: ``memory_allocator_fragmentation``, the caching
  allocator's reserve over live tensors, the framework's memory overhead that multiplies: the
  model's reserved peak is it times the allocated peak (with the layer blocks the allocator keeps
  cached where backward is the peak; :func:`gpuscale.costmodel.memory.training_memory`), and the
  measured device peak is that plus the CUDA context and NCCL buffers, so the fit is monotone.
- The fitted values are written as an *overlay* profile (only the keys that moved, under this
  GPU's own ids so other GPUs are unaffected) with a ``fit:`` block saying what run it came from,
  what was fitted, and its value before and after.

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
from gpuscale.specs import Cluster, JobOptions, ModelSpec, Plan, Training

MIN_EFFICIENCY = 0.05
"""Lowest efficiency a fitted parameter may take. The generic profile's GEMM curves start at
0.02-0.05 for a 1e8-FLOP GEMM (a few microseconds of work): a whole step's kernels running
slower than that are not slow GEMMs or links but something outside the model (host-bound steps,
a stalled input pipeline, a measurement of one GPU instead of all)."""

MAX_EFFICIENCY = 1.0
"""An efficiency is achieved / rated: above 1 the GPU or link would beat its datasheet."""

MIN_ELASTICITY = 0.05
"""A parameter that moves the step by under 0.05% per 1% change would need to move 20x further
than the measurement's error to explain it: such a parameter is not what is off."""

WARN_FACTOR = 2.0
"""A fitted parameter moved by more than this factor from the profile's value: the measurement
or the run's flags (GPUs, batch, plan) are probably not what was measured."""

FRAGMENTATION_RANGE = (1.0, 4.0)
"""Reserved / allocated of PyTorch's caching allocator is >= 1 by construction; far above the
1.05-1.20 seen in practice (generic.yaml) the gap is a missing term, not allocator slack."""

FRAGMENTATION_WARN = 1.5
"""Above this the memory fit is kept but flagged (see :data:`FRAGMENTATION_RANGE`)."""

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
    """A throughput parameter the fit may move, with how much the step depends on it."""

    name: str
    """``compute``, ``inter`` or ``intra``."""
    label: str
    """In words, for the output (``compute efficiency``)."""
    value: float
    """The profile's value before the fit (plateau GEMM efficiency; link bandwidth efficiency,
    or GB/s when the profile gives the link an absolute measured rate)."""
    elasticity: float
    """``-d ln(step) / d ln(parameter)`` at the profile's value."""
    lowest_scale: float
    highest_scale: float
    """The physical range of the parameter, as a factor on ``value``."""


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

    @property
    def change(self) -> float:
        return self.after / self.before - 1.0


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCalibration:
    """The outcome of :func:`calibrate_run`: the fitted profile and how it reproduces the run."""

    throughput: Fitted
    memory: Fitted | None
    candidates: tuple[Candidate, ...]
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


# --- the candidates -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Knob:
    """How to scale one parameter of a profile: the new profile and the YAML keys for it."""

    name: str
    label: str
    value: float
    lowest: float
    highest: float
    apply: Callable[[Profile, float], Profile]
    overlay: Callable[[float], dict[str, Any]]
    keys: tuple[str, ...]


def _compute_knob(run: Run, profile: Profile) -> _Knob:
    device = run.cluster.pace_device
    precisions: list[str] = [run.training.precision]
    if device.half_precision not in precisions:
        # The LM head (FP8 recipes) and unfused attention run on the 16-bit curve.
        precisions.append(device.half_precision)
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

    return _Knob(
        name="compute",
        label="compute efficiency",
        value=plateau,
        lowest=MIN_EFFICIENCY / plateau,
        highest=MAX_EFFICIENCY / top,
        apply=apply,
        overlay=overlay,
        keys=(*(f"gemm.{k}" for k in curves), f"attention_efficiency.{device.id}"),
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
    return _Knob(
        name=level,
        label=f"{link.id} bandwidth {'(GB/s)' if absolute else 'efficiency'} {where}",
        value=value,
        lowest=floor / value,
        highest=ceiling / value,
        apply=apply,
        overlay=overlay,
        keys=(f"links.{level}",),
    )


def _fragmentation_knob(profile: Profile) -> _Knob:
    name = "memory_allocator_fragmentation"
    value = profile.const(name)

    def apply(p: Profile, s: float) -> Profile:
        return replace(p, constants={**p.constants, name: value * s})

    def overlay(s: float) -> dict[str, Any]:
        return {"constants": {name: value * s}}

    return _Knob(
        name="memory",
        label="allocator reserve over live tensors",
        value=value,
        lowest=FRAGMENTATION_RANGE[0] / value,
        highest=FRAGMENTATION_RANGE[1] / value,
        apply=apply,
        overlay=overlay,
        keys=(f"constants.{name}",),
    )


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


def _candidate(knob: _Knob, elasticity: float) -> Candidate:
    return Candidate(
        name=knob.name,
        label=knob.label,
        value=knob.value,
        elasticity=elasticity,
        lowest_scale=knob.lowest,
        highest_scale=knob.highest,
    )


def _merge_overlay(out: dict[str, Any], part: Mapping[str, Any]) -> None:
    for key, value in part.items():
        if isinstance(value, Mapping):
            out.setdefault(key, {}).update(value)
        else:
            out[key] = value


def _refusal(
    run: Run, measured: Measured, before: float, tried: list[tuple[_Knob, float, float]]
) -> InputError:
    """Why no parameter in its physical range reproduces the measurement."""
    per_gpu = run.tokens_per_step / measured.step_s / run.cluster.num_gpus
    model_per_gpu = run.tokens_per_step / before / run.cluster.num_gpus
    ratio = model_per_gpu / per_gpu
    faster = measured.step_s < before
    reasons = []
    for knob, fastest, slowest in tried:
        edge, step = (knob.highest, fastest) if faster else (knob.lowest, slowest)
        reasons.append(
            f"{knob.label} {knob.value * edge:.3g} gives "
            f"{run.tokens_per_step / step / run.cluster.num_gpus:,.0f}"
        )
    direction = "faster" if faster else "slower"
    return InputError(
        f"the measured {per_gpu:,.0f} tokens/s per GPU is {max(ratio, 1 / ratio):.1f}x {direction} "
        f"than the model's {model_per_gpu:,.0f}, beyond what any parameter in its physical range "
        f"explains ({'; '.join(reasons) or 'no parameter moves this step'}); accepted: the "
        "throughput of all GPUs together (or the step time) of exactly this plan",
        field="measured_tokens_per_s",
    )


def calibrate_run(
    run: Run, measured: Measured, profile: Profile, *, only: str | None = None
) -> RunCalibration:
    """Fit ``profile`` to one measured run (see the module docstring for the rule).

    ``only``: fit this candidate (``compute``, ``inter``, ``intra``) instead of choosing by
    elasticity (for tests and for users who know what differs in their stack)."""
    before_step, before_memory = predict(run, profile)
    knobs = [_compute_knob(run, profile)]
    if run.cluster.num_gpus > run.cluster.gpus_per_node:
        knobs.append(_link_knob(run, profile, "inter"))
    if run.cluster.num_gpus > 1:
        knobs.append(_link_knob(run, profile, "intra"))
    candidates = [_candidate(k, _elasticity(run, profile, k, before_step)) for k in knobs]
    order = sorted(
        zip(knobs, candidates, strict=True), key=lambda kc: kc[1].elasticity, reverse=True
    )
    if only is not None:
        order = [kc for kc in order if kc[0].name == only]
        if not order:
            raise InputError(
                f"cannot fit '{only}' on this run; accepted: {', '.join(k.name for k in knobs)}",
                field="only",
            )
    else:
        order = [kc for kc in order if kc[1].elasticity >= MIN_ELASTICITY]

    chosen: tuple[_Knob, Candidate, float] | None = None
    tried: list[tuple[_Knob, float, float]] = []
    for knob, cand in order:

        def step_at(s: float, knob: _Knob = knob) -> float:
            return predict(run, knob.apply(profile, s))[0]

        scale = _solve(step_at, measured.step_s, knob.lowest, knob.highest, increasing=False)
        if scale is not None:
            chosen = (knob, cand, scale)
            break
        tried.append((knob, step_at(knob.highest), step_at(knob.lowest)))
    if chosen is None:
        raise _refusal(run, measured, before_step, tried)

    knob, cand, scale = chosen
    fitted_profile = knob.apply(profile, scale)
    overlay: dict[str, Any] = {}
    _merge_overlay(overlay, knob.overlay(scale))
    throughput = Fitted(
        name=knob.name,
        label=knob.label,
        keys=knob.keys,
        before=knob.value,
        after=knob.value * scale,
        elasticity=cand.elasticity,
    )
    warnings = []
    if not 1.0 / WARN_FACTOR <= scale <= WARN_FACTOR:
        warnings.append(
            f"{knob.label} moved {scale:.2f}x ({knob.value:.3g} -> {knob.value * scale:.3g}): "
            "check that the measurement is of all GPUs together and that the plan flags "
            "(--gpus, --gbs, --mbs, --tp, --pp, --recompute, --zero) are the run's"
        )

    memory = None
    after_memory = predict(run, fitted_profile)[1]
    if measured.memory_gib is not None:
        mem_knob = _fragmentation_knob(fitted_profile)
        mem_scale = _solve(
            lambda s: predict(run, mem_knob.apply(fitted_profile, s))[1],
            measured.memory_gib,
            mem_knob.lowest,
            mem_knob.highest,
            increasing=True,
        )
        if mem_scale is None:
            lo = predict(run, mem_knob.apply(fitted_profile, mem_knob.lowest))[1]
            hi = predict(run, mem_knob.apply(fitted_profile, mem_knob.highest))[1]
            warnings.append(
                f"memory not fitted: the measured {measured.memory_gib:.1f} GiB lies outside "
                f"{lo:.1f}-{hi:.1f} GiB, what an allocator reserve of "
                f"{FRAGMENTATION_RANGE[0]:g}-{FRAGMENTATION_RANGE[1]:g}x over the model's live "
                "tensors gives: the model misses or over-counts a tensor term for this run, "
                "which one overhead factor cannot stand for"
            )
        else:
            fitted_profile = mem_knob.apply(fitted_profile, mem_scale)
            _merge_overlay(overlay, mem_knob.overlay(mem_scale))
            after_memory = predict(run, fitted_profile)[1]
            memory = Fitted(
                name=mem_knob.name,
                label=mem_knob.label,
                keys=mem_knob.keys,
                before=mem_knob.value,
                after=mem_knob.value * mem_scale,
            )
            if memory.after > FRAGMENTATION_WARN:
                warnings.append(
                    f"allocator reserve fitted at {memory.after:.2f}x live tensors, above the "
                    "1.05-1.20 PyTorch's caching allocator shows: part of the gap is probably "
                    "a tensor term the model misses, and will not scale like overhead"
                )
    after_step = predict(run, fitted_profile)[0]
    return RunCalibration(
        throughput=throughput,
        memory=memory,
        candidates=tuple(candidates),
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
    fitted = [cal.throughput, *([cal.memory] if cal.memory else [])]
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
        "method": "gpuscale calibrate run: one measured run, one parameter per measured number",
        **dict(provenance or {}),
        "measured_step_s": cal.measured_step_s,
        "measured_tokens_per_s": run.tokens_per_step / cal.measured_step_s,
        "measured_memory_gib": cal.measured_memory_gib,
        "predicted_step_s_before": cal.predicted_step_s_before,
        "predicted_step_s_after": cal.predicted_step_s_after,
        "fitted": [
            {
                "parameter": f.name,
                "label": f.label,
                "keys": list(f.keys),
                "before": f.before,
                "after": f.after,
                "change": f.change,
            }
            for f in fitted
        ],
        "elasticity": {c.name: round(c.elasticity, 4) for c in cal.candidates},
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
