"""Planner tables on narrow and wide terminals, and what their marks mean."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from rich.console import Console
from rich.table import Table

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner.scale import ScaleCurve, curve_from_counts
from gpuscale.planner.search import Hardware, Workload, search
from gpuscale.report.planner import break_even_words, plans_table, scale_table
from gpuscale.specs import Training

WORKLOAD = Workload(
    model=catalog.model("llama3.1-8b"),
    training=Training(seq_len=4096),
    global_batch=512,
    tokens=1.6e11,
    price_per_gpu_hour=2.5,
)


def _text(table: Table, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return search(WORKLOAD, Hardware(gpu="h100-sxm"), load_profile("generic"), 16, top_k=5)


@pytest.fixture(scope="module")
def curve(result) -> ScaleCurve:  # type: ignore[no-untyped-def]
    built = curve_from_counts("ib-ndr400", result.counts)
    assert built is not None
    return built


@pytest.mark.parametrize("width", [60, 80, 100, 200])
def test_plan_table_fits_the_terminal_without_ellipses(result, width: int) -> None:  # type: ignore[no-untyped-def]
    text = _text(plans_table(result.ranked, WORKLOAD, "Top plans", width=width), width)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    # the answer's essentials survive any width: layout, days and dollars
    for header in ("TP", "DP", "days", "USD"):
        assert header in text
    hidden = "hidden to fit" in text
    assert hidden == (width < 80), text


@pytest.mark.parametrize("width", [80, 200])
def test_scale_table_fits_the_terminal_and_wraps_only_the_plan_text(
    curve: ScaleCurve, width: int
) -> None:
    text = _text(scale_table(curve, WORKLOAD, "Best plan per GPU count", width=width), width)
    assert "…" not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    for header in ("eff/GPU", "marginal", "days", "cost $"):
        assert header in text


def _bent(curve: ScaleCurve) -> ScaleCurve:
    """The same searches with the largest count made slow, so that break-even is passed."""
    last = curve.points[-1]
    assert last.best is not None
    slow = replace(last.best, tokens_per_s=curve.points[-2].best.tokens_per_s * 1.01)  # type: ignore[union-attr]
    counts = [p.search for p in curve.points[:-1]]
    counts.append(replace(last.search, top=(slow,)))
    bent = curve_from_counts(curve.fabric, counts)
    assert bent is not None
    return bent


def test_break_even_star_only_where_added_gpus_stop_paying(curve: ScaleCurve) -> None:
    last = curve.points[-1].num_gpus
    assert not curve.break_even_reached  # llama3.1-8b still scales at 16 GPUs
    text = _text(scale_table(curve, WORKLOAD, "t", width=200), 200)
    assert "*" not in text
    assert f"no break-even up to {last} GPUs: each added GPU still returns at least 50%" in text
    assert break_even_words(curve) == f"no break-even up to {last} GPUs"

    bent = _bent(curve)
    assert bent.break_even_reached and bent.break_even_gpus < last
    text = _text(scale_table(bent, WORKLOAD, "t", width=200), 200)
    assert f" {bent.break_even_gpus}* " in text and "* break-even: past it" in text
    assert break_even_words(bent) == f"break-even at {bent.break_even_gpus} GPUs"


def test_superlinear_efficiency_is_explained_under_the_table(curve: ScaleCurve) -> None:
    """llama3.1-8b's smallest plan needs a memory saver (recompute or pipelining) within the
    memory budget; 16 GPUs without it reach >100% per GPU, and the table says why."""
    assert any((p.efficiency or 0) > 1.005 for p in curve.points)
    text = _text(scale_table(curve, WORKLOAD, "t", width=200), 200)
    base = curve.baseline_gpus
    assert f"above 100% is superlinear scaling: to fit, the {base}-GPU plan needs" in text


def test_etp_column_only_when_some_plan_folds_its_experts(result) -> None:  # type: ignore[no-untyped-def]
    dense = _text(plans_table(result.ranked, WORKLOAD, "Top plans", width=200), 200)
    assert "ETP" not in dense
    moe = Workload(
        model=catalog.model("qwen3-30b-a3b"),
        training=Training(seq_len=4096),
        global_batch=256,
        tokens=1e11,
    )
    found = search(moe, Hardware(gpu="h100-sxm"), load_profile("megatron"), 16, top_k=20)
    assert any(p.plan.etp != p.plan.tp for p in found.ranked)
    text = _text(plans_table(found.ranked, moe, "Top plans", width=200), 200)
    header = next(line for line in text.splitlines() if " TP " in line)
    assert header.index(" EP ") < header.index(" ETP ") < header.index(" DP ")
