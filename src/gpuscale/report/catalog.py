"""``catalog``: one table of entries, sources shown on request."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table


def print_catalog(
    console: Console, kind: str, rows: Sequence[Mapping[str, Any]], sources: bool
) -> None:
    """``rows`` of ``catalog_listing(kind).to_dict()[kind]``; the source column with
    ``sources``, else a pointer to it."""
    keys = [k for k in rows[0] if sources or k != "source"]
    table = Table(title=f"gpuscale catalog: {kind}")
    for key in keys:
        table.add_column(key, overflow="fold", no_wrap=key == "id")
    for row in rows:
        table.add_row(*("" if row[k] is None else str(row[k]) for k in keys))
    console.print(table)
    if not sources:
        console.print(f"sources: gpuscale catalog {kind} --sources (or --json)")
