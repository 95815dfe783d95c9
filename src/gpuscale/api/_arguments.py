"""The one check of an answer's plain arguments, before it runs: an on/off argument takes True
or False (:mod:`gpuscale.api._booleans`), a text argument a string, a number argument a real
number and a table of options a mapping. A wrong type is refused in one line naming the
argument (``InputError.field``) instead of failing deep inside as ``'NoneType' object has no
attribute 'lower'``, and a count a whole number (an int or a numpy integer; not a bool, not a
float: ``decode_attention_dp=None`` beside DeepEP options failed comparing None with 1). Ranges
and vocabularies stay with the function that owns them."""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from gpuscale.api._booleans import check_booleans, is_bool
from gpuscale.errors import is_whole, require

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class _Kind:
    test: Callable[[Any], bool]
    words: str
    """What is accepted, in the refusal's words."""
    convert: Callable[[Any], Any] = lambda value: value
    """The value passed on: Python's own number (numpy's float32 would carry its precision into
    the answer, its int64 is not JSON), a tuple of them for a list of loads."""


def _is_number(value: Any) -> bool:
    # numbers.Real takes numpy floats and ints (a sweep built with numpy); a bool is not a number.
    return isinstance(value, numbers.Real) and not is_bool(value)


def _is_list_of(test: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def is_list(value: Any) -> bool:
        # A list, tuple or 1-D numpy array; a string, a mapping or one number is not a list of
        # loads (concurrency="1,2,4" failed as a ValueError, concurrency=5 as 'not iterable').
        items = value.tolist() if isinstance(value, np.ndarray) and value.ndim == 1 else value
        return isinstance(items, (list, tuple)) and all(test(v) for v in items)

    return is_list


def _tuple_of(convert: Callable[[Any], Any]) -> Callable[[Any], tuple[Any, ...]]:
    return lambda values: tuple(convert(v) for v in values)


# annotation (a string under ``from __future__ import annotations``) -> its kind
_KINDS: dict[str, _Kind] = {
    "str": _Kind(lambda value: isinstance(value, str), "a string"),
    "float": _Kind(_is_number, "a number", float),
    "int": _Kind(is_whole, "a whole number", int),
    "Mapping[str, Any]": _Kind(
        lambda value: isinstance(value, Mapping), "a mapping of names to values"
    ),
    "Sequence[int]": _Kind(
        _is_list_of(is_whole), "a list of whole numbers, e.g. [1, 8, 64]", _tuple_of(int)
    ),
    "Sequence[float]": _Kind(
        _is_list_of(_is_number), "a list of numbers, e.g. [0.5, 2, 8]", _tuple_of(float)
    ),
}


def _kind(annotation: Any) -> tuple[_Kind, bool] | None:
    """The kind of an annotation this module checks and whether None is taken."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    optional = text.endswith(" | None")
    found = _KINDS.get(text.removesuffix(" | None"))
    return None if found is None else (found, optional)


def _bool_names(params: list[inspect.Parameter]) -> list[str]:
    return [p.name for p in params if p.annotation in ("bool", bool)]


def checks_arguments(func: F) -> F:
    """``func`` with its bool (keyword-only), str, float, int and mapping arguments (read from
    its annotations, so an argument added later is checked too) checked on each call before it
    runs; bools and numbers are passed on as Python bools, floats and ints."""
    params = list(inspect.signature(func).parameters.values())
    bools = _bool_names(params)
    positional = [p.name for p in params if p.name in bools and p.kind != p.KEYWORD_ONLY]
    if positional:  # only keywords are checked, so a bool must be one
        raise TypeError(f"{func.__qualname__}: make {', '.join(positional)} keyword-only")
    signature = inspect.signature(func)
    kinds = {p.name: k for p in params if (k := _kind(p.annotation)) is not None}

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        kwargs.update(check_booleans({name: kwargs[name] for name in bools if name in kwargs}))
        bound = signature.bind_partial(*args, **kwargs)
        given = bound.arguments
        for name, (kind, optional) in kinds.items():
            if name not in given or (optional and given[name] is None):
                continue
            value = given[name]
            require(
                kind.test(value),
                f"{name} must be {kind.words}, got {value!r} ({type(value).__name__}); "
                f"accepted: {kind.words}{' or None' if optional else ''}",
                field=name,
            )
            given[name] = kind.convert(value)
        return func(*bound.args, **bound.kwargs)

    return cast(F, checked)
