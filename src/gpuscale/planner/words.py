"""Plans and step-time parts in plain words, for explanations and verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuscale.costmodel.terms import PARTS
from gpuscale.specs import Plan

PART_NAMES: dict[str, str] = PARTS
"""Every part of a step's time, in print order (the vocabulary of
:mod:`gpuscale.costmodel.terms`)."""


def describe(plan: Plan, gpus_per_node: int) -> str:
    """``TP=8 PP=4 (vp 2) DP=16 ZeRO-1, mbs 1, selective recompute``: degrees > 1 only."""
    parts = []
    if plan.tp > 1:
        nodes = -(-plan.tp // gpus_per_node)
        parts.append(
            f"TP={plan.tp}" + (f" across {nodes} nodes" if plan.tp > gpus_per_node else "")
        )
    if plan.pp > 1:
        parts.append(f"PP={plan.pp}" + (f" (vp {plan.vp})" if plan.vp > 1 else ""))
    if plan.cp > 1:
        parts.append(f"CP={plan.cp}")
    if plan.ep > 1:
        parts.append(experts(plan))
    if plan.dp > 1:
        parts.append(f"DP={plan.dp}" + (f" ZeRO-{plan.zero}" if plan.zero else ""))
    head = " ".join(parts) if parts else "single GPU"
    recompute = "no recompute" if plan.recompute == "none" else f"{plan.recompute} recompute"
    return f"{head}, mbs {plan.micro_batch}, {recompute}"


def experts(plan: Plan) -> str:
    """``EP=8``, or ``EP=8 (experts TP=1)`` when the experts split otherwise than TP."""
    return f"EP={plan.ep}" + (f" (experts TP={plan.etp})" if plan.etp != plan.tp else "")


def gpus(n: int) -> str:
    """``1 GPU``, ``8 GPUs``."""
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def and_list(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def pct(fraction: float) -> str:
    """``42%``; one decimal below 1% so that small non-zero shares do not read as zero."""
    if 0 < abs(fraction) < 0.01:
        return f"{100 * fraction:.1f}%"
    return f"{100 * fraction:.0f}%"


def largest_overhead(parts_s: Mapping[str, float]) -> tuple[str, float]:
    """The part other than compute that takes the most time."""
    name = max((k for k in parts_s if k != "compute"), key=lambda k: parts_s[k])
    return name, parts_s[name]


COMPUTE_BOUND_SHARE = 2.0 / 3.0
"""A step is called compute-bound when compute is at least two thirds of it: by Amdahl's law
(Amdahl 1967, "Validity of the single processor approach...", AFIPS) removing every overhead
would then speed it up by at most ``1 / (2/3) = 1.5x``, less than any compute-side lever (a
faster card or precision) offers. Below that the largest overhead can be a third of the step
or more, and a step that is half compute and 40% communication is bound by both."""


def bottleneck(parts_s: Mapping[str, float], mfu: float) -> str:
    """One sentence on what bounds the step: compute, an overhead, or both together. The one
    bottleneck rule: ``estimate``, ``plan`` and ``scale`` all word their verdict with it."""
    total = sum(parts_s.values())
    if total <= 0:
        return "the step takes no measurable time"
    compute = parts_s.get("compute", 0.0)
    name, worst = largest_overhead(parts_s)
    if compute >= COMPUTE_BOUND_SHARE * total:
        tail = (
            f"; the largest overhead is {PART_NAMES[name]} ({pct(worst / total)})"
            if worst > 0.01 * total
            else "; overheads are negligible"
        )
        return (
            f"compute-bound: compute is {pct(compute / total)} of the {total:.3g} s step "
            f"(MFU {pct(mfu)}){tail}"
        )
    if compute >= worst:
        return (
            f"bound by compute and {PART_NAMES[name]} together: compute is "
            f"{pct(compute / total)} of the {total:.3g} s step (MFU {pct(mfu)}), "
            f"{PART_NAMES[name]} {pct(worst / total)}"
        )
    return (
        f"bound by {PART_NAMES[name]}: it takes {pct(worst / total)} of the {total:.3g} s step, "
        f"compute only {pct(compute / total)} (MFU {pct(mfu)})"
    )
