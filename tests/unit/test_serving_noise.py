"""gpuscale.validation.serving_noise: repeats, order violations and the least error they force."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_noise import (
    falls,
    monotone_fit,
    repeat_groups,
    runs,
    spread,
    sweeps,
)
from gpuscale.validation.serving_rows import RECIPE, STATED, TWIN, ServingRow, load
from gpuscale.validation.serving_runs import distinct, distinct_columns


def _serving_row(
    id: str, source: str, ttft: float, tpot: float, conc: int = 8, model: str = "x/m", **raw: str
) -> ServingRow:
    fields = {
        "model_path": model,
        "silicon_data_source": source,
        "backend_version": "1.0",
        "system": "h200_sxm",
        "precision": "fp8",
        "gemm_quant_mode": "fp8",
        "moe_quant_mode": "",
        "mode": "agg",
        "isl": "1024",
        "osl": "1024",
        **raw,
    }
    return ServingRow(
        id=id,
        engine="vllm",
        mode="agg",
        kind=STATED,
        ttft_ms=ttft,
        tpot_ms=tpot,
        concurrency=conc,
        kwargs={"gpu": "h200-sxm", "tp": 8, "concurrency": conc, "num_requests": 10 * conc},
        raw=fields,
    )


def test_fit_of_a_single_fall_splits_it_at_the_cheaper_side() -> None:
    # 10, 5, 20: holding 5 up to 10 or 10 down to 5 both cost 5 (unit weights).
    fitted, total = monotone_fit([1, 2, 3], [10.0, 5.0, 20.0], [1.0, 1.0, 1.0])
    assert total == pytest.approx(5.0)
    assert list(fitted[:2]) in ([5.0, 5.0], [10.0, 10.0]) and fitted[2] == 20.0


def test_a_rising_sweep_costs_nothing_and_ties_share_one_value() -> None:
    fitted, total = monotone_fit([1, 2, 3], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    assert total == 0.0 and list(fitted) == [1.0, 2.0, 3.0]
    # Two runs at one concurrency: one value for both, a weighted median.
    fitted, total = monotone_fit([4, 4], [100.0, 121.0], [1 / 100, 1 / 121])
    assert fitted[0] == fitted[1] == 100.0 and total == pytest.approx(21 / 121)


def _cost(f: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    return float((w * np.abs(f - y)).sum())


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 3),
            st.floats(1.0, 100.0, allow_nan=False),
            st.floats(0.1, 10.0, allow_nan=False),
        ),
        min_size=1,
        max_size=5,
    ),
    st.lists(st.floats(0.0, 110.0, allow_nan=False), min_size=4, max_size=4),
)
def test_fit_is_monotone_and_beats_every_monotone_alternative(
    points: list[tuple[int, float, float]], other: list[float]
) -> None:
    x = np.array([p[0] for p in points], dtype=float)
    y = np.array([p[1] for p in points])
    w = np.array([p[2] for p in points])
    fitted, total = monotone_fit(x, y, w)
    assert total == pytest.approx(_cost(fitted, y, w))
    order = np.argsort(x, kind="stable")
    assert np.all(np.diff(fitted[order]) >= 0)
    for level in np.unique(x):
        assert len(set(fitted[x == level])) == 1
    # Any non-decreasing step over the levels, drawn freely, costs at least as much.
    steps = np.sort(np.asarray(other))
    assert _cost(steps[x.astype(int)], y, w) >= total - 1e-9
    # Brute force over a grid holding the data and the midpoints between them.
    grid = sorted({*y, *((a + b) / 2 for a, b in itertools.combinations(y, 2))})
    levels = np.unique(x)
    best = min(
        _cost(np.array([dict(zip(levels, c, strict=True))[v] for v in x]), y, w)
        for c in itertools.combinations_with_replacement(grid, len(levels))
    )
    assert total == pytest.approx(best, abs=1e-9)


def test_spread_of_two_repeats() -> None:
    s = spread([100.0, 121.0])
    assert s.from_geomean == pytest.approx((10 / 110 + 11 / 110) / 2)
    assert s.pair_log == pytest.approx(math.log(1.21))
    # the best single answer is 100: 21/121 on the other run, over two runs
    assert s.floor == pytest.approx(21 / 121 / 2)
    assert s.floor <= s.from_geomean


def test_same_run_exported_twice_is_one_run_and_another_day_is_a_repeat() -> None:
    a = _serving_row("a", "source_file=e1.csv; measured=2026-03-27T07:59:49Z", 100.0, 10.0)
    twin = _serving_row("b", "source_file=e2.csv; measured=2026-03-27T00:00:00Z", 100.0, 10.0)
    again = _serving_row("c", "source_file=e2.csv; measured=2026-03-28T00:00:00Z", 121.0, 10.5)
    other = _serving_row("d", "source_file=e2.csv; measured=2026-03-28T00:00:00Z", 90.0, 9.0)
    other.kwargs["tp"] = 4  # another deployment: never a repeat of a
    found = runs([a, twin, again, other])
    assert sorted(len(r.rows) for r in found) == [1, 1, 2]
    (group,) = repeat_groups(found)
    assert {r.row.id for r in group} == {"a", "c"}
    assert {r.campaign for r in group} == {"InferenceX:2026-03-27", "InferenceX:2026-03-28"}


def test_dump_deepseek_v3_rows_are_the_r1_runs_they_repeat() -> None:
    export = _serving_row(
        "2026_03_25_deepseek_r1",
        "source_file=2026-03-25.csv",
        50.0,
        5.0,
        model="deepseek-ai/DeepSeek-R1",
    )
    dump = _serving_row(
        "dsr1_h200", "db-dump/2026-04-27; x=1", 50.0, 5.0, model="deepseek-ai/DeepSeek-V3"
    )
    assert len(runs([export, dump])) == 1


def test_of_one_runs_records_the_best_attested_stands_whatever_the_order() -> None:
    """``distinct`` and ``runs`` keep the same record of a run, by kind (stated over twin over a
    configuration reading), then the publication over the db-dump copy, never by file order."""
    src = "source_file=2026-04-06.csv; measured=2026-02-14T00:00:00Z"
    stated = _serving_row("stated", "db-dump/2026-04-27; x=1", 50.0, 5.0)
    twin = dataclasses.replace(_serving_row("twin", src, 50.0, 5.0), kind=TWIN)
    recipe = dataclasses.replace(_serving_row("recipe", src, 50.0, 5.0), kind=RECIPE)
    export = _serving_row("export", src, 50.0, 5.0)
    dump = _serving_row("dump", "db-dump/2026-04-27; x=2", 50.0, 5.0)
    for records, best in (((stated, twin, recipe), "stated"), ((twin, recipe), "twin")):
        for order in itertools.permutations(records):
            assert [r.id for r in distinct(list(order))] == [best]
            (run,) = runs(order)
            assert run.row.id == best and len(run.rows) == len(records)
    for order in itertools.permutations((dump, export)):
        assert [r.id for r in distinct(list(order))] == ["export"]
        assert runs(order)[0].row.id == "export"


def test_runs_and_distinct_count_the_public_rows_by_one_rule() -> None:
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    kept = [r for r in distinct(rows) if r.expressible]
    found = runs(distinct_columns(rows))
    # one run per row distinct keeps, and the same record stands for it
    assert sorted(id(r.row) for r in found) == sorted(id(r) for r in kept)
    assert sum(len(r.rows) - 1 for r in found) == len(distinct_columns(rows)) - len(distinct(rows))
    assert len(runs(kept)) == len(kept)


def test_falls_count_adjacent_drops_past_each_threshold() -> None:
    rows = [
        _serving_row(f"r{c}", "source_file=f.csv", t, 10.0, conc=c)
        for c, t in ((4, 100.0), (8, 85.0), (16, 60.0), (32, 70.0))
    ]
    (sweep,) = sweeps(runs(rows), lambda r: (r.sweep, r.campaign))
    assert [r.concurrency for r in sweep] == [4, 8, 16, 32]
    f = falls(sweep, "ttft", (0.10, 0.25))
    assert f.pairs == 3 and f.falls == {0.10: 2, 0.25: 1}
    assert falls(sweep, "tpot", (0.10,)).falls == {0.10: 0}


def test_the_serving_model_misses_each_repeat_group_by_at_least_its_floor() -> None:
    """The floor is a true lower bound: one deterministic answer per deployment (the serving
    model's, on the rows as read) errs on a group of repeats at least by the group's floor."""
    found = runs(distinct(load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")))
    groups = sorted(repeat_groups(found), key=lambda g: g[0].row.id)[:4]
    assert len(groups) == 4
    for g in groups:
        answers = [infer(r.row.raw["model_path"], **r.row.kwargs).to_dict() for r in g]
        ttft = {round(a["options"][0]["ttft_ms"], 9) for a in answers}
        assert len(ttft) == 1  # one deployment, one answer
        (p,) = ttft
        errs = [abs(p - r.row.ttft_ms) / r.row.ttft_ms for r in g]
        assert sum(errs) / len(errs) >= spread([r.row.ttft_ms for r in g]).floor - 1e-12
