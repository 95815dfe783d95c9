"""Garbage, truncated and corrupted nccl-tests logs: an InputError naming the line, never a
traceback and never silently wrong numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.errors import InputError
from gpuscale.measure.nccl_tests import parse, parse_text

LOG = (
    Path(__file__).resolve().parents[1] / "data" / "nccl-tests" / "a100-2node-allreduce-oci-oke.log"
)
TEXT = LOG.read_text()
LINES = TEXT.splitlines()
DATA_LINES = [i for i, line in enumerate(LINES) if re.match(r"^\s+\d+\s+\d+\s+float", line)]
FULL = parse_text(TEXT, "a100.log")[0]

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.text(max_size=400))
def test_garbage_is_an_input_error(text: str) -> None:
    with pytest.raises(InputError):
        parse(text, "garbage.log")


@SETTINGS
@given(st.lists(st.sampled_from(LINES), max_size=30))
def test_shuffled_real_lines_never_crash(lines: list[str]) -> None:
    try:
        runs = parse("\n".join(lines), "mixed.log", op="all_reduce")
    except InputError as exc:
        assert str(exc).startswith("mixed.log")
        return
    for run in runs:
        assert all(r.size_bytes >= 0 for r in run.rows)


@SETTINGS
@given(st.integers(min_value=0, max_value=len(TEXT)))
def test_truncated_log_is_an_error_or_a_prefix(cut: int) -> None:
    """A log cut anywhere either names a line, or parses to the rows before the cut (the last
    one may be cut inside its final number)."""
    try:
        (run,) = parse_text(TEXT[:cut], "cut.log")
    except InputError as exc:
        assert re.match(r"^cut\.log(:\d+)?: ", str(exc)), str(exc)
        return
    n = len(run.rows)
    assert [r.size_bytes for r in run.rows[: n - 1]] == [r.size_bytes for r in FULL.rows[: n - 1]]
    assert run.rows[: n - 1] == FULL.rows[: n - 1]
    if not run.complete:
        assert any("no footer" in w for w in run.warnings())


@SETTINGS
@given(
    st.sampled_from(DATA_LINES),
    st.integers(min_value=0, max_value=12),
    st.sampled_from(["abc", "1.2.3", "--", "nan?", "0x1f", "12a"]),
)
def test_corrupted_field_names_its_line(index: int, field: int, junk: str) -> None:
    tokens = LINES[index].split()
    if field == 2 or field == 3:  # type and redop are free text in nccl-tests
        field = 0
    tokens[field] = junk
    lines = [*LINES[:index], "   " + "  ".join(tokens), *LINES[index + 1 :]]
    with pytest.raises(InputError, match=rf"^bad\.log:{index + 1}: "):
        parse_text("\n".join(lines), "bad.log")


@SETTINGS
@given(st.sampled_from(DATA_LINES), st.integers(min_value=1, max_value=12))
def test_row_missing_fields_names_its_line(index: int, keep: int) -> None:
    tokens = LINES[index].split()[:keep]
    lines = [*LINES[:index], "   " + "  ".join(tokens), *LINES[index + 1 :]]
    with pytest.raises(InputError, match=rf"^bad\.log:{index + 1}: .*fields"):
        parse_text("\n".join(lines), "bad.log")


def test_missing_device_list_is_explained() -> None:
    text = "\n".join(line for line in LINES if "Rank" not in line)
    with pytest.raises(InputError, match="Using devices"):
        parse_text(text, "nodevices.log")


@SETTINGS
@given(
    st.sampled_from(DATA_LINES),
    st.sampled_from(["99999999999999999999999999", "1", "3"]),
)
def test_a_size_that_contradicts_count_and_type_names_its_line(index: int, size: str) -> None:
    # A size of 10^26 bytes beside a count of 512 MiB of floats was fitted as ok, the fit's
    # RMS warning its only trace (a fuzz of the CLI, 2026-12-04).
    tokens = LINES[index].split()
    if int(tokens[1]) == 0:
        return
    tokens[0] = size
    lines = [*LINES[:index], "   " + "  ".join(tokens), *LINES[index + 1 :]]
    with pytest.raises(InputError, match=rf"^bad\.log:{index + 1}: size .* disagrees with count"):
        parse_text("\n".join(lines), "bad.log")


def test_gathers_and_scatters_may_state_the_whole_buffer() -> None:
    # all_gather / reduce_scatter print the whole buffer beside one rank's count (the
    # DGX-2 log's five tables all parse).
    log = LOG.parent / "v100-dgx2-5collectives-oldformat.log"
    assert len(parse_text(log.read_text(), log.name)) == 5
