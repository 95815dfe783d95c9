"""The protocol of benchmarks/calibrate_run_memory.py: a group is one source and one counter,
live-tensor counters (no allocator reserve in them) are listed and not calibrated, the
calibration run is fixed by the plan alone, the fit reproduces it, and only the allocator
reserve moves."""

from __future__ import annotations

import random
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_run_memory.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "calibrate_run_memory_benchmark")


def test_groups_calibrate_only_counters_that_hold_the_reserve(bench: ModuleType) -> None:
    cases = bench.cases()
    groups, excluded = bench.evaluate(cases)
    assert groups, "no memory group calibrated"
    assert all(g["counter"] in ("reserved", "total") for g in groups)
    allocated = {c.source for c in cases if c.counter == "allocated"}
    assert allocated and all(any(s in line for line in excluded) for s in allocated)
    for g in groups:
        members = [c for c in cases if (c.source, c.counter) == (g["source"], g["counter"])]
        assert len(g["rows"]) == len(members) - 1
        assert g["calibrated_on"] not in {r["id"] for r in g["rows"]}
        if g["fitted"] is not None:
            assert g["fitted"].startswith("memory_allocator_fragmentation")
            assert g["anchor_error_after"] == pytest.approx(0.0, abs=1e-9)
            # one factor on live tensors: every other row moves the same way as the anchor's fit
            moved = [r["after_gib"] - r["before_gib"] for r in g["rows"]]
            assert all(m >= 0 for m in moved) or all(m <= 0 for m in moved)


def test_the_smallest_run_does_not_depend_on_order(bench: ModuleType) -> None:
    cases = [c for c in bench.cases() if c.source == "torchtitan"]
    first = bench.smallest(cases)
    shuffled = list(cases)
    random.Random(7).shuffle(shuffled)
    assert bench.smallest(shuffled) is first
    assert first.plan.num_gpus == min(c.plan.num_gpus for c in cases)
