"""The closed-form checks of benchmarks/moe_ttft_gap.py on hand-made runs."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "moe_ttft_gap.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "moe_ttft_gap_benchmark")


DEP = ("trtllm", "-", "DeepSeek", "h200", "tp8 ep1 dp1", "2025-11-02", "none")


def _run(bench: ModuleType, **kw: float) -> object:
    base = dict(
        deployment=DEP,
        isl=1024,
        osl=1024,
        out_mean=922.0,
        c=4,
        meas_ttft=300.0,
        pred_ttft=100.0,
        meas_tpot=14.0,
        pred_tpot=14.0,
    )
    base.update(kw)
    return bench.Run(**base)


def test_blocking_share_is_littles_law_prompt_rate_times_gap(bench: ModuleType) -> None:
    # c 64, TTFT 754.6 ms, TPOT 33.96 ms over 921 more tokens: E2E 32.03 s, 2.0 prompts/s;
    # a 377 ms gap in each prompt's iteration stalls the engine 75% of the time.
    run = _run(bench, c=64, out_mean=922.0, meas_ttft=754.6, pred_ttft=377.5, meas_tpot=33.96)
    e2e = (754.6 + 921 * 33.96) / 1e3
    share = 64 / e2e * 0.3771
    assert bench.blocking_tpot_ratio(run) == pytest.approx(1 / (1 - share))
    # no gap, no stall; a gap the engine could not absorb at all has no finite TPOT
    assert bench.blocking_tpot_ratio(_run(bench, pred_ttft=300.0)) == 1.0
    assert bench.blocking_tpot_ratio(_run(bench, c=512, meas_ttft=5000.0, pred_ttft=0.0)) is None


def test_summary_reads_constant_growth_and_prompt_scaling(bench: ModuleType) -> None:
    runs = [
        # 200 ms at c 4-16 and 1k or 8k prompts, 400 ms at c 32-64
        _run(bench, c=c, meas_ttft=100.0 + g, pred_ttft=100.0, meas_tpot=20.0)
        for c, g in ((4, 200.0), (8, 200.0), (16, 200.0), (32, 400.0), (64, 400.0))
    ] + [
        _run(bench, isl=8192, c=c, meas_ttft=400.0 + 200.0, pred_ttft=400.0, meas_tpot=20.0)
        for c in (4, 8, 16)
    ]
    s = bench.summarize(DEP, runs)
    assert s.const == 200.0
    assert s.high_ratio == 2.0
    assert (s.growth_meas, s.growth_model) == (300.0, 300.0)
    assert s.stall_s == 2.0
    # DeepSeek on TensorRT-LLM streams every 10th token: a held first token would add 9 x TPOT,
    # here 180 ms against the 200 ms constant (within the test's [0.67, 1.5])
    assert s.interval_ms == 9 * 20.0
    verdict = {name: rule(s) for name, _, rule in bench.VERDICTS}
    assert verdict["prefill rate (gap grows with the prompt)"] is True
    assert verdict["a fixed delay (per request, or one S)"] is True
    assert verdict["first token held to the stream interval"] is False


def test_small_gaps_are_not_judged(bench: ModuleType) -> None:
    runs = [_run(bench, c=c, meas_ttft=110.0, pred_ttft=100.0) for c in (4, 32)]
    s = bench.summarize(DEP, runs)
    assert s.const == 10.0 and s.high_ratio is None
