"""The line benchmarks/ttft_light_load.py --excess fits through a deployment's TTFT over ISL."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "ttft_light_load.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "ttft_light_load_benchmark")


def test_two_points_give_the_line_through_them(bench: ModuleType) -> None:
    # 260 ms at 1024 tokens and 447 ms at 8192: 26.1 ms per 1k tokens on top of 233 ms.
    a, b = bench.line_fit([1024.0, 8192.0], [260.0, 447.0])
    assert b == pytest.approx(187.0 / 7168.0)
    assert a + b * 1024.0 == pytest.approx(260.0)


def test_repeated_points_average(bench: ModuleType) -> None:
    a, b = bench.line_fit([1.0, 1.0, 3.0, 3.0], [1.0, 3.0, 5.0, 7.0])
    assert (a, b) == pytest.approx((0.0, 2.0))


def test_one_length_is_refused(bench: ModuleType) -> None:
    with pytest.raises(ValueError, match="two distinct"):
        bench.line_fit([1024.0, 1024.0], [1.0, 2.0])


@given(
    a=st.floats(-1e3, 1e3),
    b=st.floats(-10.0, 10.0),
    xs=st.lists(st.integers(1, 10_000), min_size=2, max_size=8, unique=True),
)
def test_exact_lines_are_recovered(bench: ModuleType, a: float, b: float, xs: list[int]) -> None:
    fa, fb = bench.line_fit([float(x) for x in xs], [a + b * x for x in xs])
    assert fb == pytest.approx(b, abs=1e-6)
    assert fa == pytest.approx(a, abs=1e-3)
