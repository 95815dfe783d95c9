"""Parsing the planner commands' shared inputs: token counts and defaults."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cli._planner_options import build_inputs, parse_count
from gpuscale.errors import InputError


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("15T", 15e12),
        ("15.6t", 15.6e12),
        ("300B", 300e9),
        ("2.5e12", 2.5e12),
        ("1_000_000", 1e6),
        ("750M", 750e6),
        ("4k", 4e3),
        (" 2 G ", 2e9),
        ("1,000", 1e3),
    ],
)
def test_counts_with_suffixes(text: str, value: float) -> None:
    assert parse_count(text) == pytest.approx(value)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=12))
def test_any_text_parses_to_a_positive_count_or_a_one_line_error(text: str) -> None:
    try:
        value = parse_count(text)
    except InputError as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith("--tokens")
    else:
        assert value > 0


@settings(max_examples=50, deadline=None)
@given(st.floats(min_value=1e-3, max_value=1e15), st.sampled_from(["", "K", "M", "B", "T"]))
def test_formatted_numbers_round_trip(number: float, suffix: str) -> None:
    scale = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[suffix]
    assert parse_count(f"{number!r}{suffix}") == pytest.approx(number * scale)


def test_defaults_are_reported_and_explicit_values_are_not() -> None:
    inputs = build_inputs(
        model="llama3.1-8b",
        gpu="h100-sxm",
        inter="ib-ndr400",
        gpus_per_node=8,
        nics_per_node=None,
        gbs=None,
        seq=None,
        tokens=None,
        price=None,
        precision="bf16",
        finetune="full",
        framework="generic",
        profile_file=None,
    )
    assert set(inputs.assumed) == {"seq", "gbs", "tokens"}
    assert inputs.workload.global_batch == 512 and inputs.workload.training.seq_len == 4096
    given_all = build_inputs(
        model="llama3.1-8b",
        gpu="h100-sxm",
        inter="ib-ndr400",
        gpus_per_node=8,
        nics_per_node=None,
        gbs=64,
        seq=2048,
        tokens="1T",
        price=2.0,
        precision="bf16",
        finetune="full",
        framework="generic",
        profile_file=None,
    )
    assert given_all.assumed == {}
    assert given_all.workload.tokens == 1e12


def test_sequence_longer_than_the_model_allows_is_an_input_error() -> None:
    with pytest.raises(InputError, match="maximum context"):
        build_inputs(
            model="gpt3-125m",
            gpu="h100-sxm",
            inter="ib-ndr400",
            gpus_per_node=8,
            nics_per_node=None,
            gbs=None,
            seq=8192,
            tokens=None,
            price=None,
            precision="bf16",
            finetune="full",
            framework="generic",
            profile_file=None,
        )
