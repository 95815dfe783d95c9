"""benchmarks/adp_release_whatif.py: the what-if of one iteration per balanced release (not
shipped)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from gpuscale.catalog.serving_engines import engine
from gpuscale.planner.serving.adp_lockstep import lockstep_mix
from gpuscale.planner.serving.steady_state import iteration_mix
from tests.benchmark_scripts import load_benchmark
from tests.unit.test_serving_adp_lockstep import _it

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "adp_release_whatif.py"


def _bench():  # type: ignore[no-untyped-def]
    return load_benchmark(SCRIPT, "adp_release_whatif")


def _mix(eng, prompt: float, rate: float):  # type: ignore[no-untyped-def]
    it = _it()
    nn, ctx, half = np.array([8.0]), np.array([prompt + 512.0]), np.array([prompt / 2.0])
    p = np.array([rate * prompt])
    t, own, dec = iteration_mix(it, eng, nn, ctx, p, half, prompt)
    return it, (nn, ctx, half, prompt, p / prompt, t, own, dec)


def test_unbalanced_engines_are_the_shipped_mix() -> None:
    bench = _bench()
    eng = engine("tensorrt-llm")
    it, args = _mix(eng, 7372.0, 0.01)
    got = bench.one_iteration_release(it, eng, *args)
    want = lockstep_mix(it, eng, *args)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_one_iteration_per_release_carries_fewer_prompt_iterations_at_a_small_budget() -> None:
    """8k prompts under 8,320 tokens (one per rank and iteration): the shipped release runs as
    many iterations as the fullest rank's count; one iteration per release runs fewer, so the
    mean iteration is shorter, but never below the decode-only one."""
    bench = _bench()
    eng = dataclasses.replace(
        engine("tensorrt-llm"), adp_balance_timeout_iters=60, max_num_batched_tokens=8320
    )
    it, args = _mix(eng, 7372.0, 0.008)
    what_if, _ = bench.one_iteration_release(it, eng, *args)
    shipped, _ = lockstep_mix(it, eng, *args)
    decode_only = args[-1]
    assert float(decode_only[0]) < float(what_if[0]) < float(shipped[0])
