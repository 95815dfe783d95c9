"""What every API answer is: a frozen, typed value that serializes to its command's ``--json``."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Result(Protocol):
    """The contract of every ``gpuscale.api`` return value.

    ``to_dict()`` returns plain JSON types only (str, int, float, bool, None, list, dict) and
    carries ``schema_version``; it is byte-for-byte what the command prints with ``--json``.
    ``figures()`` returns the plotly figures a person would rather see than read (may be empty).
    """

    def to_dict(self) -> dict[str, Any]: ...

    def figures(self) -> list[Any]: ...
