"""User-facing errors: one line that says what is wrong and what is accepted.

Bugs stay ordinary exceptions (with tracebacks); anything a user can cause by what they type or
by the files they pass is an :class:`InputError`, which the CLI prints as one line and exits 2.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable


class InputError(ValueError):
    """Bad input from the user: printed as ``gpuscale: <message>`` with exit code 2.

    ``field`` names the API argument at fault (``"tp"``, ``"gpus_per_node"``), when one is: the
    CLI shows it as the flag a user typed (``--tp``), a notebook user sees the keyword argument.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class RunFailure(RuntimeError):
    """A run that failed for a reason other than the user's input (a rank crashed or timed out):
    printed as ``gpuscale: <message>`` with exit code 1."""


def closest(name: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` catalog ids closest to ``name``: prefix matches first, then fuzzy ones."""
    pool = sorted(choices)
    low = name.lower()
    prefixed = [c for c in pool if c.startswith(low) or low in c]
    fuzzy = difflib.get_close_matches(low, pool, n=n, cutoff=0.5)
    out: list[str] = []
    for c in [*prefixed, *fuzzy]:
        if c not in out:
            out.append(c)
    return out[:n]


def quoted(name: str, limit: int = 80) -> str:
    """``name`` quoted for a one-line message: control characters escaped (an invisible one
    would make ``unknown model 'llama3.1-8b'`` unreadable), a long one cut in the middle."""
    text = name if name.isprintable() else repr(name)[1:-1]
    if len(text) > limit:
        text = f"{text[: limit // 2]}...{text[-limit // 4 :]} ({len(name)} characters)"
    return f"'{text}'"


def unknown(kind: str, name: str, choices: Iterable[str]) -> InputError:
    """``unknown GPU 'h100'; did you mean h100-sxm, h100-pcie?``"""
    pool = list(choices)
    # An empty name is near nothing: list what is accepted, not three arbitrary guesses.
    near = closest(name, pool) if name.strip() else []
    if near:
        return InputError(f"unknown {kind} {quoted(name)}; did you mean {', '.join(near)}?")
    return InputError(f"unknown {kind} {quoted(name)}; known: {', '.join(sorted(pool))}")


def require(condition: bool, message: str, *, field: str | None = None) -> None:
    """Raise :class:`InputError` with ``message`` unless ``condition`` holds (never ``assert``)."""
    if not condition:
        raise InputError(message, field=field)


def is_whole(value: object) -> bool:
    """``value`` is a whole number: an int or a numpy integer (a sweep built with numpy), not a
    bool and not a float (the API took ``replicas=1.5`` as 1.5 GPUs and ``concurrency=True``
    as one client)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


PLAIN_DIGITS = "ASCII digits 0-9, without '_' separators or other scripts' digits"
"""What a typed number may be written with (:func:`parse_int`, :func:`parse_float`)."""


def _plain(text: str, noun: str) -> str:
    """``text`` stripped, refused unless ASCII without underscores: Python's ``int`` and
    ``float`` also read other scripts' digits (Arabic-Indic '٣' is 3, fullwidth '８' is 8) and
    underscores ('1_000'), which a command line or a form must not take as a number silently."""
    stripped = text.strip()
    if not stripped.isascii() or "_" in stripped:
        raise InputError(f"{quoted(text)} is not {noun}; accepted: {PLAIN_DIGITS}")
    return stripped


def parse_int(text: str) -> int:
    """A whole number as typed (a flag, an inline ``NAME=VALUE``, a form field): ASCII digits
    with an optional sign. Raises :class:`InputError` without a field (the caller names the
    flag): the one reading of typed whole numbers."""
    plain = _plain(text, "a whole number")
    try:
        return int(plain)
    except ValueError:
        raise InputError(f"{quoted(text)} is not a whole number") from None


def parse_float(text: str) -> float:
    """A number as typed: ASCII (``1e5``, ``0.5``, ``inf`` and ``nan`` too: the caller refuses
    those where they mean nothing). Raises :class:`InputError` without a field: the one reading
    of typed numbers."""
    plain = _plain(text, "a number")
    try:
        return float(plain)
    except ValueError:
        raise InputError(f"{quoted(text)} is not a number") from None
