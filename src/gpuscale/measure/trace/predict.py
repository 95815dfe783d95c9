"""Hold the measured step against the cost model's prediction and say which assumption broke.

The prediction is the JSON document of ``gpuscale estimate ... --json`` (DESIGN.md contract:
``step_time_s`` and ``breakdown`` in seconds with ``compute``, ``exposed_comm``, ``bubble``,
``optimizer``, ``other`` and optionally ``data``, ``checkpoint``). The comparison is on shares of
the step, so a trace of a smaller run than the plan still tells which part is out of proportion,
and on seconds where the ratio itself is the finding (achieved bandwidth, achieved compute rate).
Seconds are only compared when they can mean the same thing: a CPU timeline held against a
prediction for a GPU is compared on shares alone, with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import files
from gpuscale.errors import InputError
from gpuscale.measure.trace.rank import RankResult

REQUIRED_BREAKDOWN = ("compute", "exposed_comm", "bubble", "optimizer", "other")


@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    step_time_s: float
    breakdown_s: dict[str, float]
    source: str
    gpu: str | None = None
    """The device the prediction is for (``gpu`` of the estimate document), if it names one."""

    def share(self, *names: str) -> float:
        return sum(self.breakdown_s.get(n, 0.0) for n in names) / self.step_time_s

    def seconds(self, *names: str) -> float:
        return sum(self.breakdown_s.get(n, 0.0) for n in names)


def prediction_from_document(doc: Any, source: str) -> Prediction:
    """Validate an ``estimate --json`` document (or a list holding one)."""
    if isinstance(doc, list) and len(doc) == 1:
        doc = doc[0]
    accepted = (
        "expected the JSON of `gpuscale estimate ... --json` "
        "(step_time_s and breakdown {compute, exposed_comm, bubble, optimizer, other})"
    )
    if not isinstance(doc, Mapping):
        raise InputError(f"{source}: not a JSON object; {accepted}")
    step = doc.get("step_time_s")
    parts = doc.get("breakdown")
    if not isinstance(step, (int, float)) or isinstance(step, bool) or not step > 0:
        raise InputError(f"{source}: no positive step_time_s; {accepted}")
    if not isinstance(parts, Mapping):
        raise InputError(f"{source}: no breakdown object; {accepted}")
    missing = [k for k in REQUIRED_BREAKDOWN if k not in parts]
    if missing:
        raise InputError(f"{source}: breakdown lacks {', '.join(missing)}; {accepted}")
    values: dict[str, float] = {}
    for key, value in parts.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            values[str(key)] = float(value)
        elif key in REQUIRED_BREAKDOWN:
            raise InputError(f"{source}: breakdown.{key} must be seconds >= 0, got {value!r}")
    gpu = doc.get("gpu")
    return Prediction(
        step_time_s=float(step),
        breakdown_s=values,
        source=source,
        gpu=gpu if isinstance(gpu, str) and gpu else None,
    )


def device_mismatch(trace_device: str, prediction: Prediction) -> str | None:
    """Why the trace's seconds cannot be held against the prediction's, or None if they can."""
    if trace_device == "cpu" and prediction.gpu is not None:
        return (
            f"the trace is a CPU timeline but the prediction is for {prediction.gpu}: only "
            "the shares of the step are compared; times and speeds do not carry over"
        )
    return None


def load_prediction(path: Path) -> Prediction:
    text = files.read_text(
        path,
        label="--predict-with",
        field="predict_with",
        expected="the output of `gpuscale estimate ... --json`",
    )
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected "
            "the output of `gpuscale estimate ... --json`"
        ) from None
    return prediction_from_document(doc, str(path))


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    part: str
    predicted_share: float
    measured_share: float
    predicted_s: float
    measured_s: float
    verdict: str
    off: bool
    """True when the measured share is off the prediction by more than the tolerance."""


def _measured(ranks: Sequence[RankResult]) -> dict[str, float]:
    """Mean seconds per step of each part, averaged over ranks (the plan predicts one GPU)."""
    out: dict[str, float] = {}
    for name in ("compute", "optimizer", "exposed_comm", "data_wait", "idle", "step"):
        per_rank = [float(np.mean(r.breakdown.part(name))) for r in ranks]
        out[name] = float(np.mean(per_rank))
    return out


def _share_words(label: str, measured: float, predicted: float) -> str:
    return f"{label} is {100 * measured:.0f}% of the step, predicted {100 * predicted:.0f}%"


def compare(
    ranks: Sequence[RankResult],
    prediction: Prediction,
    tolerance: float,
    *,
    seconds_comparable: bool = True,
) -> list[Finding]:
    """One finding per part of the step. With ``seconds_comparable`` False (a CPU trace against a
    GPU prediction), the verdicts speak of shares only, never of speed or bandwidth."""
    measured = _measured(ranks)
    step = measured["step"]
    rows: list[Finding] = []

    def add(part: str, predicted_s: float, measured_s: float, why: str, fine: str) -> None:
        p_share, m_share = predicted_s / prediction.step_time_s, measured_s / step
        off = abs(m_share - p_share) > tolerance
        rows.append(
            Finding(
                part=part,
                predicted_share=p_share,
                measured_share=m_share,
                predicted_s=predicted_s,
                measured_s=measured_s,
                verdict=why if off else fine,
                off=off,
            )
        )

    def larger(predicted_s: float, measured_s: float) -> bool:
        return measured_s / step > predicted_s / prediction.step_time_s

    p_comm, m_comm = prediction.seconds("exposed_comm"), measured["exposed_comm"]
    if not seconds_comparable:
        comm_why = _share_words(
            "exposed communication", m_comm / step, p_comm / prediction.step_time_s
        ) + (
            "; measure the fabric with `gpuscale bench collectives` on the planned devices"
            if larger(p_comm, m_comm)
            else "; more of it hides under compute than the plan assumes"
        )
    elif m_comm > 0 and p_comm > 0 and m_comm > p_comm:
        comm_why = (
            f"the fabric delivers about {100 * p_comm / m_comm:.0f}% of the bandwidth the "
            "estimate assumed, or overlaps less; run `gpuscale bench collectives` and "
            "`gpuscale calibrate` to measure it"
        )
    elif m_comm > p_comm:
        comm_why = (
            "the estimate expected communication to hide under compute, but it is "
            "exposed; check bucket sizes and overlap, then `gpuscale bench collectives`"
        )
    else:
        comm_why = (
            "communication costs less than predicted (more overlap or a faster fabric "
            "than the profile assumes); `gpuscale calibrate` records the real figures"
        )
    add("exposed_comm", p_comm, m_comm, comm_why, "as predicted")

    p_comp, m_comp = prediction.seconds("compute"), measured["compute"]
    slower = m_comp / p_comp if p_comp > 0 else float("inf")
    times = f" ({1e3 * m_comp:.3g} ms against {1e3 * p_comp:.3g} ms)"
    if not seconds_comparable:
        comp_why = _share_words("compute", m_comp / step, p_comp / prediction.step_time_s) + (
            "; the other parts take less of the step than modelled"
            if larger(p_comp, m_comp)
            else "; the other parts (see their rows) take more of the step than modelled"
        )
    elif slower > 1 + tolerance:
        comp_why = (
            f"compute takes {slower:.1f}x the predicted time{times}: kernels reach about "
            f"{100 / slower:.0f}% of the efficiency the calibration profile assumes; run "
            "`gpuscale calibrate` to measure it on this device"
        )
    elif slower < 1 - tolerance:
        comp_why = (
            f"compute is {1 / slower:.1f}x faster than predicted{times}: the calibration "
            "profile is conservative for this device; `gpuscale calibrate` records it"
        )
    else:
        comp_why = "compute time is as predicted; its share moved because other parts did"
    add("compute", p_comp, m_comp, comp_why, "as predicted")
    add(
        "optimizer",
        prediction.seconds("optimizer"),
        measured["optimizer"],
        "the optimizer step takes a different share than modelled (fused/foreach optimizer, "
        "offload, or ZeRO stage differs from the plan)",
        "as predicted",
    )
    add(
        "data_wait",
        prediction.seconds("data"),
        measured["data_wait"],
        "the estimate assumes the input pipeline keeps up; here the device waits for data",
        "as predicted",
    )
    add(
        "idle",
        prediction.seconds("bubble", "other", "checkpoint"),
        measured["idle"],
        "idle time (pipeline bubble, launch gaps, host overhead) differs from the modelled "
        "bubble and overhead; check micro-batch count and host-side overhead",
        "as predicted",
    )
    return rows


def step_ratio(ranks: Sequence[RankResult], prediction: Prediction) -> float:
    """Measured over predicted step time (1.3: the job is 30% slower than planned)."""
    return _measured(ranks)["step"] / prediction.step_time_s
