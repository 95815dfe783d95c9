"""The memory model against measured peaks of real runs (data/validation)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gpuscale.costmodel.profile import load_profile
from gpuscale.validation.published_memory import Skip, evaluate, load_rows, summarize, to_case


@pytest.fixture
def rows(validation_dir: Path) -> list[dict[str, str]]:
    return load_rows(validation_dir / "published_memory.csv")


def test_beats_a_constant_guess_by_far(rows: list[dict[str, str]]) -> None:
    summary = summarize(evaluate(rows))
    assert summary.predicted >= 0.9 * summary.rows
    assert summary.mape < 0.30
    assert summary.mape < 0.5 * summary.constant_mape
    assert summary.mape < 0.1 * summary.naive_mape


def test_each_row_is_read_in_its_own_counter(rows: list[dict[str, str]]) -> None:
    profile = load_profile("generic")
    counters = {}
    for row in rows:
        try:
            counters[row["id"]] = to_case(row, profile).counter
        except Skip:
            continue
    assert counters["aai-3090-7b-lora-c512-b1"] == "reserved"
    assert counters["litgpt-llama2-7b-lora"] == "allocated"
    assert counters["torchtune-2411-3b-ac"] == "allocated"
    assert counters["hf-bert-large-vanilla"] == "total"
    assert counters["peft-70b-lora-dsz3-8xh100"] == "total"


def test_rows_missing_their_settings_are_skipped_not_guessed(rows: list[dict[str, str]]) -> None:
    skipped = {r.id: r.skip_reason for r in evaluate(rows) if r.predicted_gib is None}
    assert "torchtune-2409-8b-full-a6000" in skipped  # memory savers not stated
    assert "torchtune-2411-3b-baseline" in skipped  # longest unpacked sample unknown


def test_ablation_steps_move_the_prediction_the_way_they_move_the_measurement(
    rows: list[dict[str, str]],
) -> None:
    """torchtune's Nov-2024 table adds one technique a row: every saving the model predicts
    must point the same way as the measured one."""
    by_id = {r.id: r for r in evaluate(rows)}
    chain = ["packed", "chunkedce", "ac", "optinbwd", "actoffload", "adamw8bit", "lora", "qlora"]
    steps = [by_id[f"torchtune-2411-3b-{name}"] for name in chain]
    for before, after in itertools.pairwise(steps):
        assert after.measured_gib < before.measured_gib
        assert after.predicted_gib < before.predicted_gib, (before.id, after.id)  # type: ignore[operator]
