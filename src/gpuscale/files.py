"""The one rule for files a user names: what gpuscale reads, and where it writes.

Inputs (a ``config.json``, a ``--profile``, an nccl-tests log, ``calibrate --from``, traces) are
read only when they are regular files, and whole-file reads stop at a size cap: a FIFO would
block for ever, ``/dev/zero`` would fill memory, a folder is not a file. Outputs (``-o``,
``--html``, ``--csv``) go into a folder that already exists (a typo in a folder name is refused,
never created), never to a FIFO or a device, and are written whole or not at all (a temporary
file in the same folder, renamed over the target). Every ``OSError`` a path can cause (a name
too long for the file system, a permission) is an :class:`~gpuscale.errors.InputError`.

Dependency-free (standard library and :mod:`gpuscale.errors`), so every layer may use it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path

from gpuscale.errors import InputError

MiB = 1 << 20
DEFAULT_MAX_BYTES = 64 * MiB
"""Cap on a whole-file read: a Hugging Face config.json is a few KiB, a calibration profile or
an nccl-tests log a few hundred; 64 MiB leaves room for a long concatenated log."""

PathLike = str | os.PathLike[str]


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def shown(path: PathLike, limit: int = 120) -> str:
    """``path`` for a one-line message: a name thousands of characters long is cut in the
    middle, saying how long it was."""
    text = str(path)
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...{text[-limit // 4 :]} ({len(text)} characters)"


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def exists(path: PathLike) -> bool:
    """``Path.exists`` that answers False, not a traceback, for a name the file system cannot
    even look up (longer than NAME_MAX, an embedded NUL): such a name names nothing."""
    try:
        os.stat(path)
    except (OSError, ValueError):
        return False
    return True


def input_path(
    path: PathLike, *, label: str, field: str | None = None, missing: str | None = None
) -> Path:
    """``path`` if it is a regular file; else one line saying what it is instead (``missing``:
    the message for a file that does not exist)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        message = missing or f"cannot read {label} '{shown(path)}': no such file"
        raise InputError(message, field=field) from None
    except ValueError:  # an embedded NUL byte
        raise InputError(f"{label}: invalid path {str(path)!r}", field=field) from None
    except OSError as exc:
        raise InputError(f"cannot read {label} '{shown(path)}': {_why(exc)}", field=field) from None
    kind = _kind(mode)
    if kind is not None:
        raise InputError(
            f"{label} '{shown(path)}' is {kind}; accepted: a regular file", field=field
        ) from None
    return Path(path)


def read_bytes(
    path: PathLike,
    *,
    label: str,
    field: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    missing: str | None = None,
) -> bytes:
    """The whole of a regular file of at most ``max_bytes``. Opened without blocking and
    checked on the open descriptor, so a FIFO swapped in after a check cannot hang the read."""
    input_path(path, label=label, field=field, missing=missing)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"cannot read {label} '{shown(path)}': {_why(exc)}", field=field) from None
    with os.fdopen(fd, "rb", closefd=True) as fh:
        kind = _kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputError(
                f"{label} '{shown(path)}' is {kind}; accepted: a regular file", field=field
            )
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputError(
                f"cannot read {label} '{shown(path)}': {_why(exc)}", field=field
            ) from None
    if len(data) > max_bytes:
        raise InputError(
            f"{label} '{shown(path)}' is larger than {max_bytes // MiB} MiB; accepted: a file up "
            "to that size",
            field=field,
        )
    return data


def read_text(
    path: PathLike,
    *,
    label: str,
    field: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    errors: str = "strict",
    expected: str = "a UTF-8 text file",
    missing: str | None = None,
) -> str:
    """:func:`read_bytes` decoded as UTF-8; a binary file is one line naming ``expected``."""
    data = read_bytes(path, label=label, field=field, max_bytes=max_bytes, missing=missing)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError:
        raise InputError(
            f"{label} '{shown(path)}' is not a text file; expected {expected}", field=field
        ) from None


def output_path(path: PathLike, *, label: str, field: str | None = None) -> Path:
    """Refuse, before any work is done, an output path that cannot take a file: a folder that
    does not exist (never created silently), a directory, a FIFO or device, no permission."""
    out = Path(path)
    if str(path) == "":
        raise InputError(f"{label}: empty path; accepted: a file path to write", field=field)
    try:
        mode = os.stat(out).st_mode
    except FileNotFoundError:
        mode = None
    except (OSError, ValueError) as exc:
        why = _why(exc) if isinstance(exc, OSError) else "invalid path"
        raise InputError(
            f"cannot write {label} '{shown(path)}': {why}; accepted: a file path in a writable folder",
            field=field,
        ) from None
    if mode is not None:
        kind = _kind(mode)
        if kind is not None:
            raise InputError(
                f"{label} '{shown(path)}' is {kind}; accepted: a regular file path to write",
                field=field,
            )
    parent = out.parent
    try:
        parent_mode = os.stat(parent).st_mode
    except FileNotFoundError:
        raise InputError(
            f"cannot write {label} '{shown(path)}': folder '{shown(parent)}' does not exist; "
            "create it first",
            field=field,
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot write {label} '{shown(path)}': {_why(exc)}; accepted: a file path in a "
            "writable folder",
            field=field,
        ) from None
    if not stat.S_ISDIR(parent_mode):
        raise InputError(
            f"cannot write {label} '{shown(path)}': '{shown(parent)}' is not a folder; accepted: "
            "a file path in a writable folder",
            field=field,
        ) from None
    target_ok = mode is None or os.access(out, os.W_OK)
    if not (os.access(parent, os.W_OK | os.X_OK) and target_ok):
        raise InputError(
            f"cannot write {label} '{shown(path)}': permission denied; accepted: a file path in a "
            "writable folder",
            field=field,
        )
    return out


def write_bytes(path: PathLike, data: bytes, *, label: str, field: str | None = None) -> Path:
    """Write ``data`` to ``path`` whole or not at all: into a temporary file in the same
    folder, renamed over the target (so a failure never leaves a half-written file)."""
    out = output_path(path, label=label, field=field)
    tmp: Path | None = None
    try:
        # O_EXCL with mode 0o666: a fresh name of ours, with the permissions the umask gives
        # any new file (mkstemp would make it 0600).
        tmp = out.parent / f".{out.name[:64]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)
        tmp = None
    except OSError as exc:
        raise InputError(
            f"cannot write {label} '{shown(path)}': {_why(exc)}", field=field
        ) from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return out


def write_text(path: PathLike, text: str, *, label: str, field: str | None = None) -> Path:
    """:func:`write_bytes` of ``text`` in UTF-8."""
    return write_bytes(path, text.encode("utf-8"), label=label, field=field)


def total_bytes(paths: Iterable[PathLike]) -> int:
    """The size of the files in ``paths`` (a folder counts its files, not its subfolders);
    what cannot be read counts 0: this sizes a progress bar, the reader reports the error."""
    total = 0
    for p in paths:
        with contextlib.suppress(OSError):
            names = [os.path.join(p, f) for f in os.listdir(p)] if os.path.isdir(p) else [p]
            total += sum(os.stat(f).st_size for f in names if os.path.isfile(f))
    return total
