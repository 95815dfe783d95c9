"""benchmarks/calibrate_transfer.py: the attribution headroom is a search over the simplex of
single-quantity fits (first order), so it can only match or beat each of them."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_transfer.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "calibrate_transfer_benchmark")


def test_the_simplex_grid_sums_to_one_and_holds_the_corners(bench: ModuleType) -> None:
    grid = bench.simplex(3, 4)
    assert np.allclose(grid.sum(axis=1), 1.0)
    assert (grid >= 0).all()
    # C(4 + 2, 2) = 15 points, the three corners among them
    assert len(grid) == 15
    for corner in np.eye(3):
        assert any(np.allclose(row, corner) for row in grid)


def test_the_best_mixture_is_no_worse_than_any_single_fit(bench: ModuleType) -> None:
    before = np.array([0.10, -0.02, 0.05])
    # one quantity carries the gap to every row alike, the other only to the first
    moves = {
        "compute": np.log1p(np.array([-0.08, -0.08, -0.08])),
        "memory_bound": np.log1p(np.array([-0.09, 0.0, 0.0])),
    }
    score, weights = bench.best_mixture(before, moves)
    singles = [float(np.mean(np.abs(np.expm1(np.log1p(before) + m)))) for m in moves.values()]
    assert score <= min(singles) + 1e-12
    assert sum(weights.values()) == pytest.approx(1.0)
    # the second row is already right: the gap belongs on the quantity only the first row has
    assert weights["memory_bound"] > weights["compute"]


def test_no_admissible_quantity_leaves_the_rows_as_they_were(bench: ModuleType) -> None:
    before = np.array([0.04, -0.06])
    score, weights = bench.best_mixture(before, {})
    assert score == pytest.approx(0.05)
    assert weights == {}
