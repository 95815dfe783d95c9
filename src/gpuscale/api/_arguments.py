"""The one check of an answer's plain arguments, before it runs: an on/off argument takes True
or False (:mod:`gpuscale.api._booleans`), a text argument a string, a number argument a real
number and a table of options a mapping. A wrong type is refused in one line naming the
argument (``InputError.field``) instead of failing deep inside as ``'NoneType' object has no
attribute 'lower'``. Ranges and vocabularies stay with the function that owns them; whole
numbers keep their own checks, which already name the accepted range."""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

from gpuscale.api._booleans import check_booleans, is_bool
from gpuscale.errors import require

F = TypeVar("F", bound=Callable[..., Any])


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_number(value: Any) -> bool:
    # numbers.Real takes numpy floats and ints (a sweep built with numpy); a bool is not a number.
    return isinstance(value, numbers.Real) and not is_bool(value)


def _is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


# annotation (a string under ``from __future__ import annotations``) -> (test, what is accepted)
_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (_is_text, "a string"),
    "float": (_is_number, "a number"),
    "Mapping[str, Any]": (_is_mapping, "a mapping of names to values"),
}


def _kind(annotation: Any) -> tuple[Callable[[Any], bool], str, bool] | None:
    """The test of an annotation this module checks, its words, and whether None is taken."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    optional = text.endswith(" | None")
    found = _KINDS.get(text.removesuffix(" | None"))
    return None if found is None else (*found, optional)


def _bool_names(params: list[inspect.Parameter]) -> list[str]:
    return [p.name for p in params if p.annotation in ("bool", bool)]


def checks_arguments(func: F) -> F:
    """``func`` with its bool (keyword-only), str, float and mapping arguments (read from its
    annotations, so an argument added later is checked too) checked on each call before it
    runs; bools and numbers are passed on as Python bools and floats."""
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
        for name, (test, words, optional) in kinds.items():
            if name not in given or (optional and given[name] is None):
                continue
            value = given[name]
            require(
                test(value),
                f"{name} must be {words}, got {value!r} ({type(value).__name__}); accepted: "
                f"{words}{' or None' if optional else ''}",
                field=name,
            )
            if test is _is_number:  # numpy's float32 would carry its precision into the answer
                given[name] = float(value)
        return func(*bound.args, **bound.kwargs)

    return cast(F, checked)
