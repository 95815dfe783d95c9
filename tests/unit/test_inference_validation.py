"""Serving predictions against published inference measurements (TensorRT-LLM, LMDeploy)."""

from __future__ import annotations

import pytest

from gpuscale.validation.published_inference import evaluate_inference, summarize_inference
from tests.conftest import shared_validation


def test_inference_error_stays_within_its_recorded_bound() -> None:
    found = shared_validation()
    if found is None:
        pytest.skip("../shared/validation is not beside this checkout")
    summary = summarize_inference(evaluate_inference(found / "published_inference.csv"))
    assert summary["overall"]["rows"] >= 250
    # docs/benchmarks.md records 23%; this bound catches regressions, not noise.
    assert summary["overall"]["mape"] <= 0.27
    for key, group in summary["per_group"].items():
        assert group["mape"] <= 0.35, key
