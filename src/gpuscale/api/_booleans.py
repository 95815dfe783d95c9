"""The one check of an on/off input: :class:`gpuscale.api.TrainingRun`'s bool fields and the
bool keyword arguments of the answers take True or False only. A truthy ``compile="no"`` would
otherwise be priced as compiled."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, cast

import numpy as np

from gpuscale.errors import require


def is_bool(value: Any) -> bool:
    """``value`` is True or False: a Python bool or a numpy one (a sweep built with numpy, a
    pandas column); ``"no"``, 0 and None are not."""
    return isinstance(value, (bool, np.bool_))


def check_booleans(values: Mapping[str, Any]) -> dict[str, bool]:
    """``values`` (argument -> value) as Python bools: a value that is not True or False is
    refused, naming the argument (``field``); a numpy bool (a sweep built with numpy, a pandas
    column) is True or False and comes back as the Python one, so answers stay plain JSON."""
    out = {}
    for name, value in values.items():
        require(
            is_bool(value),
            f"{name} must be True or False, got {value!r} ({type(value).__name__}); "
            "accepted: a bool",
            field=name,
        )
        out[name] = bool(value)
    return out


def _is_bool(annotation: Any) -> bool:
    return annotation in ("bool", bool)  # a string under ``from __future__ import annotations``


def bool_fields(obj: object) -> dict[str, Any]:
    """The bool fields of the input dataclass ``obj`` and their values, found from the
    annotations (so a field added later is checked too)."""
    return {
        f.name: getattr(obj, f.name) for f in fields(cast(Any, obj)) if f.init and _is_bool(f.type)
    }
