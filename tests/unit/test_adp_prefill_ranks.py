"""benchmarks/adp_prefill_ranks.py: the context servers' prompts per attention-DP rank as the
model's closed loop deals them (figures quoted in docs/investigations/serving-moe-kernels.md,
branch adp)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from gpuscale.planner.serving import deployment
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct
from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "adp_prefill_ranks.py"


def _module() -> ModuleType:
    return load_benchmark(SCRIPT, "adp_prefill_ranks_benchmark")


bench = _module()


def test_spread_by_hand() -> None:
    # two iterations over four ranks: (900, 0, 0, 0) and (1000, 800, 0, 0)
    fullest, mean, idle, real = bench.spread([[900.0, 0.0, 0.0, 0.0], [1000.0, 800.0, 0.0, 0.0]])
    assert fullest == pytest.approx(950.0)
    assert mean == pytest.approx((225.0 + 450.0) / 2.0)
    assert idle == pytest.approx((0.75 + 0.5) / 2.0)
    assert real == pytest.approx(2700.0 / (4 * 900.0 + 4 * 1000.0))
    assert bench.spread([]) == (0.0, 0.0, 0.0, 1.0)


def _row(prefill_adp: int, concurrency: int) -> object:
    for row in distinct(load(bench.ROWS)):
        kw = row.kwargs
        if (
            row.expressible
            and row.raw["mode"] == "disagg"
            and row.raw["backend"] == "trtllm"
            and row.raw["system"] == "h200_sxm"
            and kw["prefill_attention_dp"] == prefill_adp
            and row.concurrency == concurrency
        ):
            return row
    raise AssertionError("row not found")


def test_attention_dp_context_iterations_leave_ranks_idle_and_tp_ones_do_not() -> None:
    """At 1k/1k C = 36 the eight attention-DP ranks of the context server mostly idle (one or
    two prompts per iteration), the model pricing each iteration at its fullest rank; a TP8
    context server (8k/1k, C = 48) is one rank, always full."""
    original = deployment.PrefillStage
    loads: list[list[float]] = []
    with bench.recording(loads):
        bench.predict(_row(8, 36))
    assert deployment.PrefillStage is original
    fullest, mean, idle, real = bench.spread(loads)
    assert all(len(x) == 8 for x in loads)
    assert fullest / mean > 3.0 and idle > 0.7 and real < 0.3
    loads = []
    with bench.recording(loads):
        bench.predict(_row(1, 48))
    fullest, mean, idle, real = bench.spread(loads)
    assert all(len(x) == 1 for x in loads)
    assert fullest == pytest.approx(mean) and idle == 0.0 and real == pytest.approx(1.0)
