"""Rows of a result as CSV text (header from the first row's keys; no rows, no text)."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any


def rows_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    text = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(text, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return text.getvalue()
