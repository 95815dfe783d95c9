"""The one check of an on/off input: :class:`gpuscale.api.TrainingRun`'s bool fields and the
bool keyword arguments of the answers take True or False only. A truthy ``compile="no"`` would
otherwise be priced as compiled."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, TypeVar, cast

import numpy as np

from gpuscale.errors import require

F = TypeVar("F", bound=Callable[..., Any])


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


def takes_booleans(func: F) -> F:
    """``func`` with its bool keyword-only arguments (from its annotations) checked by
    :func:`check_booleans` on each call, before it runs, and passed on as Python bools."""
    params = inspect.signature(func).parameters.values()
    names = [p.name for p in params if _is_bool(p.annotation)]
    positional = [p.name for p in params if _is_bool(p.annotation) and p.kind != p.KEYWORD_ONLY]
    if positional:  # only keywords are checked, so a bool must be one
        raise TypeError(f"{func.__qualname__}: make {', '.join(positional)} keyword-only")

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(check_booleans({name: kwargs[name] for name in names if name in kwargs}))
        return func(*args, **kwargs)

    return cast(F, checked)
