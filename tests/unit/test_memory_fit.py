"""``gpuscale fit`` in-process: every catalog model answers, and no option value crashes it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.cli.main import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["fit", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("model", sorted(catalog.models()))
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_every_catalog_model_gets_an_answer(
    capsys: pytest.CaptureFixture[str], model: str, mode: str
) -> None:
    code, out, err = _run(capsys, model, "--mode", mode, "--gpu", "a100-sxm-80gb", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert isinstance(doc["fits"], bool)
    assert doc["total_gib"] > 0 and doc["smallest"]
    assert doc["fits"] == (doc["total_gib"] <= doc["capacity_gib"])
    best = doc["smallest"][0]
    assert best["memory_per_gpu_gib"] <= doc["capacity_gib"]
    if doc["fits"]:
        assert best["gpus"] == 1


OPTION_VALUES = {
    "--seq": st.integers(-2, 70000).map(str) | st.text(max_size=4),
    "--mbs": st.integers(-1, 64).map(str),
    "--grad-accum": st.integers(-1, 8).map(str),
    "--tp": st.integers(-1, 16).map(str),
    "--pp": st.integers(-1, 16).map(str),
    "--dp": st.integers(-1, 16).map(str),
    "--zero": st.integers(-1, 4).map(str),
    "--lora-rank": st.integers(-1, 512).map(str),
    "--lora-targets": st.sampled_from(["q,v", "all", "", "q,,v", "Q", "head,down", "x"]),
    "--finetune": st.sampled_from(["full", "lora", "qlora", "dora"]),
    "--optimizer": st.sampled_from(["adamw", "adafactor", "sgd-momentum", "adamw-8bit", "lion"]),
    "--recompute": st.sampled_from(["none", "selective", "full", "all"]),
    "--offload": st.sampled_from(["none", "optimizer", "params", "disk"]),
    "--batch": st.integers(-1, 256).map(str),
    "--context": st.integers(-1, 200000).map(str),
    "--weights": st.sampled_from(["bf16", "int4", "int3"]),
    "--mode": st.sampled_from(["train", "infer", "x"]),
    "--loss": st.sampled_from(["standard", "chunked", "fused", "liger"]),
}
FLAGS = [
    "--pure-bf16",
    "--paged-optimizer",
    "--optimizer-in-backward",
    "--activation-offload",
    "--no-flash",
    "--dropout",
    "--no-double-quant",
]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(st.sampled_from(sorted(OPTION_VALUES)), st.just(None), max_size=6).flatmap(
        lambda keys: st.fixed_dictionaries({k: OPTION_VALUES[k] for k in keys})
    ),
    st.lists(st.sampled_from(FLAGS), unique=True, max_size=3),
)
def test_any_option_values_give_an_answer_or_one_line_exit_2(
    options: dict[str, str], flags: list[str]
) -> None:
    args = ["mistral-7b", "--gpu", "l40s", "--json", *flags]
    for key, value in options.items():
        args += [key, value]
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["fit", *args])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1, err.getvalue()
    else:
        assert json.loads(out.getvalue())["total_gib"] > 0
