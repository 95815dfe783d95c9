"""An on/off argument of an API answer takes True or False only: ``compile="no"`` is truthy
and was priced as compiled. The check is the one :class:`gpuscale.api.TrainingRun` applies to
its bool fields (tests/unit/test_training_run.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from gpuscale import api
from gpuscale.errors import InputError

ANSWERS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (api.plan, {"gpus": 8}),
    (api.scale, {"max_gpus": 8}),
    (api.fit, {}),
]


def _bool_arguments(func: Callable[..., Any]) -> list[str]:
    return [
        p.name
        for p in inspect.signature(func).parameters.values()
        if p.annotation in ("bool", bool)
    ]


CASES = [
    pytest.param(func, given, name, id=f"{func.__name__}-{name}")
    for func, given in ANSWERS
    for name in _bool_arguments(func)
]


def test_the_answers_have_on_off_arguments() -> None:
    assert {"compile"} <= set(_bool_arguments(api.plan)) & set(_bool_arguments(api.scale))
    assert {"flash_attention", "double_quant", "dropout"} <= set(_bool_arguments(api.fit))


@pytest.mark.parametrize(("func", "given", "name"), CASES)
@pytest.mark.parametrize("value", ["no", 0, None])
def test_an_on_off_argument_takes_true_or_false_only(
    func: Callable[..., Any], given: dict[str, Any], name: str, value: object
) -> None:
    with pytest.raises(InputError) as err:
        func("llama3.1-8b", gpu="h100-sxm", **given, **{name: value})
    assert err.value.field == name
    message = str(err.value)
    assert "\n" not in message and name in message and "True or False" in message


THROUGH_TRAINING_RUN = {"estimate", "calibrate_run"}  # tests/unit/test_training_run.py


def _answers_with_on_off_arguments() -> dict[str, Callable[..., Any]]:
    found = {}
    for name in api.__all__:
        value = getattr(api, name)
        if callable(value) and not isinstance(value, type) and _bool_arguments(value):
            found[name] = value
    return found


def test_every_answer_checks_its_on_off_arguments_before_it_runs() -> None:
    """Each answer with a bool argument, given a wrong one and placeholders for what it
    requires: refused for the bool, before anything else is read or run."""
    answers = _answers_with_on_off_arguments()
    assert {"plan", "scale", "fit", "doctor", "cluster_simulate", "bench_collectives"} <= set(
        answers
    )
    for name, func in answers.items():
        if name in THROUGH_TRAINING_RUN:
            continue
        required = [
            p
            for p in inspect.signature(func).parameters.values()
            if p.default is p.empty and p.kind is not p.KEYWORD_ONLY
        ]
        for argument in _bool_arguments(func):
            with pytest.raises(InputError) as err:
                func(*[None] * len(required), **{argument: "no"})
            assert err.value.field == argument, (name, argument)
