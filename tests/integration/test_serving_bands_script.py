"""benchmarks/serving_bands.py: the shipped serving error bands are what the model gives today
(a change to the serving model that moves its figures must re-write them)."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from tests.benchmark_scripts import ROOT, load_benchmark, run_benchmark

REWRITE = "the serving bands moved: PYTHONPATH=src python benchmarks/serving_bands.py --write"


@pytest.mark.timeout(600)
def test_the_shipped_bands_are_the_models_of_today() -> None:
    fresh = load_benchmark(ROOT / "benchmarks" / "serving_bands.py").bands()
    shipped = catalog.serving_validation_bands()
    assert {k: v for k, v in fresh.items() if k != "regimes"} == {
        k: v for k, v in shipped.items() if k != "regimes"
    }, REWRITE
    assert fresh["regimes"].keys() == shipped["regimes"].keys(), REWRITE
    for key, new in fresh["regimes"].items():
        old = shipped["regimes"][key]
        for field, value in new.items():
            if isinstance(value, list) and value and isinstance(value[0], float):
                # percentiles to 0.01, one rounding step apart at most (numpy's
                # last-place differences between machines)
                assert value == pytest.approx(old[field], abs=0.011), (key, field, REWRITE)
            else:
                assert value == old[field], (key, field, REWRITE)
    # TensorRT-LLM and SGLang have held-out bands of each mode, with and without MTP
    for engine in ("tensorrt-llm", "sglang"):
        for mode in ("agg", "disagg"):
            for spec in ("mtp", "plain"):
                assert f"held_out/{engine}/{mode}/{spec}" in shipped["regimes"]


def test_write_refuses_a_subsample() -> None:
    out = run_benchmark("serving_bands", "--write", "--limit", "10", timeout=120)
    assert out.returncode == 2 and "leave out --limit" in out.stderr
