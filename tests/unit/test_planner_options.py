"""Parsing the planner commands' shared inputs: token counts and defaults."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cli._common import check_writable
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.planner.inputs import build_inputs, parse_count


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


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from gpuscale.cli.main import main

    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


PLAN = ("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "16")
SCALE = ("scale", "llama3.1-8b", "--gpu", "h100-sxm", "--max-gpus", "64")


@pytest.mark.parametrize("command", [PLAN, SCALE], ids=["plan", "scale"])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seq", "0"], "--seq must be 1 to 131072 (llama3.1-8b's maximum context), got 0"),
        (["--gpus-per-node", "0"], "--gpus-per-node must be a positive integer, got 0"),
        (["--nics-per-node", "0"], "--nics-per-node must be a positive integer, got 0"),
        (["--html", "/proc/x/y.html"], "cannot write --html '/proc/x/y.html'"),
        (["--price", "inf"], "--price must be a finite number of USD per GPU-hour, got inf"),
        (["--price", "1e-310"], "got 1e-310; accepted: 0.0001 to 10000"),
        (["--price", "nan"], "--price must be a finite number"),
        (["--tokens", "1e400"], "--tokens '1e400' is not a finite count"),
        (["--tokens", "0.5"], "--tokens 0.5 is less than one global batch; accepted: at least"),
        (["--tokens", "1M", "--gbs", "512"], "at least 512 x 4096 = 2,097,152 tokens"),
        (["--tokens", "1e40"], "--tokens 1e+40 is more than any training run; accepted: at most"),
        (["--tokens", "1001T"], "accepted: at most 1e+15 (1000T"),
    ],
)
def test_bad_input_is_one_line_before_any_search(
    capsys: pytest.CaptureFixture[str], command: tuple[str, ...], args: list[str], message: str
) -> None:
    code, out, err = _cli(capsys, *command, *args)
    assert code == 2
    assert out == "", "rejected before the search prints anything"
    assert err.count("\n") == 1 and message in err, err


def test_html_path_is_probed_without_leaving_anything_behind(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "report.html"
    with pytest.raises(InputError, match="does not exist; create it first"):
        check_writable(str(target), "--html")  # a missing folder is refused, never created
    assert not (tmp_path / "new").exists()
    check_writable(str(tmp_path / "report.html"), "--html")
    assert not (tmp_path / "report.html").exists()
    kept = tmp_path / "old.html"
    kept.write_text("previous report")
    check_writable(str(kept), "--html")
    assert kept.read_text() == "previous report"
    check_writable(None, "--html")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InputError, match="cannot write --html"):
        check_writable(str(blocker / "report.html"), "--html")


def test_profile_file_is_laid_over_the_framework_profile(tmp_path: Path) -> None:
    """--profile means what it means in estimate: the keys the file sets win, the rest comes
    from --framework (not from generic, and not from the file's own base)."""
    path = tmp_path / "cal.yaml"
    path.write_text("name: measured\nbase: generic\nconstants: {kernel_launch_us: 9.0}\n")
    megatron = load_profile("megatron")
    generic = load_profile("generic")
    key = "elementwise_hidden_passes"
    assert megatron.const(key) != generic.const(key)
    inputs = build_inputs(**{**_ARGS, "framework": "megatron", "profile_file": str(path)})
    assert inputs.profile.const("kernel_launch_us") == 9.0
    assert inputs.profile.const(key) == megatron.const(key)


_ARGS: dict[str, Any] = {
    "model": "llama3.1-8b",
    "gpu": "h100-sxm",
    "inter": "ib-ndr400",
    "gpus_per_node": 8,
    "nics_per_node": None,
    "gbs": None,
    "seq": None,
    "tokens": None,
    "price": None,
    "precision": "bf16",
    "finetune": "full",
    "framework": "generic",
    "profile_file": None,
}


@settings(max_examples=60, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, 1e-300]))
def test_any_price_is_a_finite_positive_number_or_a_one_line_error(price: float) -> None:
    try:
        inputs = build_inputs(**{**_ARGS, "price": price})
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("--price must be a finite number")
    else:
        value = inputs.workload.price_per_gpu_hour
        assert value is not None and math.isfinite(value) and value > 0
