"""An on/off argument of an API answer takes True or False only: ``compile="no"`` is truthy
and was priced as compiled. The check is the one :class:`gpuscale.api.TrainingRun` applies to
its bool fields (tests/unit/test_training_run.py)."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np
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


def _api_functions_with_on_off_arguments() -> dict[str, Callable[..., Any]]:
    """Every public function of every ``gpuscale.api`` module, re-exported or not (the CLI and
    the web page call ``api.serving_search.search`` by its module)."""
    found = {}
    for info in pkgutil.iter_modules(api.__path__):
        module = importlib.import_module(f"gpuscale.api.{info.name}")
        for name, value in vars(module).items():
            if (
                not name.startswith("_")
                and inspect.isfunction(value)
                and value.__module__ == module.__name__
                and _bool_arguments(value)
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_api_function_checks_its_on_off_arguments() -> None:
    functions = _api_functions_with_on_off_arguments()
    assert "serving_search.search" in functions
    for name, func in functions.items():
        if name.split(".")[1] in THROUGH_TRAINING_RUN:
            continue
        required = {
            p.name: None
            for p in inspect.signature(func).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        }
        for argument in _bool_arguments(func):
            with pytest.raises(InputError) as err:
                func(**{**required, argument: "no"})
            assert err.value.field == argument, (name, argument)


def test_a_numpy_bool_is_a_bool() -> None:
    """``numpy.bool_`` (a sweep built with numpy, a pandas column) is True or False: taken, and
    answered as the Python bool, so the ``--json`` document stays plain JSON."""
    run = api.TrainingRun(
        model="llama3.1-8b", gpu="h100-sxm", gpus=8, compile=np.True_, flash_attention=np.False_
    )
    assert run.compile is True and run.flash_attention is False
    python = api.TrainingRun(
        model="llama3.1-8b", gpu="h100-sxm", gpus=8, compile=True, flash_attention=False
    )
    assert api.estimate(run).to_dict() == api.estimate(python).to_dict()
    json.dumps(api.estimate(run).to_dict())
    fitted = api.fit("llama3.1-8b", gpu="h100-sxm", flash_attention=np.False_).to_dict()
    assert fitted == api.fit("llama3.1-8b", gpu="h100-sxm", flash_attention=False).to_dict()
    json.dumps(fitted)


def test_an_engine_option_takes_a_numpy_bool_as_its_bool() -> None:
    """Engine options read on/off values through the same rule (``_booleans.is_bool``): a
    numpy bool is the bool it holds, and a string is still refused."""
    from gpuscale.api.serving import infer
    from gpuscale.errors import InputError

    kw: dict[str, Any] = dict(
        gpu="h200-sxm", engine="vllm", input_len=1024, output_len=128, concurrency=8, tp=2
    )
    numpy_on = infer(
        "Qwen/Qwen3-235B-A22B-FP8", engine_options={"deepgemm_moe_worst_case": np.True_}, **kw
    )
    on = infer("Qwen/Qwen3-235B-A22B-FP8", engine_options={"deepgemm_moe_worst_case": True}, **kw)
    assert numpy_on.to_dict()["options"][0]["tpot_ms"] == on.to_dict()["options"][0]["tpot_ms"]
    with pytest.raises(InputError):
        infer("Qwen/Qwen3-235B-A22B-FP8", engine_options={"deepgemm_moe_worst_case": "yes"}, **kw)
