"""The one vocabulary of step-time terms: each key the cost model, the planner, the JSON and the
tables use, and the words a person reads for it.

Two levels, both additive (each sums to ``step_time_s``):

- :data:`PARTS`, the fine split a table shows: compute, the exposed time of each collective kind,
  bubble, optimizer, data, checkpoint, other.
- :data:`BREAKDOWN`, the ``breakdown`` of ``--json`` (DESIGN.md contract): the same with the
  communication kinds summed into ``exposed_comm``; the kinds are listed under
  ``exposed_comm_parts``.
"""

from __future__ import annotations

COMM_KINDS: tuple[str, ...] = ("tp", "cp", "ep", "pp", "dp", "zero")
"""Collective kinds whose exposed (not overlapped) time the cost model prices separately."""

PARTS: dict[str, str] = {
    "compute": "compute",
    "comm_dp": "data-parallel gradient all-reduce",
    "comm_zero": "ZeRO/FSDP parameter gathers and gradient reduce-scatters",
    "comm_tp": "tensor-parallel communication",
    "comm_pp": "pipeline send/recv",
    "comm_cp": "context-parallel ring attention traffic",
    "comm_ep": "expert-parallel all-to-all",
    "bubble": "pipeline bubble",
    "optimizer": "optimizer step",
    "data": "data loading",
    "checkpoint": "checkpoint saves",
    "other": "other overheads",
}
"""Every additive part of a step, in print order, with its words; ``compute`` includes any
recompute, each ``comm_*`` is the time the step waits for that communication."""

COMM_PARTS: tuple[str, ...] = tuple(f"comm_{kind}" for kind in COMM_KINDS)

BREAKDOWN: dict[str, str] = {
    "compute": PARTS["compute"],
    "exposed_comm": "exposed communication",
    "bubble": PARTS["bubble"],
    "optimizer": PARTS["optimizer"],
    "data": PARTS["data"],
    "checkpoint": PARTS["checkpoint"],
    "other": PARTS["other"],
}
"""The ``breakdown`` keys of ``--json``: the parts with every ``comm_*`` summed."""


def coarse(parts: dict[str, float]) -> dict[str, float]:
    """:data:`PARTS` seconds -> :data:`BREAKDOWN` seconds (the comm kinds summed)."""
    out = {key: parts[key] for key in BREAKDOWN if key != "exposed_comm"}
    out["exposed_comm"] = sum(parts[key] for key in COMM_PARTS)
    return {key: out[key] for key in BREAKDOWN}
