"""benchmarks/serving_bands.py: the shipped serving error bands are what the model gives today
(a change to the serving model that moves its figures must re-write them)."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from tests.benchmark_scripts import ROOT, load_benchmark


@pytest.mark.timeout(600)
def test_the_shipped_bands_are_the_models_of_today() -> None:
    script = load_benchmark(ROOT / "benchmarks" / "serving_bands.py")
    runs = script.held_out_runs() + script.in_sample_runs()
    fresh = script.document(runs, script.SOURCE)
    shipped = catalog.serving_validation_bands()
    assert fresh == shipped, (
        "the serving bands moved: PYTHONPATH=src python benchmarks/serving_bands.py --write"
    )
    # every engine the CLI offers but ATOM's disaggregated mode has a held-out or in-sample
    # band of its own mode
    regimes = shipped["regimes"]
    for engine in ("tensorrt-llm", "sglang"):
        assert f"held_out/{engine}/agg" in regimes and f"held_out/{engine}/disagg" in regimes
    assert "in_sample/vllm/agg" in regimes
