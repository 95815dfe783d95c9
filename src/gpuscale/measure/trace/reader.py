"""Stream events out of a PyTorch profiler trace (Chrome trace / Kineto JSON, plain or gzip).

Real traces run to gigabytes per rank, and loading one with ``json.load`` costs about ten times
its size in Python objects. The events are read one at a time with ijson's C backend instead, so
memory does not grow with the file (HTA's ``trace_parser.py`` takes the same ijson fast path;
HTA then still builds a DataFrame of every event, which this reader never does).

Every way a file can be wrong ends as one :class:`~gpuscale.errors.InputError` line.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson
import numpy as np

from gpuscale.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_BYTES = 1 << 20
"""Bytes read to find ``distributedInfo``, which Kineto writes before ``traceEvents``."""
_PROGRESS_EVERY_BYTES = 8 << 20
_READ_BYTES = 64 << 10
"""Bytes per read: ijson's own default. Larger reads slow its C parser down (1 MiB reads took
the 100 MB trace of benchmarks/trace_reader.py from 1.9 s to 2.9 s)."""

MAX_DEPTH = 64
"""Deepest array/object nesting accepted. Kineto traces nest about 5 deep (``traceEvents`` ->
event -> ``args`` -> ``Input Dims`` -> shape). ijson keeps the dotted prefix of every open level,
so its memory grows with the square of the depth (100,000 nested ``[`` took over 24 GB); the
limit is checked on the raw bytes before ijson sees them."""

ProgressFn = Callable[[int], None]
"""Called with the number of (compressed) bytes read so far."""

TRACE_SUFFIXES = (".json", ".json.gz")

_ACCEPTED = "expected a PyTorch profiler trace (Chrome-trace JSON with a traceEvents list, .json or .json.gz)"


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceHeader:
    """What the file says about the job it came from (Kineto ``distributedInfo``)."""

    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class _Counting(io.RawIOBase):
    """Reports bytes read from the underlying file to a progress callback."""

    def __init__(self, raw: IO[bytes], progress: ProgressFn | None) -> None:
        self._raw = raw
        self._progress = progress
        self._read = 0
        self._reported = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._raw.readinto(buffer)  # type: ignore[attr-defined]
        self._read += n or 0
        if self._progress is not None and self._read - self._reported >= _PROGRESS_EVERY_BYTES:
            self._reported = self._read
            self._progress(self._read)
        return n or 0

    def close(self) -> None:
        self._raw.close()
        super().close()


def _open(path: Path, progress: ProgressFn | None = None) -> io.BufferedReader[Any] | gzip.GzipFile:
    raw = path.open("rb")
    magic = raw.read(2)
    raw.seek(0)
    counted = io.BufferedReader(_Counting(raw, progress))
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=counted, mode="rb")
    return counted


_STRING = re.compile(rb'"[^"\\]*(?:\\[\s\S][^"\\]*)*"')
"""A complete JSON string: what sits between unescaped quotes is not structure."""
_STRING_REST = re.compile(rb'[^"\\]*(?:\\[\s\S][^"\\]*)*"')
"""The rest of a string begun in an earlier read, up to its closing quote."""
_QUOTE = ord('"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


class NestedTooDeep(ValueError):
    """The JSON nests deeper than :data:`MAX_DEPTH`."""


class _DepthLimited:
    """A byte stream for ijson that fails once the JSON nests deeper than ``limit``.

    Brackets count only outside strings. Without backslashes in a read, a quote always opens or
    closes a string, so keeping just brackets and quotes (``bytes.translate``) and the parity of
    the quotes before each bracket is enough: a few ms per MiB. Reads with backslashes strip
    whole strings with a regex instead (several times slower, and rare in traces).
    """

    def __init__(self, raw: io.BufferedReader[Any] | gzip.GzipFile, limit: int) -> None:
        self._raw = raw
        self._limit = limit
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(_READ_BYTES if size is None or size < 0 else max(size, 0))
        if data:
            self._descend(self._steps(data))
        return data

    def _steps(self, data: bytes) -> np.ndarray[Any, np.dtype[np.int64]]:
        """+1 for each opening bracket outside strings, -1 for each closing one, in order."""
        if self._escaped or b"\\" in data:
            outside = self._strip_strings(data)
            return _STEP[np.frombuffer(outside.translate(None, _NOT_BRACKETS), dtype=np.uint8)]
        marks = np.frombuffer(data.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
        quotes = np.cumsum(marks == _QUOTE) + int(self._in_string)
        if quotes.size:
            self._in_string = bool(quotes[-1] % 2)
        return np.where(quotes % 2 == 1, 0, _STEP[marks])

    def _strip_strings(self, data: bytes) -> bytes:
        pos = 0
        if self._in_string:
            pos = int(self._escaped)
            self._escaped = False
            rest = _STRING_REST.match(data, pos)
            if rest is None:
                self._escaped = _ends_in_escape(data[pos:])
                return b""
            pos = rest.end()
            self._in_string = False
        outside = _STRING.sub(b"", data[pos:])
        quote = outside.find(b'"')
        if quote >= 0:
            # No complete string can follow an unterminated one, so this suffix is unchanged.
            self._in_string = True
            self._escaped = _ends_in_escape(outside[quote + 1 :])
            outside = outside[:quote]
        return outside

    def _descend(self, steps: np.ndarray[Any, np.dtype[np.int64]]) -> None:
        if steps.size:
            levels = self._depth + np.cumsum(steps)
            if int(levels.max()) > self._limit:
                raise NestedTooDeep(self._limit)
            self._depth = int(levels[-1])


def _ends_in_escape(text: bytes) -> bool:
    """Whether a string's text so far ends in a lone backslash that escapes the next byte."""
    return (len(text) - len(text.rstrip(b"\\"))) % 2 == 1


def _first_byte(stream: io.BufferedReader[Any] | gzip.GzipFile) -> bytes:
    """The first non-blank byte, left unread (blank runs before it are consumed)."""
    while True:
        chunk = stream.peek(64)[:64]
        if not chunk:
            return b""
        stripped = chunk.lstrip()
        if stripped:
            return stripped[:1]
        stream.read(len(chunk))


def _bad(path: Path, what: str) -> InputError:
    return InputError(f"{path}: {what}; {_ACCEPTED}")


def _explain(path: Path, exc: BaseException) -> InputError:
    text = str(exc).lower()
    if isinstance(exc, ijson.IncompleteJSONError) and (
        "premature eof" in text or "incomplete" in text
    ):
        return _bad(path, "the JSON ends early (truncated file?)")
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return _bad(path, f"broken gzip stream ({exc.__class__.__name__})")
    if isinstance(exc, NestedTooDeep):
        return _bad(path, f"JSON nested too deeply (over {MAX_DEPTH} levels)")
    if isinstance(exc, UnicodeDecodeError):
        return _bad(path, "not UTF-8 text")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
    return _bad(path, f"not valid JSON ({first[:80]})")


def iter_events(path: Path, progress: ProgressFn | None = None) -> Iterator[dict[str, Any]]:
    """Yield each trace event (a dict) of ``path`` in file order, streaming.

    Accepts the Kineto object form (``{"traceEvents": [...], ...}``) and the bare Chrome-trace
    array form (``[...]``). Items that are not objects are skipped.
    """
    found_any = False
    try:
        with _open(path, progress) as stream:
            head = _first_byte(stream)
            if head == b"{":
                prefix = "traceEvents.item"
            elif head == b"[":
                prefix = "item"
            elif head == b"":
                raise _bad(path, "the file is empty")
            else:
                raise _bad(path, "not JSON")
            events = ijson.items(
                _DepthLimited(stream, MAX_DEPTH), prefix, use_float=True, buf_size=_READ_BYTES
            )
            for item in events:
                found_any = True
                if isinstance(item, dict):
                    yield item
    except InputError:
        raise
    except (ijson.JSONError, ValueError, EOFError, zlib.error, OSError) as exc:
        raise _explain(path, exc) from None
    if not found_any:
        raise _bad(path, "no trace events found")


def read_header(path: Path) -> TraceHeader:
    """Rank, world size and backend from ``distributedInfo`` in the first MiB, if present."""
    try:
        with _open(path) as stream:
            head = stream.read(_HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return TraceHeader()
    info: Any = None
    try:
        limited = _DepthLimited(io.BufferedReader(io.BytesIO(head)), MAX_DEPTH)
        info = next(ijson.items(limited, "distributedInfo"), None)
    except (ijson.JSONError, ValueError, UnicodeDecodeError):
        info = None
    if not isinstance(info, dict):
        return TraceHeader()

    def _int(key: str) -> int | None:
        value = info.get(key)
        return (
            int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        )

    backend = info.get("backend")
    return TraceHeader(
        rank=_int("rank"),
        world_size=_int("world_size"),
        backend=backend if isinstance(backend, str) else None,
    )


_RANK_IN_NAME = re.compile(r"(?:rank|worker|_r)[_\-]?(\d+)", re.IGNORECASE)


def rank_from_name(path: Path) -> int | None:
    """``rank3.json``, ``trace_rank_3.pt.trace.json``, ``worker3...``: the rank in a file name."""
    match = _RANK_IN_NAME.search(path.name)
    return int(match.group(1)) if match else None


def expand(paths: list[Path]) -> list[Path]:
    """Files as given, and the ``*.json`` / ``*.json.gz`` files inside any folder, sorted."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(
                p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES)
            )
            if not found:
                raise InputError(f"{path}: no .json or .json.gz trace files in this folder")
            out.extend(found)
        else:
            out.append(path)
    if not out:
        raise InputError("no trace files given; pass one trace per rank or a folder of them")
    return out
