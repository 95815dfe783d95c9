"""Properties of the paths bad input takes that had none: any numbers a user can give
``gpuscale infer`` (library and CLI parsers), any config.json the parser accepts then priced by
estimate and infer, and profile YAML of the right shape with arbitrary numbers. Each answers
with finite figures or refuses with one :class:`InputError` line, never another exception."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.api import infer
from gpuscale.cli.infer import _engine_options, _loads, _single
from gpuscale.errors import InputError

NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0.0, max_value=10.0),
    st.integers(-3, 10**6),
)
"""Floats a user may type (the API receives them unchecked, inf and nan included), and sane
ones, so that some draws get past the first check."""


def _finite_figures(doc: Any) -> None:
    """Every number of a result document is finite (no inf/nan reaches a table or JSON)."""
    if isinstance(doc, dict):
        for value in doc.values():
            _finite_figures(value)
    elif isinstance(doc, list):
        for value in doc:
            _finite_figures(value)
    elif isinstance(doc, float):
        assert math.isfinite(doc), doc


def _one_line(exc: InputError) -> None:
    assert str(exc) and "\n" not in str(exc), str(exc)


# Mostly one load (so that most draws reach the model), sometimes none, both or a bad one.
ONE_LOAD = st.one_of(
    st.fixed_dictionaries({"concurrency": st.integers(1, 2048)}),
    st.fixed_dictionaries({"request_rate": st.floats(0.01, 1000.0)}),
    st.fixed_dictionaries(
        {}, optional={"concurrency": st.integers(-2, 8), "request_rate": NUMBERS}
    ),
)
LOAD = st.tuples(
    ONE_LOAD,
    st.fixed_dictionaries(
        {
            "input_len": st.integers(1, 32_768) | st.integers(-2, 140_000),
            "output_len": st.integers(1, 4096) | st.integers(-2, 4096),
        },
        optional={
            "num_requests": st.integers(-2, 5000),
            "prefix_hit": NUMBERS,
            "input_cv": NUMBERS,
            "output_cv": NUMBERS,
            "tp": st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64]),
            "pp": st.integers(0, 40),
            "replicas": st.integers(0, 4),
        },
    ),
).map(lambda pair: {**pair[0], **pair[1]})


@pytest.mark.parametrize(
    "kw",
    [
        # regression cases found by the property below go here
        {"input_len": 512, "output_len": 256, "concurrency": 8, "input_cv": 0.5},
        # arrivals over 4.5e315 s overflowed to inf: TTFT nan (now refused, at most 10^9 s)
        {"request_rate": 2.2250738585e-313, "input_len": 1, "output_len": 453},
        {"request_rate": math.inf, "input_len": 1, "output_len": 453},
    ],
)
def test_serving_numbers_found_by_the_property(kw: dict[str, Any]) -> None:
    _serve(kw)


def _serve(kw: dict[str, Any]) -> None:
    try:
        result = infer("llama3.1-8b", gpu="h100-sxm", **kw)
    except InputError as exc:
        _one_line(exc)
        return
    _finite_figures(result.to_dict())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LOAD)
def test_any_serving_numbers_answer_finite_or_refuse_in_one_line(kw: dict[str, Any]) -> None:
    _serve(kw)


# Found by the property: a typed newline came back inside the error, which then spanned lines.
@pytest.mark.parametrize("text", ["\n", "1,\n", "99999999999999999999\n", "4\n,8"])
def test_cli_number_texts_found_by_the_property(text: str) -> None:
    _cli_numbers(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=24))
def test_cli_number_lists_parse_or_refuse_in_one_line(text: str) -> None:
    _cli_numbers(text)


def _cli_numbers(text: str) -> None:
    for parse in (_loads, _single):
        try:
            out = parse(text)
        except InputError as exc:
            _one_line(exc)
            continue
        values = out if isinstance(out, list) else [out]
        assert all(isinstance(v, int) and abs(v) <= 2**53 for v in values)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=3))
def test_engine_options_text_parses_or_refuses_in_one_line(texts: list[str]) -> None:
    try:
        out = _engine_options(tuple(texts))
    except InputError as exc:
        _one_line(exc)
        return
    try:
        infer("llama3.1-8b", gpu="h100-sxm", concurrency=4, engine_options=out)
    except InputError as exc:
        _one_line(exc)
