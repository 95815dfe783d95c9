"""The public API: typed results, the same numbers the commands print, one batch default, one
bottleneck rule, and bad input refused at the boundary with the argument named."""

from __future__ import annotations

import json

import pytest

import gpuscale
from gpuscale import api, catalog
from gpuscale.api import Result
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.words import bottleneck

EST = {
    "gpu": "h100-sxm",
    "gpus": 64,
    "tp": 8,
    "pp": 2,
    "mbs": 1,
    "gbs": 256,
    "seq": 4096,
    "recompute": "selective",
    "zero": 1,
    "framework": "megatron",
}


def test_entry_points_are_reexported_from_the_package() -> None:
    for name in ("fit", "estimate", "plan", "scale", "advise_comm"):
        assert getattr(gpuscale, name) is getattr(api, name)


def test_estimate_is_a_frozen_typed_result() -> None:
    r = gpuscale.estimate("llama3.1-70b", **EST)  # type: ignore[arg-type]
    assert isinstance(r, Result)
    with pytest.raises(AttributeError):
        r.step_time_s = 1.0  # type: ignore[misc]
    doc = r.to_dict()
    assert json.loads(json.dumps(doc)) == doc
    assert next(iter(doc)) == "schema_version"
    assert sum(doc["breakdown"].values()) == pytest.approx(doc["step_time_s"], rel=1e-12)
    assert sum(doc["exposed_comm_parts"].values()) == pytest.approx(
        doc["breakdown"]["exposed_comm"]
    )
    assert doc["plan"]["mbs"] == 1 and doc["plan"]["gbs"] == 256
    assert r.bottleneck == doc["bottleneck"] and r.warnings == tuple(doc["uncertainty"]["warnings"])
    assert len(r.figures()) == 1


def test_spec_objects_work_where_ids_do() -> None:
    by_id = gpuscale.estimate("llama3.1-70b", **EST)  # type: ignore[arg-type]
    by_spec = gpuscale.estimate(
        catalog.model("llama3.1-70b"),
        **{**EST, "gpu": catalog.gpu("h100-sxm")},  # type: ignore[arg-type]
        inter=catalog.link("ib-ndr400"),
    )
    assert by_spec.to_dict() == by_id.to_dict()


def test_estimate_without_gbs_assumes_the_plan_recipe_batch() -> None:
    spec = catalog.model("llama3.1-70b")
    r = gpuscale.estimate("llama3.1-70b", gpu="h100-sxm", gpus=64, tp=8, pp=2)
    recipe = int(defaults.global_batch(spec, 4096).value)
    assert r.plan.global_batch == recipe == 1024
    assert "gbs" in r.assumed and "1024" in r.assumed["gbs"]
    plan = gpuscale.plan("llama3.1-70b", gpu="h100-sxm", gpus=64, top=1)
    assert plan.inputs.workload.global_batch == recipe
    # a data-parallel degree that does not divide the recipe: the nearest multiple of mbs x dp
    odd = gpuscale.estimate("llama3.1-70b", gpu="h100-sxm", gpus=48, tp=8)
    assert odd.plan.global_batch % 6 == 0 and abs(odd.plan.global_batch - recipe) <= 3
    assert "rounded to a multiple of mbs x dp = 6" in odd.assumed["gbs"]


def test_estimate_and_plan_word_the_bottleneck_with_one_rule() -> None:
    result = gpuscale.plan("llama3.1-8b", gpu="h100-sxm", gpus=16, gbs=128, top=1)
    win = result.winner
    p = win.plan
    est = gpuscale.estimate(
        "llama3.1-8b",
        gpu="h100-sxm",
        gpus=16,
        tp=p.tp,
        pp=p.pp,
        cp=p.cp,
        vp=p.vp,
        ep=p.ep,
        mbs=p.micro_batch,
        gbs=p.global_batch,
        recompute=p.recompute,
        zero=p.zero,
    )
    assert est.step_time_s == pytest.approx(win.step_time_s, rel=1e-12)
    assert dict(est.parts_s) == pytest.approx(dict(win.parts_s), rel=1e-12)
    assert est.bottleneck == bottleneck(win.parts_s, win.mfu)
    assert est.to_dict()["bottleneck"] == result.to_dict()["plans"][0]["bottleneck"]
    assert est.bottleneck in result.why


def test_plan_and_scale_spell_batch_fields_as_the_flags() -> None:
    doc = gpuscale.plan("llama3.1-8b", gpu="h100-sxm", gpus=8, gbs=64, top=2).to_dict()
    assert doc["gbs"] == 64 and "global_batch" not in doc
    assert {"mbs", "gbs"} <= doc["plans"][0]["plan"].keys()
    assert "micro_batch" not in doc["plans"][0]["plan"]
    scale = gpuscale.scale("gpt3-350m", gpu="a100-sxm-80gb", max_gpus=8, gbs=64, seq=2048)
    sdoc = scale.to_dict()
    assert sdoc["gbs"] == 64 and "global_batch" not in sdoc
    assert len(scale.figures()) == 3


def test_fit_result() -> None:
    r = gpuscale.fit("llama3.1-8b", gpu="h100-sxm", mbs=2)
    doc = r.to_dict()
    assert doc["training"]["mbs"] == 2 and "micro_batch" not in doc["training"]
    assert r.fits == doc["fits"] and r.verdict == doc["verdict"]
    assert len(r.figures()) == 1
    infer = gpuscale.fit("llama3.1-8b", mode="infer", batch=4, context=2048)
    assert infer.to_dict()["inference"]["batch"] == 4


def test_fit_says_when_full_recompute_would_fit() -> None:
    here = gpuscale.fit("llama3.1-8b", gpu="a100-sxm-80gb", seq=8192, mbs=4, dp=8, zero=3)
    assert not here.fits
    assert here.notes == (here.to_dict()["notes"][0],)
    assert here.notes[0].startswith("with --recompute full it fits on this set-up")
    smaller = gpuscale.fit("llama3.1-8b", gpu="a100-sxm-80gb", seq=8192, mbs=8)
    assert not smaller.fits
    assert smaller.notes[0].startswith("with --recompute full: needs 4x A100")


def test_advise_comm_result() -> None:
    r = gpuscale.advise_comm("llama3.1-8b", gpus=16, inter="roce-100")
    doc = r.to_dict()
    assert doc["recommendation"] == r.recommendation
    assert doc["hooks"][0]["hook"] == "default"
    assert len(r.figures()) == 1


@pytest.mark.parametrize(
    ("kwargs", "field", "needle"),
    [
        ({"gpus": 0}, "gpus", "--gpus must be a positive integer"),
        ({"gbs": 0}, "gbs", "--gbs must be a positive integer"),
        ({"mbs": 0}, "mbs", "--mbs"),
        ({"tp": 3, "gpus": 24, "pp": 1}, "tp", "--tp 3 does not divide"),
        ({"nics_per_node": 1000}, "nics_per_node", "--nics-per-node must be 1 to 8"),
        ({"slowest_gpu": "b200"}, "slowest_gpu", "--slowest-gpu b200 is faster"),
        ({"finetune": "lora", "lora_rank": 100000}, "lora_rank", "--lora-rank must be 1 to 8192"),
        ({"lora_rank": 8}, "lora_rank", "applies to --finetune lora or qlora"),
        ({"cp": 3, "gpus": 48, "seq": 4095}, "cp", "2 x --cp"),
    ],
)
def test_estimate_bad_input_names_the_argument(
    kwargs: dict[str, object], field: str, needle: str
) -> None:
    args = {**EST, **kwargs}
    with pytest.raises(InputError) as err:
        gpuscale.estimate("llama3.1-70b", **args)  # type: ignore[arg-type]
    assert err.value.field == field
    assert needle in str(err.value)


def test_a_slower_card_is_accepted_and_sets_the_pace() -> None:
    base = gpuscale.estimate("llama3.1-70b", **EST)  # type: ignore[arg-type]
    mixed = gpuscale.estimate("llama3.1-70b", **EST, slowest_gpu="a100-sxm-80gb")  # type: ignore[arg-type]
    assert mixed.step_time_s > base.step_time_s


def test_fit_refuses_a_lora_rank_above_the_hidden_size() -> None:
    with pytest.raises(InputError, match="--lora-rank must be 1 to 4096") as err:
        gpuscale.fit("llama3.1-8b", finetune="lora", lora_rank=100000)
    assert err.value.field == "lora_rank"


def test_the_cli_names_the_flag_of_an_argument_the_message_does_not_name() -> None:
    from gpuscale.cli.main import _message, flag_for

    assert flag_for("gpus_per_node") == "--gpus-per-node"
    assert flag_for("flash_attention") == "--no-flash-attention"
    assert _message(InputError("must be 1 to 8", field="nics_per_node")).startswith(
        "--nics-per-node: "
    )
    assert _message(InputError("--tp 3 does not divide", field="tp")) == "--tp 3 does not divide"
