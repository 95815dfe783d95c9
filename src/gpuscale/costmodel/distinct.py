"""Price each distinct sub-configuration of a plan batch once, then broadcast.

A planner batch repeats the same values of a few plan fields many times: the layer math reads
only tp, cp, ep, micro-batch, recompute and sequence parallelism, the step's floor everything but
the ZeRO stage. :func:`per_distinct` runs such a term on one representative plan per distinct
combination of the columns it reads and gathers the result back to every plan. The arithmetic
per plan is unchanged (numpy's element-wise operations give the same bits whichever batch an
element is in), so the answer is bitwise the one of pricing every plan;
``tests/unit/test_planner_distinct.py`` checks that on the planner's batches, and
:func:`exhaustive` turns the grouping off for such comparisons.

Grouping pays only when it removes most of the work: the key, the sort and the gathers back
cost a few passes over the batch (measured: the memory model's states, 7-14x fewer rows, gained
0-17% on the planner's 16k-plan chunks, so they are not grouped).

Adding a term: price it inside an existing :func:`per_distinct` call only if it reads no plan
field outside that call's columns; otherwise add the field to the columns (or compute the term on
the whole batch). :func:`restricted` enforces that: ``price`` always sees a batch holding only the
listed columns, grouped or not, and reading any other field raises (the planner's tests run every
grouped term over many models, profiles and trainings, so a term that outgrows its columns fails
them instead of silently pricing one plan's value for another).
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from gpuscale.specs import PlanBatch

T = TypeVar("T")

MIN_SAVING = 2
"""Deduplicate only when the batch has at least this many plans per distinct combination; below
that, the key, the take and the gathers cost more than they save."""

_EXHAUSTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar("exhaustive", default=False)


@contextmanager
def exhaustive() -> Iterator[None]:
    """Price every plan on its own inside this block (the reference the tests compare with)."""
    token = _EXHAUSTIVE.set(True)
    try:
        yield
    finally:
        _EXHAUSTIVE.reset(token)


def _key(plans: PlanBatch, columns: Sequence[str]) -> np.ndarray | None:
    """One int64 per plan, equal exactly when the plans agree on ``columns`` (mixed radix of
    the non-negative integer fields, the first column most significant; columns constant over
    the batch are skipped); ``None`` if the radix would overflow."""
    key: np.ndarray | None = None
    span = 1
    for name in columns:
        column = getattr(plans, name)
        if column.dtype == bool:
            column = column.view(np.uint8)
        low, high = int(column.min()), int(column.max())
        if low == high:
            continue
        if low < 0:
            return None
        span *= high + 1
        if span >= 2**62:
            return None
        key = column.astype(np.int64) if key is None else key * (high + 1) + column
    return np.zeros(len(plans), dtype=np.int64) if key is None else key


def grouping(plans: PlanBatch, columns: Sequence[str]) -> tuple[PlanBatch, np.ndarray] | None:
    """One representative plan per distinct combination of ``columns`` and, per plan, the index
    of its representative; ``None`` when grouping would not pay (see :data:`MIN_SAVING`)."""
    result: tuple[PlanBatch, np.ndarray] | None = None
    key = _key(plans, columns) if len(plans) >= 2 * MIN_SAVING else None
    if key is not None:
        step = key[1:] != key[:-1]
        if bool(np.all(key[1:] >= key[:-1])):
            # Already in key order (the enumerator's order, when ``columns`` leave out only its
            # innermost axes): the groups are runs, no sort needed.
            first = np.flatnonzero(np.concatenate(([True], step)))
            inverse = np.concatenate(([0], np.cumsum(step)))
        else:
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        if len(first) * MIN_SAVING <= len(plans):
            result = (plans.take(first), inverse)
    return result


class _Restricted(PlanBatch):
    """A :class:`PlanBatch` whose slots outside the listed columns are left unset, so reading
    one raises (:meth:`__getattr__` runs only then: the listed columns read at full speed)."""

    __slots__ = ("_columns", "_length")
    _columns: tuple[str, ...]
    _length: int

    def __getattr__(self, name: str) -> Any:
        if name in _DERIVED:
            needs = _DERIVED[name]
            what = f"{name} (from {', '.join(needs)})"
        elif name in _FIELDS:
            what = name
        else:
            raise AttributeError(name)
        raise AttributeError(
            f"plan field {what} read by a term priced per distinct {self._columns}: "
            "add it to that call's columns"
        )

    def __len__(self) -> int:
        return self._length

    def take(self, index: np.ndarray | slice) -> PlanBatch:
        held = {name: getattr(self, name)[index] for name in _held(self._columns)}
        length = len(np.empty(self._length, dtype=bool)[index]) if not held else None
        return _restrict(self._columns, held, length)


_FIELDS = frozenset(f.name for f in dataclasses.fields(PlanBatch) if f.init)
_DERIVED: dict[str, tuple[str, ...]] = {
    # PlanBatch's properties, the private slots behind them and the columns they derive from
    "num_gpus": ("tp", "pp", "dp", "cp"),
    "_num_gpus": ("tp", "pp", "dp", "cp"),
    "num_microbatches": ("global_batch", "micro_batch", "dp"),
    "_num_microbatches": ("global_batch", "micro_batch", "dp"),
}


def _held(columns: tuple[str, ...]) -> tuple[str, ...]:
    """The slots a batch restricted to ``columns`` holds: those and the derived ones they give."""
    derived = ("_num_gpus", "_num_microbatches")
    return columns + tuple(d for d in derived if set(_DERIVED[d]).issubset(columns))


def _restrict(
    columns: tuple[str, ...], held: dict[str, np.ndarray], length: int | None
) -> PlanBatch:
    batch = object.__new__(_Restricted)
    object.__setattr__(batch, "_columns", columns)
    for name, array in held.items():
        object.__setattr__(batch, name, array)
    size = length if length is not None else next(iter(held.values())).shape[0]
    object.__setattr__(batch, "_length", size)
    return batch


def restricted(plans: PlanBatch, columns: Sequence[str]) -> PlanBatch:
    """``plans`` holding only ``columns`` (the same arrays, no copy): reading any other plan
    field, or a derived one (``num_gpus``, ``num_microbatches``) whose fields are not all listed,
    raises ``AttributeError`` naming it; :meth:`~PlanBatch.take` keeps the restriction."""
    unknown = set(columns) - _FIELDS
    if unknown:
        raise ValueError(f"not plan fields: {sorted(unknown)}")
    listed = tuple(columns)
    held = {name: getattr(plans, name) for name in _held(listed)}
    return _restrict(listed, held, len(plans))


def _gather(value: Any, inverse: np.ndarray, size: int) -> Any:
    """``value`` with every per-plan array (first axis of length ``size``, any number of
    dimensions) indexed by ``inverse``; dataclasses and tuples of them are walked, scalars and
    other fields kept. A term must therefore not return an array that is not per plan but whose
    first axis happens to have the batch's length (a per-layer table, say)."""
    if isinstance(value, np.ndarray):
        return value[inverse] if value.ndim >= 1 and value.shape[0] == size else value
    if isinstance(value, tuple):
        return tuple(_gather(v, inverse, size) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: _gather(getattr(value, f.name), inverse, size)
            for f in dataclasses.fields(value)
            if f.init
        }
        return dataclasses.replace(value, **fields)
    return value


def per_distinct(plans: PlanBatch, columns: Sequence[str], price: Callable[[PlanBatch], T]) -> T:
    """``price(plans)``, computed once per distinct combination of the plan fields ``columns``
    (every field ``price`` reads: it sees them only, see :func:`restricted`) and broadcast to the
    plans that share it."""
    groups = None if _EXHAUSTIVE.get() else grouping(plans, columns)
    if groups is None:
        return price(restricted(plans, columns))
    few, inverse = groups
    return _gather(price(restricted(few, columns)), inverse, len(few))


COMPUTE_COLUMNS: tuple[str, ...] = (
    "tp",
    "cp",
    "ep",
    "etp",
    "micro_batch",
    "recompute",
    "sequence_parallel",
)
"""Columns are listed in the enumerator's order (tp, pp, cp, dp, ep, vp, micro-batch, ZeRO,
recompute) so that a key leaving out only the innermost axes comes already sorted.

What one layer's math reads (:func:`~gpuscale.costmodel.compute.layer_compute`)."""
