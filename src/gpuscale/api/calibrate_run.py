"""``gpuscale.api.calibrate_run``: fit a profile to one measured training run of your own stack.

The run is described with ``estimate``'s arguments; the measurement is the job's tokens/s (all
GPUs together) or its step time, optionally its peak memory per GPU. The answer says which
physical quantities moved, how far, what share of the gap each took and why, and whether the run
could tell them apart, and carries the profile to pass back with ``profile=`` (``--profile``
on the command line) to predict other plans and scales of the same stack.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuscale import SCHEMA_VERSION, files
from gpuscale.api.training import (
    ModelArg,
    TrainingRun,
    plan_document,
    takes_training_run,
    training_run,
    training_settings,
)
from gpuscale.costmodel.profile import load_profile, load_training_profile
from gpuscale.errors import InputError, require
from gpuscale.planner import calibrate_run as library
from gpuscale.planner.calibrate_run import (
    QUANTITIES,
    Measured,
    Run,
    RunCalibration,
    predict,
    profile_document,
)
from gpuscale.specs import Plan

__all__ = ["QUANTITIES", "CalibrateRunResult", "calibrate_run", "profile_yaml"]


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrateRunResult:
    """What ``gpuscale calibrate run`` answers: the fitted parameters and the profile."""

    model: str
    gpu: str
    gpus: int
    gpus_per_node: int
    inter: str
    framework: str
    start_profile: str
    """Name of the profile the fit started from: ``framework``'s, or the ``profile=`` file laid
    over it (what ``estimate`` reports as ``profile``)."""
    seq: int
    precision: str
    finetune: str
    compile: bool
    plan: Plan
    """The run's parallel plan, the defaults chosen (``assumed``) filled in."""
    training: Mapping[str, Any]
    """What the run was priced with beyond the plan (:func:`training_settings`: the recompute
    modules, the loss, the gradient word, the offloaded layers, the EP overlap), as ``estimate``
    echoes them."""
    measured_tokens_per_s: float
    measured_step_s: float
    measured_memory_gib: float | None
    predicted_tokens_per_s_before: float
    predicted_tokens_per_s_after: float
    predicted_memory_gib_before: float
    predicted_memory_gib_after: float
    rule: str
    """How the gap was attributed: ``posterior`` (split between the quantities the step depends
    on by their part of its prior uncertainty) or ``only`` (the one quantity asked for)."""
    fitted: tuple[dict[str, Any], ...]
    """``parameter``, ``label``, ``keys``, ``before``, ``after``, ``change``, ``share`` (of the
    throughput gap; None for memory), ``why`` of each fitted value, largest share first."""
    identifiable: bool
    """False when several quantities each explain the run alone about as plausibly
    (``also_consistent``): one run cannot tell them apart."""
    also_consistent: tuple[str, ...]
    elasticity: dict[str, float]
    """``|d ln(step)/d ln(quantity)|`` of each candidate quantity."""
    candidates: tuple[dict[str, Any], ...]
    """Every candidate: ``parameter``, ``label``, ``elasticity``, ``sigma`` (prior spread),
    ``before``, ``needed`` (the value that would explain the run alone) and ``z`` (that move in
    prior spreads); the rule fits the smallest ``z``."""
    profile: dict[str, Any]
    """The profile document (``written`` holds where it went)."""
    written: str | None
    warnings: tuple[str, ...]
    assumed: dict[str, str] = field(default_factory=dict)
    """Argument -> the default chosen for it and why (as ``estimate`` reports it)."""

    @property
    def summary(self) -> list[str]:
        """One line per fitted parameter: ``compute efficiency 0.74 -> 0.69 (-7%), 55% of the
        gap to 1,047 tokens/s per GPU`` (``to match ...`` when it took all of it)."""
        lines = []
        for f in self.fitted:
            if f["parameter"] == "memory":
                target = f"to match {self.measured_memory_gib:.1f} GiB per GPU"
            else:
                per_gpu = f"{self.measured_tokens_per_s / self.gpus:,.0f} tokens/s per GPU"
                share = f["share"] if f["share"] is not None else 1.0
                target = (
                    f"to match {per_gpu}"
                    if math.isclose(share, 1.0)
                    else f"{share:.0%} of the gap to {per_gpu}"
                )
            lines.append(
                f"{f['label']} {f['before']:.3g} -> {f['after']:.3g} ({f['change']:+.0%}), {target}"
            )
        return lines

    @property
    def explanation(self) -> list[str]:
        """Why each value moved as it did, and what the run cannot tell apart."""
        lines = [f"{f['parameter']}: {f['why']}" for f in self.fitted]
        if not self.identifiable:
            alone = [c for c in self.candidates if c["z"] is not None]
            first = min(alone, key=lambda c: c["z"])["parameter"]
            names = [first, *self.also_consistent]
            apart = dict.fromkeys(_SEPARATES[n] for n in names if n in _SEPARATES)
            split = "so the gap is split between them; " if self.rule == "posterior" else ""
            lines.append(
                "not identifiable from this run alone: "
                + ", ".join(names)
                + " each explain it within one prior spread of the others, "
                + split
                + "a second run that differs in "
                + " or ".join(apart)
                + " tells them apart"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "model": self.model,
            "gpu": self.gpu,
            "gpus": self.gpus,
            "gpus_per_node": self.gpus_per_node,
            "inter": self.inter,
            "framework": self.framework,
            "start_profile": self.start_profile,
            "seq": self.seq,
            "precision": self.precision,
            "finetune": self.finetune,
            "compile": self.compile,
            "plan": plan_document(self.plan),
            **self.training,
            "measured_tokens_per_s": self.measured_tokens_per_s,
            "measured_step_s": self.measured_step_s,
            "measured_memory_gib": self.measured_memory_gib,
            "predicted_tokens_per_s_before": self.predicted_tokens_per_s_before,
            "predicted_tokens_per_s_after": self.predicted_tokens_per_s_after,
            "predicted_memory_gib_before": self.predicted_memory_gib_before,
            "predicted_memory_gib_after": self.predicted_memory_gib_after,
            "rule": self.rule,
            "fitted": [dict(f) for f in self.fitted],
            "summary": self.summary,
            "explanation": self.explanation,
            "identifiable": self.identifiable,
            "also_consistent": list(self.also_consistent),
            "elasticity": dict(self.elasticity),
            "candidates": [dict(c) for c in self.candidates],
            "profile": self.profile,
            "written": self.written,
            "warnings": list(self.warnings),
            "assumed": dict(self.assumed),
        }

    def figures(self) -> list[Any]:
        import plotly.graph_objects as go

        per_gpu = 1.0 / self.gpus
        fig = go.Figure(
            go.Bar(
                x=["model before", "measured", "model after"],
                y=[
                    self.predicted_tokens_per_s_before * per_gpu,
                    self.measured_tokens_per_s * per_gpu,
                    self.predicted_tokens_per_s_after * per_gpu,
                ],
            )
        )
        fig.update_layout(
            title=f"{self.model} on {self.gpus} x {self.gpu}: calibrated to one run",
            yaxis_title="tokens/s per GPU",
        )
        return [fig]

    def yaml(self) -> str:
        """The profile as the file ``output=`` writes."""
        return profile_yaml(self.profile)


_SEPARATES = {
    "compute": "model width",
    "attention": "sequence length",
    "memory_bound": "model width",
    "host": "micro-batch size",
    "inter": "node count",
    "intra": "tensor-parallel size",
}
"""What a second run should change to separate a quantity from the others: the plan feature
its share of the step moves with."""


def profile_yaml(doc: dict[str, Any]) -> str:
    header = (
        "# gpuscale calibration profile (schema in gpuscale/costmodel/profile.py), fitted to one\n"
        "# measured run by 'gpuscale calibrate run'; 'fit' says which run and what moved.\n"
    )
    return header + yaml.safe_dump(doc, sort_keys=False, width=100, default_flow_style=None)


def _positive(value: float | None, field: str) -> float | None:
    if value is None:
        return None
    flag = "--" + field.replace("_", "-")
    require(
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
        f"{flag} must be a finite number, got {value!r}",
        field=field,
    )
    require(value > 0, f"{flag} must be > 0, got {value:g}", field=field)
    return float(value)


@takes_training_run
def calibrate_run(
    model: ModelArg | TrainingRun,
    *,
    measured_tokens_per_s: float | None = None,
    measured_step_s: float | None = None,
    measured_memory_gib: float | None = None,
    framework: str = "generic",
    profile: str | None = None,
    name: str | None = None,
    output: str | None = None,
    only: str | None = None,
    **run_fields: Any,
) -> CalibrateRunResult:
    """Fit the ``framework`` profile (with ``profile`` laid over it, as ``estimate`` reads them)
    to one measured run, described as :func:`gpuscale.api.estimate` takes it (``model`` and the
    fields of :class:`gpuscale.api.training.TrainingRun`, or a whole ``TrainingRun``): ``measured_tokens_per_s`` of all GPUs together or ``measured_step_s``
    (exactly one), and optionally ``measured_memory_gib``, the peak of the busiest GPU. Writes the
    profile to ``output`` when given. The gap is split between the quantities the step depends
    on in proportion to their part of its prior uncertainty
    (:mod:`gpuscale.planner.calibrate_run`); ``only``: fit this quantity (one of
    :data:`gpuscale.planner.calibrate_run.QUANTITIES`) alone instead."""
    tokens = _positive(measured_tokens_per_s, "measured_tokens_per_s")
    step = _positive(measured_step_s, "measured_step_s")
    memory = _positive(measured_memory_gib, "measured_memory_gib")
    require(
        (tokens is None) != (step is None),
        "give exactly one of --measured-tokens-per-s (all GPUs together) and --measured-step-s",
        field="measured_tokens_per_s",
    )
    require(
        name is None or (bool(name.strip()) and name == name.strip()),
        f"--name {name!r} is empty or padded; accepted: a name such as 'my-cluster'",
        field="name",
    )
    # checked before any work (gpuscale.files: an existing folder, never created)
    out = None if output is None else files.output_path(output, label="-o", field="output")
    require(
        profile is None or Path(profile).is_file(),
        f"--profile {profile!r} is not a file; accepted: a profile YAML to calibrate on top of "
        "(a built-in profile goes in --framework)",
        field="profile",
    )
    inputs = training_run(model, run_fields).specs
    run = Run(
        model=inputs.model,
        cluster=inputs.cluster,
        training=inputs.training,
        plan=inputs.plan,
        job=inputs.job,
    )
    device = run.cluster.pace_device
    if memory is not None:
        capacity = min(run.cluster.device.memory_bytes, device.memory_bytes) / 2**30
        require(
            memory <= capacity,
            f"--measured-memory-gib {memory:g} exceeds the {capacity:.1f} GiB of a {device.id}; "
            "accepted: the peak one GPU held, in GiB",
            field="measured_memory_gib",
        )
    step_s = step if step is not None else run.tokens_per_step / float(tokens)  # type: ignore[arg-type]
    start = load_training_profile(framework, profile)
    try:
        cal: RunCalibration = library.calibrate_run(
            run, Measured(step_s=step_s, memory_gib=memory), start, only=only
        )
    except InputError as exc:
        if exc.field != "measured_tokens_per_s" or step is None:
            raise
        # The figure the user gave is the step time: name its flag, not the throughput's.
        raise InputError(str(exc), field="measured_step_s") from None

    start_keys: dict[str, Any] = {}
    if profile is not None:
        text = files.read_text(profile, label="--profile", field="profile")
        start_keys = dict(yaml.safe_load(text) or {})
    label = name or f"{framework}-{run.model.name}-{device.id}-calibrated".replace("/", "-")
    given = {"tokens_per_s": tokens, "step_s": step}
    doc = profile_document(
        cal,
        run,
        name=label,
        framework=framework,
        start=start_keys,
        provenance={
            "run": _describe(run, framework, profile),
            "measured": {k: v for k, v in given.items() if v is not None},
        },
    )
    written = None
    if out is not None:
        files.write_text(out, profile_yaml(doc), label="-o", field="output")
        # What was written must read back and reproduce the measurement.
        load_profile.cache_clear()
        reread = load_training_profile(framework, str(out))
        again, _ = predict(run, reread)
        if not math.isclose(again, cal.predicted_step_s_after, rel_tol=1e-6):
            raise RuntimeError(f"{out} predicts {again} s, the fit {cal.predicted_step_s_after} s")
        written = str(out)
    fitted = doc["fit"]["fitted"]
    return CalibrateRunResult(
        model=run.model.name,
        gpu=device.id,
        gpus=run.cluster.num_gpus,
        gpus_per_node=run.cluster.gpus_per_node,
        inter=run.cluster.inter.id,
        framework=framework,
        start_profile=start.name,
        seq=run.training.seq_len,
        precision=run.training.precision,
        finetune=run.training.finetune,
        compile=run.training.compile,
        plan=run.plan,
        training=training_settings(run.training, run.plan),
        measured_tokens_per_s=run.tokens_per_step / step_s,
        measured_step_s=step_s,
        measured_memory_gib=memory,
        predicted_tokens_per_s_before=run.tokens_per_step / cal.predicted_step_s_before,
        predicted_tokens_per_s_after=run.tokens_per_step / cal.predicted_step_s_after,
        predicted_memory_gib_before=cal.predicted_memory_gib_before,
        predicted_memory_gib_after=cal.predicted_memory_gib_after,
        rule=cal.rule,
        fitted=tuple(fitted),
        identifiable=cal.identifiable,
        also_consistent=tuple(c.name for c in cal.also_consistent),
        elasticity=dict(doc["fit"]["elasticity"]),
        candidates=tuple(doc["fit"]["candidates"]),
        profile=doc,
        written=written,
        warnings=cal.warnings,
        assumed=dict(inputs.assumed),
    )


def _describe(run: Run, framework: str, profile: str | None) -> dict[str, Any]:
    """The run in estimate's flag names, so the ``fit:`` block can be replayed; the plan in
    the one spelling ``estimate`` and ``calibrate run`` echo (:func:`plan_document`)."""
    t, c = run.training, run.cluster
    return {
        "model": run.model.name,
        "gpu": c.device.id,
        "gpus": c.num_gpus,
        "gpus_per_node": c.gpus_per_node,
        "inter": c.inter.id,
        "nics_per_node": c.nics_per_node,
        **plan_document(run.plan),
        "seq": t.seq_len,
        "precision": t.precision,
        "finetune": t.finetune,
        **training_settings(t, run.plan),
        "framework": framework,
        "profile": profile,
    }
