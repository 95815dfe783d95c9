"""One-run calibration (gpuscale.planner.calibrate_run, gpuscale.api.calibrate_run): the fit
recovers a known parameter exactly, picks the parameter the step depends on, writes a profile
that loads and moves estimates the measured way, and refuses what no physical value explains."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuscale import api, catalog
from gpuscale.api.calibrate_run import CalibrateRunResult
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.errors import InputError
from gpuscale.planner.calibrate_run import Measured, Run, calibrate_run, predict
from gpuscale.specs import Plan, Training

# A compute-bound run: 8B on two H100 nodes, data parallel over InfiniBand.
COMPUTE_BOUND: dict[str, Any] = dict(gpu="h100-sxm", gpus=16, tp=2, mbs=2, gbs=64, seq=4096, zero=1)
# A network-bound run: 8B data parallel over 4 nodes joined by one 25 GbE port each.
NETWORK_BOUND: dict[str, Any] = dict(
    gpu="h100-sxm", gpus=32, mbs=1, gbs=32, seq=2048, inter="eth-25", nics_per_node=1
)


def _run(model: str = "llama3.1-8b", **kw: Any) -> Run:
    gpus = kw.get("gpus", 16)
    tp = kw.get("tp", 1)
    cluster = catalog.cluster(
        kw.get("gpu", "h100-sxm"),
        gpus,
        inter=kw.get("inter", catalog.DEFAULT_INTER),
        nics_per_node=kw.get("nics_per_node"),
    )
    plan = Plan(
        tp=tp,
        dp=gpus // tp,
        micro_batch=kw.get("mbs", 1),
        global_batch=kw.get("gbs", gpus // tp),
        zero=kw.get("zero", 0),
    )
    return Run(
        model=catalog.model(model),
        cluster=cluster,
        training=Training(seq_len=kw.get("seq", 4096)),
        plan=plan,
    )


def _overlay(tmp_path: Path, doc: dict[str, Any], name: str = "truth.yaml") -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"schema_version": 1, "name": "truth", **doc}))
    load_profile.cache_clear()
    return str(path)


def test_recovers_a_known_compute_efficiency_exactly(tmp_path: Path) -> None:
    run = _run(**COMPUTE_BOUND)
    generic = load_profile("generic")
    hopper = generic.gemm["hopper"]
    attention = generic.attention("h100-sxm", "hopper")
    truth_scale = 0.85
    # The "true" stack: every H100 bf16 GEMM and the fused attention at 85% of the generic rate,
    # written by hand as a profile file (not through the fit's own code).
    truth = load_profile_for(
        "generic",
        _overlay(
            tmp_path,
            {
                "gemm": {
                    "h100-sxm-bf16": {
                        "flops": list(hopper.flops),
                        "efficiency": [e * truth_scale for e in hopper.efficiency],
                    }
                },
                "attention_efficiency": {"h100-sxm": attention * truth_scale},
            },
        ),
    )
    measured_step, _ = predict(run, truth)
    cal = calibrate_run(run, Measured(step_s=measured_step), generic)
    assert cal.throughput.name == "compute"
    assert cal.throughput.before == max(hopper.efficiency)
    assert cal.throughput.after == pytest.approx(max(hopper.efficiency) * truth_scale, rel=1e-9)
    assert cal.predicted_step_s_after == pytest.approx(measured_step, rel=1e-12)
    assert cal.predicted_step_s_before < measured_step
    assert cal.throughput.change == pytest.approx(truth_scale - 1.0, rel=1e-9)


def test_recovers_a_known_network_efficiency_when_the_network_dominates(tmp_path: Path) -> None:
    run = _run(**NETWORK_BOUND)
    generic = load_profile("generic")
    truth = load_profile_for(
        "generic", _overlay(tmp_path, {"links": {"inter": {"bandwidth_efficiency": 0.45}}})
    )
    measured_step, _ = predict(run, truth)
    cal = calibrate_run(run, Measured(step_s=measured_step), generic)
    by_name = {c.name: c.elasticity for c in cal.candidates}
    # The rule: the parameter the step is most sensitive to.
    assert by_name["inter"] > by_name["compute"]
    assert cal.throughput.name == "inter"
    assert cal.throughput.before == 0.70  # generic ethernet bandwidth efficiency
    assert cal.throughput.after == pytest.approx(0.45, rel=1e-9)
    assert cal.overlay == {"links": {"inter": {"bandwidth_efficiency": cal.throughput.after}}}


def test_an_absolute_measured_link_rate_is_scaled_as_a_rate(tmp_path: Path) -> None:
    run = _run(**NETWORK_BOUND)
    start = load_profile_for(
        "generic",
        _overlay(tmp_path, {"links": {"inter": {"bandwidth_gb_per_s": 2.5, "latency_us": 30.0}}}),
    )
    truth = load_profile_for(
        "generic",
        _overlay(
            tmp_path,
            {"links": {"inter": {"bandwidth_gb_per_s": 2.0, "latency_us": 30.0}}},
            "truth2.yaml",
        ),
    )
    step, _ = predict(run, truth)
    cal = calibrate_run(run, Measured(step_s=step), start)
    assert cal.throughput.name == "inter"
    assert "GB/s" in cal.throughput.label
    assert cal.throughput.after == pytest.approx(2.0, rel=1e-9)
    assert cal.overlay["links"]["inter"]["bandwidth_gb_per_s"] == pytest.approx(2.0, rel=1e-9)
    assert cal.overlay["links"]["inter"]["latency_us"] == 30.0


def test_compute_is_chosen_when_compute_bound() -> None:
    run = _run(**COMPUTE_BOUND)
    step, _ = predict(run, load_profile("generic"))
    cal = calibrate_run(run, Measured(step_s=step * 1.1), load_profile("generic"))
    elasticity = {c.name: c.elasticity for c in cal.candidates}
    assert max(elasticity, key=lambda k: elasticity[k]) == "compute"
    assert cal.throughput.name == "compute"
    assert cal.throughput.after < cal.throughput.before


def test_recovers_a_known_allocator_reserve(tmp_path: Path) -> None:
    run = _run(**COMPUTE_BOUND)
    generic = load_profile("generic")
    truth = load_profile_for(
        "generic",
        _overlay(tmp_path, {"constants": {"memory_allocator_fragmentation": 1.31}}),
    )
    step, memory = predict(run, truth)
    cal = calibrate_run(run, Measured(step_s=step, memory_gib=memory), generic)
    assert cal.memory is not None
    assert cal.memory.before == 1.12
    assert cal.memory.after == pytest.approx(1.31, rel=1e-9)
    assert cal.predicted_memory_gib_after == pytest.approx(memory, rel=1e-12)
    # The throughput already matched: nothing else moved.
    assert cal.throughput.after == pytest.approx(cal.throughput.before, rel=1e-9)


def test_memory_outside_what_overhead_can_explain_is_not_fitted_but_said() -> None:
    run = _run(**COMPUTE_BOUND)
    step, memory = predict(run, load_profile("generic"))
    cal = calibrate_run(
        run, Measured(step_s=step, memory_gib=memory * 0.3), load_profile("generic")
    )
    assert cal.memory is None
    assert any("memory not fitted" in w for w in cal.warnings)
    assert "constants" not in cal.overlay


def test_a_big_move_inside_the_physical_range_is_fitted_with_a_warning() -> None:
    run = _run(**COMPUTE_BOUND)
    step, _ = predict(run, load_profile("generic"))
    cal = calibrate_run(run, Measured(step_s=step * 3.0), load_profile("generic"))
    assert cal.throughput.after < cal.throughput.before / 2
    assert any("moved" in w for w in cal.warnings)


@pytest.mark.parametrize("factor", [100.0, 0.01])
def test_a_measurement_100x_off_is_refused_with_the_implied_range(factor: float) -> None:
    run = _run(**COMPUTE_BOUND)
    step, _ = predict(run, load_profile("generic"))
    with pytest.raises(InputError, match="beyond what any parameter in its physical range") as e:
        calibrate_run(run, Measured(step_s=step * factor), load_profile("generic"))
    assert "compute efficiency" in str(e.value)
    assert e.value.field == "measured_tokens_per_s"


def test_api_writes_a_profile_that_loads_and_moves_estimates_the_measured_way(
    tmp_path: Path,
) -> None:
    before, _ = predict(_run(**COMPUTE_BOUND), load_profile("generic"))
    tokens_per_step = 64 * 4096
    predicted_tokens = tokens_per_step / before
    out = tmp_path / "mine.yaml"
    result = api.calibrate_run(
        "llama3.1-8b",
        measured_tokens_per_s=predicted_tokens * 0.8,
        output=str(out),
        **COMPUTE_BOUND,
    )
    assert isinstance(result, CalibrateRunResult)
    assert isinstance(result, api.Result)
    assert result.written == str(out)
    doc = yaml.safe_load(out.read_text())
    assert doc["schema_version"] == 1
    assert doc["fit"]["fitted"][0]["parameter"] == "compute"
    assert doc["fit"]["run"]["gpus"] == 16
    assert doc["measured_on"]["device"] == "h100-sxm"
    load_profile.cache_clear()
    calibrated = load_profile_for("generic", str(out))
    # The measured run is reproduced ...
    again, _ = predict(_run(**COMPUTE_BOUND), calibrated)
    assert tokens_per_step / again == pytest.approx(predicted_tokens * 0.8, rel=1e-9)
    # ... and another plan at another scale of the same stack moves the same way.
    other = _run(gpus=64, tp=1, mbs=1, gbs=256, seq=4096, zero=3)
    generic_other, _ = predict(other, load_profile("generic"))
    calibrated_other, _ = predict(other, calibrated)
    assert calibrated_other > generic_other * 1.1
    # A different GPU is not touched by an H100 calibration.
    a100 = _run(gpu="a100-sxm-80gb", gpus=16)
    assert predict(a100, calibrated)[0] == predict(a100, load_profile("generic"))[0]


def test_api_result_is_plain_json_with_a_summary_line() -> None:
    result = api.calibrate_run(
        "llama3.1-8b", measured_step_s=2.0, measured_memory_gib=70, **COMPUTE_BOUND
    )
    doc = result.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert list(doc) == [
        "schema_version",
        "model",
        "gpu",
        "gpus",
        "framework",
        "measured_tokens_per_s",
        "measured_step_s",
        "measured_memory_gib",
        "predicted_tokens_per_s_before",
        "predicted_tokens_per_s_after",
        "predicted_memory_gib_before",
        "predicted_memory_gib_after",
        "fitted",
        "summary",
        "elasticity",
        "profile",
        "written",
        "warnings",
        "assumed",
    ]
    assert doc["assumed"] == {}  # COMPUTE_BOUND gives gbs: nothing assumed
    assert list(doc["fitted"][0]) == ["parameter", "label", "keys", "before", "after", "change"]
    assert doc["schema_version"] == 1
    assert doc["measured_tokens_per_s"] == pytest.approx(64 * 4096 / 2.0)
    assert doc["summary"][0].startswith("compute efficiency 0.74 -> ")
    assert "tokens/s per GPU" in doc["summary"][0]
    assert doc["written"] is None
    assert result.figures()
    assert result.yaml().startswith("# gpuscale calibration profile")


def test_api_keeps_a_start_profile_under_the_fitted_keys(tmp_path: Path) -> None:
    start = _overlay(tmp_path, {"overlap": {"dp": 0.5}, "hbm_efficiency": 0.7}, "start.yaml")
    result = api.calibrate_run("llama3.1-8b", measured_step_s=2.0, profile=start, **COMPUTE_BOUND)
    assert result.profile["overlap"] == {"dp": 0.5}
    assert result.profile["hbm_efficiency"] == 0.7
    assert "gemm" in result.profile


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({}, "measured_tokens_per_s", "exactly one"),
        (
            {"measured_tokens_per_s": 1e5, "measured_step_s": 1.0},
            "measured_tokens_per_s",
            "exactly one",
        ),
        ({"measured_tokens_per_s": 0.0}, "measured_tokens_per_s", "> 0"),
        ({"measured_step_s": -1.0}, "measured_step_s", "> 0"),
        ({"measured_step_s": math.nan}, "measured_step_s", "finite"),
        ({"measured_step_s": math.inf}, "measured_step_s", "finite"),
        ({"measured_step_s": 1.0, "measured_memory_gib": 0.0}, "measured_memory_gib", "> 0"),
        ({"measured_step_s": 1.0, "measured_memory_gib": 200.0}, "measured_memory_gib", "exceeds"),
        ({"measured_tokens_per_s": 1e9}, "measured_tokens_per_s", "physical range"),
        ({"measured_step_s": 1.0, "output": "/nonexistent-dir/p.yaml"}, "output", "does not exist"),
        ({"measured_step_s": 1.0, "name": " "}, "name", "empty"),
        ({"measured_step_s": 1.0, "only": "ep"}, "only", "cannot fit"),
        ({"measured_step_s": 1.0, "profile": "megatron"}, "profile", "not a file"),
    ],
)
def test_api_bad_input_is_one_input_error_naming_the_argument(
    kwargs: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InputError, match=message) as e:
        api.calibrate_run("llama3.1-8b", **COMPUTE_BOUND, **kwargs)
    assert e.value.field == field
    assert "\n" not in str(e.value)
