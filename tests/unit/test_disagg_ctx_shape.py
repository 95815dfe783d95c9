"""benchmarks/disagg_ctx_shape.py: the factor on the context servers' iteration, the host-floor
scan, and the figures docs/investigations/serving-disaggregated.md quotes from them (section of
branch disagg-ctx)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from gpuscale.planner.serving import deployment
from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "disagg_ctx_shape.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "disagg_ctx_shape_benchmark")


def _run(bench: ModuleType, isl: str, concurrency: int, mode: str = "disagg") -> Any:
    for row in bench.load(bench.ROWS):
        name = bench._group(row) if row.expressible else None
        same = name and row.raw["mode"] == mode and row.raw["isl"] == isl
        if same and row.concurrency == concurrency:
            return row
    raise AssertionError(f"no {mode} {isl} C={concurrency} row")


def test_unit_factor_and_profile_floor_leave_the_model_unchanged(bench: ModuleType) -> None:
    row = _run(bench, "1024", 36)
    plain = bench._ttft(row)
    assert bench._ttft(row, bench._prefill_scaled(1.0)) == pytest.approx(plain, rel=1e-12)
    assert bench._ttft(row, bench._host_floor(60.0)) == pytest.approx(plain, rel=1e-12)
    # the patch is undone after each prediction
    assert deployment._iteration_model is bench._orig


def test_a_slower_prefill_iteration_lengthens_ttft_and_the_factor_matches(
    bench: ModuleType,
) -> None:
    row = _run(bench, "1024", 36)
    assert bench._ttft(row, bench._prefill_scaled(2.0)) > bench._ttft(row)
    k = bench.factor(row)
    assert bench._ttft(row, bench._prefill_scaled(k)) == pytest.approx(row.ttft_ms, rel=0.01)


def test_attention_dp_1k_context_servers_need_a_slower_iteration_tp8_8k_do_not(
    bench: ModuleType,
) -> None:
    # the figures of the docs section: k 2.56-2.78 at 1k C = 36, 1.01 at 8k C = 28
    assert bench.factor(_run(bench, "1024", 36)) > 2.0
    assert 0.8 < bench.factor(_run(bench, "8192", 28)) < 1.25


def test_a_host_floor_lifts_light_1k_prompts_not_8k_prompts(bench: ModuleType) -> None:
    light_1k = _run(bench, "1024", 36)
    light_8k = _run(bench, "8192", 28)
    assert bench._ttft(light_1k, bench._host_floor(180.0)) > 1.3 * bench._ttft(light_1k)
    # 8k prompts keep the GPU about as busy as a 180 us/kernel floor (about 240 ms a forward;
    # busier before the H200 kernel readings priced the prefill GEMMs at their measured rate):
    # the floor moves their TTFT by a few percent at most
    assert bench._ttft(light_8k, bench._host_floor(180.0)) == pytest.approx(
        bench._ttft(light_8k), rel=0.05
    )
