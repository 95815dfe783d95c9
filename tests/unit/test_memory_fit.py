"""``gpuscale fit`` in-process: every catalog model answers, and no option value crashes it."""

from __future__ import annotations

import json
from pathlib import Path

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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # D1: context parallelism splits the sequence into equal chunks
        (["--cp", "3"], "--seq 4096 is not divisible by 2 x --cp = 6"),
        (["--cp", "8192", "--seq", "4096"], "--seq 4096 is not divisible by 2 x --cp = 16384"),
        # D2: options typed in the mode (or fine-tune method) where they do nothing
        (["--mode", "infer", "--zero", "3"], "--zero applies to --mode train; --mode infer takes"),
        (["--mode", "infer", "--dp", "4", "--cp", "2"], "--dp, --cp apply to --mode train"),
        (["--mode", "infer", "--finetune", "lora"], "--finetune applies to --mode train"),
        (["--mode", "infer", "--mbs", "4"], "--mbs applies to --mode train"),
        (["--mode", "infer", "--optimizer", "sgd-momentum"], "--optimizer applies to"),
        (["--mode", "infer", "--precision", "fp8"], "--precision applies to --mode train"),
        (["--batch", "4"], "--batch applies to --mode infer; add --mode infer, or leave it out"),
        (["--mode", "train", "--context", "4"], "--context applies to --mode infer"),
        (["--weights", "int4", "--kv-dtype", "fp8"], "--weights, --kv-dtype apply to --mode infer"),
        (["--lora-targets", "q"], "--lora-targets applies to --finetune lora or qlora"),
        (["--finetune", "full", "--lora-rank", "8"], "--lora-rank applies to --finetune lora"),
        (["--no-double-quant"], "--no-double-quant applies to --finetune qlora"),
        (["--finetune", "lora", "--no-double-quant"], "--no-double-quant applies to --finetune"),
        # D3: ZeRO over a single rank shards nothing
        (["--zero", "3"], "--zero 3 shards over the data-parallel ranks, and --dp x --cp is 1"),
        (["--zero", "1", "--dp", "1"], "--zero 1 shards over the data-parallel ranks"),
        # D4: no gradient buffer to accumulate into
        (["--optimizer-in-backward", "--grad-accum", "4"], "--optimizer-in-backward cannot"),
        # D5: pure 16-bit training is a bf16 recipe
        (["--pure-bf16", "--precision", "fp32"], "--pure-bf16 needs --precision bf16, got fp32"),
        (["--pure-bf16", "--precision", "fp8"], "--pure-bf16 needs --precision bf16, got fp8"),
        # the flag the user typed is the one named
        (["--mbs", "0"], "--mbs must be a positive integer, got 0"),
        (["--seq", "10000000"], "--seq must be 1 to 131072 (llama3.1-8b's maximum context)"),
        (["--mode", "infer", "--context", "100000000"], "--context must be 1 to 131072"),
        (["--tp", "3"], "--tp 3 does not divide the 32 attention heads, 8 KV heads"),
    ],
)
def test_settings_that_do_nothing_or_contradict_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, out, err = _run(capsys, "llama3.1-8b", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize(
    "args",
    [
        ["--mode", "infer", "--tp", "2", "--seq", "2048", "--batch", "4"],
        ["--finetune", "qlora", "--lora-rank", "8", "--no-double-quant"],
        ["--dp", "4", "--zero", "3", "--grad-accum", "2"],
        ["--cp", "2", "--zero", "1"],
        ["--pure-bf16", "--optimizer-in-backward"],
        ["--zero", "0", "--mode", "train"],
    ],
)
def test_options_given_where_they_apply_are_accepted(
    capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    code, out, err = _run(capsys, "llama3.1-8b", *args, "--json")
    assert code == 0, err
    assert json.loads(out)["total_gib"] > 0


def test_profile_is_a_file_laid_over_the_generic_profile(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--profile means what it means in estimate: the keys the file sets win, every other key
    comes from the generic profile (the file alone lacks the memory constants fit needs)."""
    path = tmp_path / "cal.yaml"
    path.write_text("name: measured\nconstants: {memory_cuda_context_gib: 2.5}\n")
    code, out, err = _run(capsys, "llama3.1-8b", "--profile", str(path), "--json")
    assert code == 0, err
    overlaid = json.loads(out)
    code, out, err = _run(capsys, "llama3.1-8b", "--json")
    plain = json.loads(out)
    assert overlaid["profile"] == "measured" and plain["profile"] == "generic"
    assert overlaid["breakdown_gib"]["overhead"] > plain["breakdown_gib"]["overhead"]
    rest = {k: v for k, v in plain["breakdown_gib"].items() if k != "overhead"}
    assert {k: overlaid["breakdown_gib"][k] for k in rest} == pytest.approx(rest)
