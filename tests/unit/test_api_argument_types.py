"""A text, number or options argument of an API answer of the wrong type is refused in one line
naming the argument, before the answer runs (``gpuscale.api._arguments``): ``infer(engine=None)``
failed as ``'NoneType' object has no attribute 'lower'``, ``engine_options=[...]`` as ``'list'
object has no attribute 'items'``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gpuscale import api
from gpuscale.api._arguments import _kind
from gpuscale.api.serving_search import search
from gpuscale.errors import InputError

THROUGH_TRAINING_RUN = {"estimate", "calibrate_run"}  # TrainingRun checks its own fields


def _answers() -> dict[str, Callable[..., Any]]:
    found = {"search": search}
    for name in api.__all__:
        value = getattr(api, name)
        if inspect.isfunction(value) and name not in THROUGH_TRAINING_RUN:
            found[name] = value
    return found


def _typed_arguments(func: Callable[..., Any]) -> list[str]:
    return [p.name for p in inspect.signature(func).parameters.values() if _kind(p.annotation)]


PLACEHOLDER: dict[str, Any] = {"str": "x", "float": 1.0, "int": 1}

CASES = [
    pytest.param(func, argument, id=f"{name}-{argument}")
    for name, func in _answers().items()
    for argument in _typed_arguments(func)
]


def test_the_answers_have_typed_arguments() -> None:
    assert {"gpu", "engine", "engine_options", "input_cv", "request_rate", "tp"} <= set(
        _typed_arguments(api.infer)
    )
    assert len(CASES) > 60


@pytest.mark.parametrize(("func", "argument"), CASES)
def test_a_wrong_type_is_refused_naming_the_argument(
    func: Callable[..., Any], argument: str
) -> None:
    """Placeholders of the right type (else None) for what the answer requires: the wrong type
    is refused first."""
    required = {
        p.name: PLACEHOLDER.get(str(p.annotation))
        for p in inspect.signature(func).parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    with pytest.raises(InputError) as err:
        func(**{**required, argument: object()})
    assert err.value.field == argument
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{argument} must be ")
    assert "accepted: " in message


def test_what_the_serving_answer_was_given_wrong() -> None:
    kw: dict[str, Any] = dict(gpu="h100-sxm", input_len=128, output_len=16, concurrency=4)
    for bad, words in (
        ({"engine": None}, "engine must be a string, got None"),
        ({"engine_options": ["max_num_seqs"]}, "engine_options must be a mapping"),
        ({"input_cv": None}, "input_cv must be a number, got None"),
        ({"request_rate": "3", "concurrency": None}, "request_rate must be a number, got '3'"),
        ({"concurrency": 4.0}, "concurrency must be a whole number, got 4.0"),
        ({"tp": True}, "tp must be a whole number, got True"),
    ):
        with pytest.raises(InputError, match=words):
            api.infer("llama3.1-8b", **{**kw, **bad})


def test_numpy_numbers_and_none_where_accepted_are_taken() -> None:
    kw: dict[str, Any] = dict(gpu="h100-sxm", input_len=128, output_len=16, concurrency=4)
    plain = api.infer("llama3.1-8b", input_cv=0.5, **kw).to_dict()
    numpy = api.infer("llama3.1-8b", input_cv=np.float32(0.5), profile=None, **kw).to_dict()
    assert numpy == plain


def test_a_count_given_as_none_beside_deepep_options_is_refused_by_name() -> None:
    """``decode_attention_dp=None`` with DeepEP options failed comparing None with 1."""
    with pytest.raises(InputError, match="decode_attention_dp must be a whole number, got None"):
        api.infer(
            "deepseek-r1", gpu="h200-sxm", engine="sglang", input_len=1024, output_len=64,
            concurrency=64, prefill_workers=1, prefill_tp=8, decode_workers=1, decode_tp=8,
            decode_attention_dp=None,  # type: ignore[arg-type]
            engine_options={"decode_moe_a2a_deepep": True},
        )  # fmt: skip


def test_numpy_counts_are_passed_on_as_ints() -> None:
    result = api.infer(
        "llama3.1-8b", gpu="h100-sxm", input_len=np.int64(128), output_len=np.int32(16),
        concurrency=np.int64(4),
    )  # fmt: skip
    assert type(result.to_dict()["client"]["concurrency"]) is int
