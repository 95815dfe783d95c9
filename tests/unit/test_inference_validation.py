"""Serving predictions against published inference measurements (TensorRT-LLM, LMDeploy)."""

from __future__ import annotations

from gpuscale.validation.published_inference import evaluate_inference, summarize_inference
from tests.conftest import validation_data


def test_inference_error_stays_within_its_recorded_bound() -> None:
    found = validation_data()
    summary = summarize_inference(evaluate_inference(found / "published_inference.csv"))
    assert summary["overall"]["rows"] >= 250
    # docs/benchmarks.md records 23%; this bound catches regressions, not noise.
    assert summary["overall"]["mape"] <= 0.27
    for key, group in summary["per_group"].items():
        assert group["mape"] <= 0.35, key
