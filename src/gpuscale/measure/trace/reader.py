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

from gpuscale.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_BYTES = 1 << 20
"""Bytes read to find ``distributedInfo``, which Kineto writes before ``traceEvents``."""
_PROGRESS_EVERY_BYTES = 8 << 20

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
            for item in ijson.items(stream, prefix, use_float=True):
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
        info = next(ijson.items(io.BytesIO(head), "distributedInfo"), None)
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
