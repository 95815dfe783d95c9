"""The span fit of benchmarks/trt_rc3_ttft_hold.py on hand-made closed loops, and the one rule
for a closed-loop successor's delay in the cohort simulation it reads the rows with."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving import cohort_sim
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import Workload
from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "trt_rc3_ttft_hold.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports gap_rows from its folder
    return load_benchmark(SCRIPT, "trt_rc3_ttft_hold_benchmark")


def _loop(prompt_ms: float, decode_ms: float, c: int, hold_its: float, osl: int) -> tuple:
    """A staggered closed loop: each request's decode span holds its OSL - 1 decode steps and
    the other C - 1 prompts; its TTFT is the hold, its own prompt and one decode iteration."""
    span = (c - 1) * prompt_ms + (osl - 1) * decode_ms
    ttft = hold_its * decode_ms + prompt_ms + decode_ms
    return (osl, ttft, span / (osl - 1))


def test_span_fit_recovers_the_loop(bench: ModuleType) -> None:
    pts = [_loop(277.0, 16.5, 8, 50.0, osl) for osl in (128, 256, 512)]
    fit = bench.span_fit(pts)
    assert fit.decode_ms == pytest.approx(16.5)
    assert fit.span_prefill_ms == pytest.approx(7 * 277.0)
    h = bench.hold(fit, 8, 4096)
    assert h.prompt_prefill_ms == pytest.approx(277.0)
    assert h.iterations == pytest.approx(50.0)
    assert h.hold_ms == pytest.approx(50.0 * 16.5)
    assert h.tokens_per_iteration == pytest.approx(4096 / 50.0)


def test_a_burst_shows_as_prefill_missing_from_the_span(bench: ModuleType) -> None:
    # Half the other prompts run in the request's own wait, not in its decode span: the
    # per-prompt figure halves, and the TTFT (the same) reads as a longer hold.
    spread = [_loop(100.0, 10.0, 9, 20.0, osl) for osl in (128, 256, 512)]
    burst = [(o, t, ((4 * 100.0) + (o - 1) * 10.0) / (o - 1)) for o, t, _ in spread]
    h_spread = bench.hold(bench.span_fit(spread), 9, 2048)
    h_burst = bench.hold(bench.span_fit(burst), 9, 2048)
    assert h_burst.prompt_prefill_ms == pytest.approx(h_spread.prompt_prefill_ms / 2)
    assert h_burst.hold_ms == pytest.approx(h_spread.hold_ms + 50.0)


def test_fit_and_hold_refuse_what_they_cannot_read(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="two output lengths"):
        bench.span_fit([(128, 100.0, 10.0), (128, 101.0, 10.0)])
    fit = bench.span_fit([_loop(50.0, 5.0, 4, 3.0, o) for o in (128, 512)])
    with pytest.raises(ValueError, match="C >= 2"):
        bench.hold(fit, 1, 1024)
    # no hold: no tokens per held iteration to report
    none = bench.hold(bench.span_fit([_loop(50.0, 5.0, 4, 0.0, o) for o in (128, 512)]), 4, 1)
    assert none.iterations == pytest.approx(0.0, abs=1e-9)
    assert none.tokens_per_iteration == float("inf")


def test_grid_keeps_groups_with_every_output_length(bench: ModuleType) -> None:
    rows = bench.gap_rows()
    groups = bench.grid(rows)
    assert groups
    assert all(set(v) >= set(bench.FIT_OSL) for v in groups.values())
    # every 1.0.0rc3 row of a group is read, none twice
    assert sum(len(v) for v in groups.values()) <= len(rows)
    vllm = bench.grid(bench.vllm_rows(), bench.VLLM_OSL)
    assert vllm and all(k[0] == "Qwen3-32B" for k in vllm)


def test_generator_options_are_the_templated_launch(bench: ModuleType) -> None:
    row = next(r for r in bench.gap_rows() if r.raw["isl"] == "4096" and r.raw["batch_size"] == "8")
    opts = bench.generator_options(row)
    assert opts["max_num_batched_tokens"] == 8 + 4096 + 1500
    assert opts["chunked_prefill"] is False
    assert opts["memory_fraction"] == 0.80
    assert "max_num_seqs" not in opts  # a cap at the client's concurrency never binds


def _sim(eng):
    it = _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h100-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )
    work = Workload(input_len=2048, output_len=64)
    sim = cohort_sim.simulate(it, eng, work, 8, 1e6)
    assert sim is not None
    return float((sim.ttft_s * sim.weight).sum() / sim.weight.sum())


def test_successor_delay_is_one_rule_the_simulation_reads(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    trt = engine("tensorrt-llm")
    assert cohort_sim.successor_delay_iterations(trt) == 1
    off = dataclasses.replace(trt, overlap_scheduler=False)
    assert cohort_sim.successor_delay_iterations(off) == 0
    assert bench.refetch_delay(trt) == 2 and bench.refetch_delay(off) == 1
    base = _sim(trt)
    monkeypatch.setattr(cohort_sim, "successor_delay_iterations", bench.refetch_delay)
    later = _sim(trt)
    # a successor fetched one iteration later waits longer for its first token
    assert later > base
