"""One GPU, one node, or a cluster, and why, in plain words.

The recommendation is the break-even count of the scaling curve (the largest count whose added
GPUs still pay for themselves, see :mod:`gpuscale.planner.scale`). The reason names what decided
it: memory (the model does not fit one card, so the smallest plan that fits is forced) or
efficiency (what per-GPU throughput a larger setup would give up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuscale import catalog
from gpuscale.planner.scale import ScaleCurve, ScalePoint
from gpuscale.planner.words import and_list, experts, gpus, pct
from gpuscale.specs import Plan

Choice = Literal["one GPU", "one node", "a cluster"]

_INTRA_WORDS = {
    "nvlink": "an NVLink node",
    "xgmi": "an Infinity Fabric node",
    "pcie": "a PCIe node",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    choice: Choice
    num_gpus: int
    """Recommended GPU count."""
    reason: str

    @property
    def headline(self) -> str:
        return f"{self.choice} ({gpus(self.num_gpus)}): {self.reason}"


def _needs(plan: Plan, num_gpus: int, gpus_per_node: int, intra_kind: str) -> list[str]:
    """What the smallest fitting plan has to do to fit: the memory-saving parts of it."""
    parts = []
    if plan.tp > 1:
        where = (
            f"inside {_INTRA_WORDS.get(intra_kind, 'one node')}"
            if plan.tp <= gpus_per_node
            else f"across {-(-plan.tp // gpus_per_node)} nodes"
        )
        parts.append(f"TP={plan.tp} {where}")
    if plan.pp > 1:
        parts.append(f"PP={plan.pp}")
    if plan.cp > 1:
        parts.append(f"CP={plan.cp}")
    if plan.ep > 1:
        parts.append(experts(plan))
    if plan.zero:
        parts.append(f"ZeRO-{plan.zero}" + ("" if plan.dp == num_gpus else f" over DP={plan.dp}"))
    if plan.recompute != "none":
        parts.append(f"{plan.recompute} recompute")
    return parts


_RECOMPUTE_RANK = {"none": 0, "selective": 1, "full": 2}


def _memory_price(starved: Plan, roomy: Plan) -> list[str]:
    """What ``starved`` gives up to fit in memory that ``roomy`` does not: extra recompute,
    ZeRO-3 weight gathers, a smaller micro-batch, more model parallelism."""
    paid = []
    if _RECOMPUTE_RANK[starved.recompute] > _RECOMPUTE_RANK[roomy.recompute]:
        paid.append(f"{starved.recompute} recompute")
    if starved.zero == 3 and roomy.zero < 3:
        paid.append("ZeRO-3 weight gathers")
    if starved.micro_batch < roomy.micro_batch:
        paid.append(f"micro-batch {starved.micro_batch}")
    for name in ("tp", "pp", "cp"):
        if getattr(starved, name) > getattr(roomy, name):
            paid.append(f"{name.upper()}={getattr(starved, name)}")
    return paid


def _shows_above_100(fraction: float | None) -> bool:
    """Whether :func:`pct` prints ``fraction`` as more than 100%."""
    return fraction is not None and round(100 * fraction) > 100


def superlinear_reason(curve: ScaleCurve, at: ScalePoint | None = None) -> str | None:
    """Why per-GPU (or marginal) efficiency reads above 100%, or ``None`` when none does.

    Throughput per GPU rises with more GPUs when the baseline is memory-starved: to fit, it
    recomputes, gathers weights or shrinks its micro-batch, and a larger count, with more memory
    in all, does without. ``at`` is the count to compare with (default: the most efficient
    one).
    """
    base = curve.point(curve.baseline_gpus)
    over = [
        p
        for p in curve.fitting
        if _shows_above_100(p.efficiency) or _shows_above_100(p.marginal_efficiency)
    ]
    if not over or base.best is None:
        return None
    other = at or max(curve.fitting, key=lambda p: p.efficiency or 0.0)
    if other.best is None:
        return None
    paid = _memory_price(base.best.plan, other.best.plan)
    plan = f"the {base.num_gpus}-GPU plan"
    if not paid:
        return f"{plan} is short of memory, and {gpus(other.num_gpus)} have room for a faster one"
    return f"to fit, {plan} needs {and_list(paid)}, which {gpus(other.num_gpus)} do without"


def _beyond(curve: ScaleCurve, at: int, gpus_per_node: int, fabric_name: str) -> str:
    """What the next step past the recommendation would return."""
    after = [p for p in curve.fitting if p.num_gpus > at]
    marginal = after[0].marginal_efficiency if after else None
    if marginal is None:
        return ""
    where = f" ({fabric_name} between nodes)" if after[0].num_gpus > gpus_per_node else ""
    return (
        f"; going to {gpus(after[0].num_gpus)}{where} each added GPU would return "
        f"{pct(max(marginal, 0.0))} of a GPU's throughput"
    )


def _larger_counts(curve: ScaleCurve, rec: ScalePoint, gpus_per_node: int) -> str:
    """How much per-GPU efficiency one node and the largest count would give up against ``rec``."""
    others = [p for p in curve.fitting if p.num_gpus > rec.num_gpus]
    picks = {
        p.num_gpus: p for p in [*[p for p in others if p.num_gpus == gpus_per_node], *others[-1:]]
    }
    words = []
    for p in picks.values():
        if p.efficiency is not None:
            slower = 1.0 - p.efficiency / (rec.efficiency or 1.0)
            way = "slower" if slower >= 0 else "faster"
            words.append(f"{gpus(p.num_gpus)} would be {pct(abs(slower))} {way} per GPU-hour")
    return ", ".join(words)


def verdict(curve: ScaleCurve, gpu_id: str, gpus_per_node: int) -> Verdict:
    """The recommendation for ``curve`` (best plans of one model on ``gpu_id``)."""
    card = catalog.gpu(gpu_id)
    intra_kind = catalog.link(card.intra_link).kind
    fabric_name = catalog.link(curve.fabric).name
    rec = curve.point(curve.break_even_gpus)
    base = curve.point(curve.baseline_gpus)
    choice: Choice = (
        "one GPU"
        if rec.num_gpus == 1
        else "one node"
        if rec.num_gpus <= gpus_per_node
        else "a cluster"
    )
    if base.best is None or rec.best is None:
        raise RuntimeError("the baseline and the break-even point always hold a fitting plan")

    if base.num_gpus == 1:
        head = f"fits one card ({base.best.memory_per_gpu_gib:.0f} of {card.memory_gib:g} GiB)"
    else:
        single = curve.points[0].search.min_memory_gib
        need = (
            f" (the leanest plan needs {single:.0f} GiB per GPU; the card has {card.memory_gib:g})"
            if single
            else ""
        )
        parts = _needs(base.best.plan, base.num_gpus, gpus_per_node, intra_kind)
        head = (
            f"does not fit one card{need}; the smallest set-up that fits is "
            f"{gpus(base.num_gpus)} with {and_list(parts) if parts else 'plain data parallelism'}"
        )

    base_words = "one GPU" if base.num_gpus == 1 else gpus(base.num_gpus)
    if rec.num_gpus == base.num_gpus:
        cost = _larger_counts(curve, rec, gpus_per_node)
        reason = f"{head}{': ' if base.num_gpus == 1 else '; '}{cost}" if cost else head
    else:
        beyond = _beyond(curve, rec.num_gpus, gpus_per_node, fabric_name)
        if not beyond and rec is curve.points[-1]:
            beyond = "; more GPUs than the largest count searched may still pay"
        superlinear = superlinear_reason(curve, rec) if _shows_above_100(rec.efficiency) else None
        why_over = f"; above 100% because {superlinear}" if superlinear else ""
        reason = (
            f"{head}; {gpus(rec.num_gpus)} train {rec.speedup or 0:.1f}x as fast as "
            f"{base_words} ({pct(rec.efficiency or 0)} per-GPU efficiency against "
            f"{base_words}{why_over}){beyond}"
        )
    return Verdict(choice=choice, num_gpus=rec.num_gpus, reason=reason)
