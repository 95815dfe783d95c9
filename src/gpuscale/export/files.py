"""The unit every exporter returns: named text files with a line saying what each one is for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportedFile:
    name: str
    """File name, no directory: the CLI writes it under ``-o DIR``."""
    content: str
    purpose: str
    """One line for the listing of what was written."""
    executable: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Export:
    target: str
    files: tuple[ExportedFile, ...]
    notes: tuple[str, ...] = ()
    """Where the target cannot say exactly what the plan assumes, and what was written instead."""
