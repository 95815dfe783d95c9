"""Interval arithmetic of the trace analyzer, checked against a brute-force timeline."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.measure.trace import intervals as iv

# Integer microsecond grids make the brute force exact.
_pair = st.tuples(st.integers(0, 60), st.integers(0, 20)).map(lambda t: (t[0], t[0] + t[1]))
_pairs = st.lists(_pair, max_size=25)


def _grid(pairs: list[tuple[int, int]], n: int = 100) -> np.ndarray:
    covered = np.zeros(n, dtype=bool)
    for a, b in pairs:
        covered[a:b] = True
    return covered


def test_merge_joins_overlapping_and_touching_intervals() -> None:
    merged = iv.Intervals.of([(5, 7), (0, 2), (1, 3), (3, 4), (6, 6)])
    assert merged.starts.tolist() == [0, 5]
    assert merged.ends.tolist() == [4, 7]
    assert merged.total == 6


@settings(max_examples=60, deadline=None)
@given(_pairs)
def test_union_builder_equals_brute_force(pairs: list[tuple[int, int]]) -> None:
    builder = iv.UnionBuilder()
    for a, b in pairs:
        builder.add(float(a), float(b))
    union = builder.build()
    assert union.total == _grid(pairs).sum()
    assert np.all(union.starts[1:] > union.ends[:-1])


def test_union_builder_flushes_large_inputs(monkeypatch) -> None:
    monkeypatch.setattr(iv, "_FLUSH_AT", 4)
    builder = iv.UnionBuilder()
    for k in range(10):
        builder.add(2.0 * k, 2.0 * k + 1.5)
    assert len(builder.build()) == 10
    assert builder.build().total == 15.0


@settings(max_examples=60, deadline=None)
@given(_pairs, _pairs, st.lists(st.integers(0, 90), min_size=2, max_size=6, unique=True))
def test_segments_per_window_equal_brute_force(
    a: list[tuple[int, int]], b: list[tuple[int, int]], cuts: list[int]
) -> None:
    edges = sorted(cuts)
    windows = iv.Intervals(np.array(edges[:-1], dtype=float), np.array(edges[1:], dtype=float))
    segs = iv.segment((iv.Intervals.of(a), iv.Intervals.of(b)), windows)
    only_a = segs.per_window(lambda x, y: x & ~y)
    both = segs.per_window(lambda x, y: x & y)
    neither = segs.per_window(lambda x, y: ~x & ~y)
    ga, gb = _grid(a), _grid(b)
    for w, (lo, hi) in enumerate(itertools.pairwise(edges)):
        assert only_a[w] == (ga & ~gb)[lo:hi].sum()
        assert both[w] == (ga & gb)[lo:hi].sum()
        assert neither[w] == (~ga & ~gb)[lo:hi].sum()


def test_time_outside_every_window_is_not_counted() -> None:
    windows = iv.Intervals(np.array([10.0]), np.array([20.0]))
    segs = iv.segment((iv.Intervals.of([(0, 30)]),), windows)
    assert segs.per_window(lambda x: x).tolist() == [10.0]
