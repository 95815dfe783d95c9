"""Calibration profiles are validated key by key: a typo or a wrong range is a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.errors import InputError


def overlay(tmp_path: Path, text: str, name: str = "p.yaml") -> str:
    path = tmp_path / name
    path.write_text("schema_version: 1\n" + text)
    return str(path)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("links: 5\n", "links must be a mapping"),
        ("constants: 5\n", "constants must be a mapping"),
        ("gemm: [1, 2]\n", "gemm must be a mapping"),
        ("attention_efficiency: 0.5\n", "attention_efficiency must be a mapping"),
        ("hbm_efficiency: 0\n", "hbm_efficiency must be a number in (0, 1]"),
        ("hbm_efficiency: 2\n", "hbm_efficiency must be a number in (0, 1]"),
        (
            "constants: {kernel_launch_us: -100000}\n",
            "kernel_launch_us must be a finite number >= 0",
        ),
        ("constants: {kernel_launch_us: .nan}\n", "kernel_launch_us must be a finite number >= 0"),
        ("constants: {kernel_launch_us: true}\n", "kernel_launch_us must be a finite number >= 0"),
        ("constants: {kernel_launch_us: abc}\n", "got 'abc'"),
        ("constants: {kernel_lunch_us: 4}\n", "did you mean kernel_launch_us"),
        ("constants: {memory_allocator_fragmentation: 0.5}\n", ">= 1"),
        ("overlap: {dp: 1.5}\n", "overlap.dp must be a number in [0, 1]"),
        ("overlap: {dpp: 0.5}\n", "overlap.dpp is not a known key; did you mean"),
        ("links: {nvlink: 0.5}\n", "links.nvlink must be a mapping"),
        ("links: {nvlink: {bandwith_efficiency: 0.5}}\n", "did you mean bandwidth_efficiency"),
        ("links: {ethernet: {bandwidth_efficiency: -1}}\n", "(0, 1]"),
        ("gemm: {hoper: {flops: [1.0e9], efficiency: [0.5]}}\n", "did you mean hopper"),
        ("gemm: {hopper: {flops: [1], efficiency: [2]}}\n", "gemm.hopper.efficiency[0]"),
        (
            "gemm: {hopper: {flops: [2.0e9, 1.0e9], efficiency: [0.5, 0.6]}}\n",
            "strictly increasing",
        ),
        ("attention_length: {tokens: [256, 512], factor: [1.0]}\n", "attention_length needs"),
        ("unknown_top_key: 1\n", "unknown_top_key is not a known key"),
        ("name: [1]\n", "name must be text"),
    ],
)
def test_bad_profiles_name_the_key_and_what_is_accepted(
    tmp_path: Path, text: str, needle: str
) -> None:
    with pytest.raises(InputError) as err:
        load_profile_for("generic", overlay(tmp_path, text))
    message = str(err.value)
    assert needle in message
    assert "\n" not in message and str(tmp_path) in message


def test_binary_and_missing_files_are_one_line_errors(tmp_path: Path) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(InputError, match="not a text file"):
        load_profile_for("generic", str(binary))
    with pytest.raises(InputError, match="cannot read profile"):
        load_profile_for("generic", str(tmp_path / "missing.yaml"))


def test_a_good_overlay_keeps_its_name_and_wins(tmp_path: Path) -> None:
    path = overlay(
        tmp_path,
        "name: my-cluster\nlinks:\n  inter: {bandwidth_gb_per_s: 20, latency_us: 12}\n"
        "gemm:\n  h100-sxm: {flops: [1e9, 1e12], efficiency: [0.2, 0.7]}\n",
    )
    profile = load_profile_for("megatron", path)
    assert profile.name == "my-cluster"
    assert profile.link("inter", "infiniband", "ib-ndr400").bandwidth(50) == 20
    assert profile.overlap_of("tp") == load_profile("megatron").overlap_of("tp")


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["constants", "overlap", "links", "gemm", "hbm_efficiency"]),
        st.one_of(
            st.integers(),
            st.floats(),
            st.text(max_size=5),
            st.lists(st.floats(), max_size=3),
            st.dictionaries(st.text(max_size=6), st.floats(), max_size=2),
        ),
        max_size=3,
    )
)
def test_random_profiles_load_or_raise_input_error(tmp_path_factory, data) -> None:
    import yaml

    path = tmp_path_factory.mktemp("p") / "r.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, **data}))
    try:
        load_profile_for("generic", str(path))
    except InputError as exc:
        assert "\n" not in str(exc)
