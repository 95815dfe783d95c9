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
the whole batch).
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


def _gather(value: Any, inverse: np.ndarray, size: int) -> Any:
    """``value`` with every per-plan array (length ``size``) indexed by ``inverse``; dataclasses
    and tuples of them are walked, scalars and other fields kept."""
    if isinstance(value, np.ndarray):
        return value[inverse] if value.ndim == 1 and value.shape[0] == size else value
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
    (every field ``price`` reads) and broadcast to the plans that share it."""
    if _EXHAUSTIVE.get():
        return price(plans)
    groups = grouping(plans, columns)
    if groups is None:
        return price(plans)
    few, inverse = groups
    return _gather(price(few), inverse, len(few))


COMPUTE_COLUMNS: tuple[str, ...] = (
    "tp",
    "cp",
    "ep",
    "micro_batch",
    "recompute",
    "sequence_parallel",
)
"""Columns are listed in the enumerator's order (tp, pp, cp, dp, ep, vp, micro-batch, ZeRO,
recompute) so that a key leaving out only the innermost axes comes already sorted.

What one layer's math reads (:func:`~gpuscale.costmodel.compute.layer_compute`)."""
