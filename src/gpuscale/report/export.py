"""``export``: what was written (or, without a folder, the files themselves) and the notes."""

from __future__ import annotations

from typing import Any

import click
from rich.console import Console
from rich.table import Table


def print_export(console: Console, export: Any, written: Any, *, to_folder: bool) -> None:
    """``export`` an :class:`gpuscale.export` bundle: one row per file; then each file verbatim
    (no folder given) or the paths written; then the notes."""
    table = Table("file", "what it is", "bytes", box=None)
    for item in export.files:
        table.add_row(item.name, item.purpose, f"{len(item.content.encode()):,}")
    console.print(table)
    if not to_folder:
        for item in export.files:
            console.rule(item.name)
            click.echo(item.content, nl=False)  # verbatim: never wrapped to the terminal width
    else:
        for path in written:
            console.print(f"wrote {path}")
    for note in export.notes:
        console.print(f"note: {note}")
