"""One training run described once (:class:`gpuscale.api.TrainingRun`): ``estimate`` and
``calibrate_run`` take it whole or as keyword arguments and answer the same; it is checked when
built; their signatures list its fields with its defaults."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from gpuscale import api
from gpuscale.api import TrainingRun
from gpuscale.errors import InputError

RUN = {"gpu": "h100-sxm", "gpus": 16, "tp": 2, "pp": 2, "recompute": "selective", "zero": 1}


def test_a_run_given_whole_or_as_keywords_gets_the_same_answer() -> None:
    run = TrainingRun(model="llama3.1-8b", **RUN)
    whole = api.estimate(run, framework="megatron")
    keywords = api.estimate("llama3.1-8b", **RUN, framework="megatron")
    assert whole.to_dict() == keywords.to_dict()
    # keyword arguments given with a whole run replace its values
    wider = api.estimate(run, tp=4, framework="megatron")
    assert (
        wider.to_dict()
        == api.estimate("llama3.1-8b", **{**RUN, "tp": 4}, framework="megatron").to_dict()
    )
    assert wider.plan.tp == 4 and wider.plan.dp == 2


def test_calibrate_run_takes_the_same_run() -> None:
    run = TrainingRun(model="llama3.1-8b", **RUN)
    measured = {"measured_tokens_per_s": 120_000.0}
    whole = api.calibrate_run(run, **measured)
    keywords = api.calibrate_run("llama3.1-8b", **RUN, **measured)
    assert whole.to_dict() == keywords.to_dict()
    assert whole.assumed == run.specs.assumed


def test_a_run_is_checked_when_built_and_when_changed() -> None:
    with pytest.raises(InputError) as err:
        TrainingRun(model="llama3.1-8b", gpu="h100-sxm", gpus=10, tp=4)
    assert err.value.field == "gpus"
    run = TrainingRun(model="llama3.1-8b", gpu="h100-sxm", gpus=8)
    assert run.specs.plan.dp == 8 and "gbs" in run.specs.assumed
    with pytest.raises(InputError) as err:
        dataclasses.replace(run, tp=3)
    assert err.value.field == "gpus"


def test_an_unknown_keyword_is_refused() -> None:
    with pytest.raises(TypeError, match="tq"):
        api.estimate("llama3.1-8b", gpu="h100-sxm", gpus=8, tq=2)


@pytest.mark.parametrize("func", [api.estimate, api.calibrate_run])
def test_signatures_list_every_field_of_the_run_with_its_default(func: object) -> None:
    params = inspect.signature(func).parameters  # type: ignore[arg-type]
    for f in dataclasses.fields(TrainingRun):
        if not f.init or f.name == "model":
            continue
        assert params[f.name].kind is inspect.Parameter.KEYWORD_ONLY
        expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
        assert params[f.name].default == expected, f.name
    assert next(iter(params)) == "model"


BOOL_FIELDS = [
    f.name for f in dataclasses.fields(TrainingRun) if f.init and f.type in ("bool", bool)
]


def test_every_bool_field_is_found() -> None:
    # the list the next test walks is the dataclass's, so a new bool field is checked too
    assert {"compile", "flash_attention", "sequence_parallel", "offload_optimizer"} <= set(
        BOOL_FIELDS
    )


@pytest.mark.parametrize("name", BOOL_FIELDS)
@pytest.mark.parametrize("value", ["yes", "no", 1, 0, None, 1.0])
def test_a_bool_field_takes_true_or_false_only(name: str, value: object) -> None:
    base = {"model": "llama3.1-8b", "gpu": "h100-sxm", "gpus": 8}
    with pytest.raises(InputError) as err:
        TrainingRun(**base, **{name: value})
    assert err.value.field == name
    message = str(err.value)
    assert "\n" not in message and name in message and "True or False" in message
    assert repr(value) in message
    # the same check when a built run is changed, and through the API functions
    run = TrainingRun(**base)
    with pytest.raises(InputError):
        dataclasses.replace(run, **{name: value})
    with pytest.raises(InputError) as err:
        api.estimate(run, **{name: value})
    assert err.value.field == name
    split = ("embedding_as_layer", "loss_as_layer")
    # tp and pp > 1, where every one of them means something; the EP overlap, with experts
    where = {"tp": 2, "pp": 2}
    if name == "ep_overlap":
        where = {"model": "qwen3-30b-a3b", "ep": 8}
    for ok in (True, False):
        # both counted as layers or neither: 32 + 1 layers do not split over 2 stages
        both = dict.fromkeys(split, ok) if name in split else {name: ok}
        assert getattr(TrainingRun(**{**base, **where}, **both), name) is ok


def test_calibrate_run_echoes_the_run_as_estimate_does() -> None:
    run = TrainingRun(model="llama3.1-8b", **RUN, compile=True, seq=2048)
    estimated = api.estimate(run, framework="megatron")
    calibrated = api.calibrate_run(
        run, framework="megatron", measured_tokens_per_s=0.9 * estimated.tokens_per_s
    )
    doc, expected = calibrated.to_dict(), estimated.to_dict()
    echoed = ("model", "gpu", "gpus", "gpus_per_node", "inter", "framework", "seq", "precision")
    for key in (*echoed, "compile", "plan", "assumed"):
        assert doc[key] == expected[key], key
    assert calibrated.plan == estimated.plan == run.specs.plan
    assert doc["start_profile"] == expected["profile"]
    assert doc["finetune"] == run.finetune
