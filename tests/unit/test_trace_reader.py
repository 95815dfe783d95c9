"""The streaming trace reader: formats it accepts, one-line errors for everything else."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscale.cli.main import main
from gpuscale.errors import InputError
from gpuscale.measure.trace.reader import (
    MAX_DEPTH,
    NestedTooDeep,
    _DepthLimited,
    iter_events,
    rank_from_name,
    read_header,
)
from tests.unit.trace_events import cpu_rank, trace_doc, write


def test_object_array_and_gzip_forms_give_the_same_events(tmp_path: Path) -> None:
    events = cpu_rank(steps=3)
    plain = write(tmp_path / "a.json", events)
    zipped = write(tmp_path / "a.json.gz", events)
    bare = tmp_path / "bare.json"
    bare.write_text("  \n" + json.dumps(events))
    assert (
        list(iter_events(plain)) == list(iter_events(zipped)) == list(iter_events(bare)) == events
    )


def test_gzip_is_detected_by_content_not_name(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(gzip.compress(json.dumps(trace_doc(cpu_rank(steps=1))).encode()))
    assert len(list(iter_events(path))) == 5


def test_header_gives_rank_and_backend(tmp_path: Path) -> None:
    header = read_header(write(tmp_path / "x.json", cpu_rank(steps=1), rank=3))
    assert (header.rank, header.world_size, header.backend) == (3, 2, "gloo")
    assert read_header(write(tmp_path / "y.json", cpu_rank(steps=1))).rank is None


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank3.json", 3),
        ("trace_rank_12.pt.trace.json.gz", 12),
        ("worker-2.json", 2),
        ("host_r7.json", 7),
        ("trace.json", None),
    ],
)
def test_rank_from_name(name: str, rank: int | None) -> None:
    assert rank_from_name(Path(name)) == rank


def _truncated(tmp_path: Path) -> Path:
    text = json.dumps(trace_doc(cpu_rank(steps=5)))
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    return path


def _truncated_gz(tmp_path: Path) -> Path:
    data = gzip.compress(json.dumps(trace_doc(cpu_rank(steps=50))).encode())
    path = tmp_path / "truncated.json.gz"
    path.write_bytes(data[: len(data) // 2])
    return path


BAD_FILES = {
    "empty": (lambda p: (p / "empty.json", b""), "empty"),
    "blank": (lambda p: (p / "blank.json", b"  \n\t "), "empty"),
    "not json": (lambda p: (p / "x.json", b"hello world"), "not JSON"),
    "binary": (lambda p: (p / "x.json", bytes(range(256))), "not JSON"),
    "other json": (lambda p: (p / "x.json", b'{"a": 1, "b": [1, 2]}'), "no trace events"),
    "empty list": (lambda p: (p / "x.json", b'{"traceEvents": []}'), "no trace events"),
    "numbers": (lambda p: (p / "x.json", b"[1, 2, 3]"), "no timed events"),
    "no timed": (
        lambda p: (p / "x.json", b'[{"ph": "M", "name": "thread_name"}]'),
        "no timed events",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_are_one_line_errors(
    tmp_path: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, words = BAD_FILES[case]
    path, content = make(tmp_path)
    path.write_bytes(content)
    assert main(["trace", "analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: ") and err.count("\n") == 1
    assert words in err and str(path) in err


@pytest.mark.parametrize("make", [_truncated, _truncated_gz])
def test_truncated_traces_are_one_line_errors(
    tmp_path: Path, make, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)
    assert main(["trace", "analyze", str(path), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert ("truncated" in err) if make is _truncated else ("broken gzip" in err)


def test_missing_file_and_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "analyze", str(tmp_path / "nope.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["trace", "analyze", str(tmp_path)]) == 2
    assert "no .json or .json.gz" in capsys.readouterr().err


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_reader_on_garbage_bytes_raises_only_input_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "garbage.json"
    path.write_bytes(data)
    try:
        for event in iter_events(path):
            assert isinstance(event, dict)
    except InputError as exc:
        assert "\n" not in str(exc)


_json = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["ph", "ts", "dur", "name", "cat", "tid", "args", "traceEvents"]),
            inner,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_json, max_size=6), st.integers(0, 400))
def test_analyze_on_arbitrary_json_or_prefixes_never_crashes(
    tmp_path: Path, items: list, cut: int
) -> None:
    text = json.dumps({"traceEvents": items})
    path = tmp_path / "fuzz.json"
    path.write_text(text[:cut] if cut < len(text) else text)
    assert main(["trace", "analyze", str(path), "--json"]) in (0, 2)


DEEP = {
    "bare arrays": b"[" * 100_000 + b"]" * 100_000,
    "inside an event": b'{"traceEvents": [{"ph": "X", "args": '
    + b'{"a": ' * 5_000
    + b"1"
    + b"}" * 5_000
    + b"}]}",
    "unterminated": b"[" * 100_000,
}


@pytest.mark.parametrize("case", sorted(DEEP))
@pytest.mark.parametrize("gz", [False, True])
def test_deep_nesting_is_refused_before_ijson_builds_it(
    tmp_path: Path, case: str, gz: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    # 100,000 nested arrays once took ijson past 24 GB; refused at MAX_DEPTH it takes nothing.
    path = tmp_path / ("deep.json.gz" if gz else "deep.json")
    path.write_bytes(gzip.compress(DEEP[case]) if gz else DEEP[case])
    assert read_header(path).rank is None
    assert main(["trace", "analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"gpuscale: {path}: JSON nested too deeply (over {MAX_DEPTH} levels); expected a "
        "PyTorch profiler trace (Chrome-trace JSON with a traceEvents list, .json or .json.gz)\n"
    )


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


_tricky_text = st.text(alphabet='[]{}"\\ab', max_size=6)
_nested = st.recursive(
    st.integers(0, 9) | _tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_tricky_text, inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=150, deadline=None)
@given(_nested, st.lists(st.integers(1, 7), min_size=1, max_size=8))
def test_depth_scan_is_exact_across_any_read_boundaries(value: object, reads: list[int]) -> None:
    # Brackets, quotes and backslashes inside strings, and reads that cut strings and escapes
    # anywhere: the scan must count exactly the structural nesting.
    text = json.dumps(value, ensure_ascii=False).encode()
    depth = _depth(value)

    def scan(limit: int) -> None:
        stream = _DepthLimited(io.BufferedReader(io.BytesIO(text)), limit)
        k = 0
        while stream.read(reads[k % len(reads)]):
            k += 1

    scan(depth)
    if depth > 0:
        with pytest.raises(NestedTooDeep):
            scan(depth - 1)
