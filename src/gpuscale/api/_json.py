"""Turning a result into its ``--json`` document: plain JSON types, ``schema_version`` first."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from typing import Any

import numpy as np

from gpuscale import SCHEMA_VERSION


def plain(value: Any) -> Any:
    """``value`` with dataclasses, tuples, numpy values and mappings made JSON types; a
    non-finite float becomes ``None`` (JSON has no NaN)."""
    if is_dataclass(value) and not isinstance(value, type):
        return plain(asdict(value))
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def document(body: Mapping[str, Any]) -> dict[str, Any]:
    """The versioned document (STYLE #14): ``schema_version`` first, then ``body``."""
    out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, **plain(body)}
    return out
