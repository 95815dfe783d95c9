"""Every valid parallel plan for a model on N GPUs, as one :class:`PlanBatch`.

The candidate set is the Cartesian product of the per-knob values (tp, pp, cp, ep, the expert split
etp of tp or 1 for MoE models, vp, micro-batch, ZeRO stage, recompute), built with broadcasting
over sparse index grids and cut down with boolean masks; no Python loop ever visits a candidate.
Validity is the one rule set of :mod:`gpuscale.specs.validity` (the same functions that refuse a
single ``Plan`` in ``gpuscale estimate``), applied per axis as early as it can be, so the grids
stay small.

Beyond validity the search prunes twins: ZeRO stages above 0 are tried only with ``dp > 1`` (with
one replica a context-parallel ZeRO plan is priced but rarely the simplest at its speed), and
``tp`` may exceed a node (cross-node tensor parallelism is enumerated and priced, badly, so "TP
split across nodes" shows up in rankings for what it costs).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from gpuscale.errors import require
from gpuscale.specs import ModelSpec, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CHOICES, RECOMPUTE_CODE
from gpuscale.specs.validity import cp_ok, ep_ok, interleave_ok, pipeline_layers_ok, tp_ok


@dataclass(frozen=True, kw_only=True, slots=True)
class SearchSpace:
    """The values the search tries for the knobs that are not forced by the GPU count."""

    micro_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    """Sequences per micro-batch; values that do not divide the per-replica batch drop out."""
    zero_stages: tuple[int, ...] = (0, 1, 2, 3)
    recompute: tuple[str, ...] = RECOMPUTE_CHOICES
    max_tp: int | None = None
    """Upper bound on tensor parallelism; ``None`` lets the head count decide (cross-node TP
    included, so the cost model can show what it costs)."""

    def __post_init__(self) -> None:
        require(
            len(self.micro_batches) > 0 and all(b >= 1 for b in self.micro_batches),
            "micro-batch choices must be positive integers",
        )
        require(
            all(z in (0, 1, 2, 3) for z in self.zero_stages) and len(self.zero_stages) > 0,
            "ZeRO stages must be among 0, 1, 2, 3",
        )
        require(
            len(self.recompute) > 0 and all(r in RECOMPUTE_CHOICES for r in self.recompute),
            f"recompute choices must be among {', '.join(RECOMPUTE_CHOICES)}",
        )
        require(self.max_tp is None or self.max_tp >= 1, "max_tp must be >= 1")


def divisors(n: int) -> np.ndarray:
    """The positive divisors of ``n`` in increasing order."""
    k = np.arange(1, n + 1, dtype=np.int64)
    return k[n % k == 0]


def tp_degrees(model: ModelSpec, candidates: np.ndarray, max_tp: int | None = None) -> np.ndarray:
    """The values of ``candidates`` that are valid tensor-parallel degrees for ``model``."""
    ok = tp_ok(model, candidates)
    if max_tp is not None:
        ok &= candidates <= max_tp
    return candidates[ok]


def cp_degrees(seq_len: int, candidates: np.ndarray) -> np.ndarray:
    """Context-parallel degrees: 1, or ``cp`` with ``seq_len`` divisible by ``2 * cp``."""
    return candidates[cp_ok(seq_len, candidates)]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanRuns:
    """The candidates as runs: every plan of ``heads`` with each recompute code of ``codes`` in
    turn (``heads``' own recompute column is ``codes[0]``). :meth:`plans` is the flat batch,
    plan ``i * len(codes) + j`` being head ``i`` with code ``j``; the memory model prices
    everything but the stored layer once per head
    (:func:`~gpuscale.costmodel.memory.memory_total`)."""

    heads: PlanBatch
    codes: np.ndarray

    def __len__(self) -> int:
        return len(self.heads) * self.codes.size

    def plans(self) -> PlanBatch:
        """Every candidate, one plan per (head, code), heads outer."""
        copies = self.codes.size
        columns = {
            name: _each(getattr(self.heads, name), copies)
            for name in _FIELDS
            if name != "recompute"
        }
        codes = np.broadcast_to(self.codes, (len(self.heads), copies))
        return PlanBatch.from_arrays(**columns, recompute=_each(codes, 1))


_FIELDS = tuple(f.name for f in fields(PlanBatch) if f.init)


def _each(values: np.ndarray, copies: int) -> np.ndarray:
    """``np.repeat(values, copies)`` for 1-D ``values``; for 2-D, the rows one after the
    other (``values.ravel()``). Strided copies, about twice as fast as ``np.repeat``."""
    if values.ndim == 1:
        values = np.broadcast_to(values[:, None], (values.size, copies))
    rows, width = values.shape
    out = np.empty(rows * width, dtype=values.dtype)
    for j in range(width):
        out[j::width] = values[:, j]
    return out


def enumerate_plans(
    model: ModelSpec,
    num_gpus: int,
    *,
    global_batch: int,
    seq_len: int,
    space: SearchSpace | None = None,
) -> PlanBatch:
    """Every valid plan that uses exactly ``num_gpus`` GPUs (see the module docstring for the
    rules). The batch may be empty, e.g. when ``global_batch`` is smaller than any possible
    data-parallel degree."""
    return enumerate_runs(
        model, num_gpus, global_batch=global_batch, seq_len=seq_len, space=space
    ).plans()


def enumerate_runs(
    model: ModelSpec,
    num_gpus: int,
    *,
    global_batch: int,
    seq_len: int,
    space: SearchSpace | None = None,
) -> PlanRuns:
    """:func:`enumerate_plans` as :class:`PlanRuns`: recompute constrains nothing, so every
    valid combination of the other knobs takes each recompute choice in turn."""
    space = space or SearchSpace()
    require(num_gpus >= 1, f"--gpus must be >= 1, got {num_gpus}")
    require(global_batch >= 1, f"--gbs must be >= 1, got {global_batch}")
    n_div = divisors(num_gpus)

    # The (tp, pp, cp) core first: few values, and it fixes dp.
    tp = tp_degrees(model, n_div, space.max_tp)
    pp = n_div[pipeline_layers_ok(model.num_layers, n_div)]
    cp = cp_degrees(seq_len, n_div)
    tp_g, pp_g, cp_g = (a.ravel() for a in np.meshgrid(tp, pp, cp, indexing="ij"))
    model_parallel = tp_g * pp_g * cp_g
    keep = num_gpus % model_parallel == 0
    tp_c, pp_c, cp_c = tp_g[keep], pp_g[keep], cp_g[keep]
    dp_c = num_gpus // (tp_c * pp_c * cp_c)

    ep_v = divisors(model.num_experts) if model.is_moe else np.ones(1, dtype=np.int64)
    layers = model.num_layers
    # pp * vp divides layers + d for the interleaving deficit d <= 2 (specs.validity), so vp
    # divides one of layers, layers + 1, layers + 2.
    vp_set = {int(d) for count in (layers, layers + 1, layers + 2) for d in divisors(count)}
    vp_v = np.asarray(sorted(d for d in vp_set if d <= layers), dtype=np.int64)
    mbs_v = np.asarray(sorted(set(space.micro_batches)), dtype=np.int64)
    zero_v = np.asarray(sorted(set(space.zero_stages)), dtype=np.int64)
    rc_v = np.asarray(sorted(RECOMPUTE_CODE[r] for r in set(space.recompute)), dtype=np.int64)

    # Experts split like their layer (etp = tp, Megatron-Core's default) or whole on each rank
    # with the expert-parallel group folded over the tensor-parallel ranks (etp = 1, what the
    # MoE recipes of Megatron-Bridge set): fold 1 before 0 keeps etp non-decreasing.
    fold_v = np.asarray([1, 0] if model.is_moe else [0], dtype=np.int64)

    # Sparse grids: core x ep x fold x vp x mbs x zero, each axis along its own dimension.
    # Recompute constrains nothing, so its axis only enters through the runs.
    core, ep, fold, vp, mbs, zero = np.meshgrid(
        np.arange(tp_c.size), ep_v, fold_v, vp_v, mbs_v, zero_v, indexing="ij", sparse=True
    )
    tp_b, pp_b, cp_b, dp_b = tp_c[core], pp_c[core], cp_c[core], dp_c[core]
    etp_b = np.where(fold == 1, 1, tp_b)

    per_replica = mbs * dp_b
    valid = global_batch % per_replica == 0
    microbatches = global_batch // per_replica
    # Folding a TP of 1 is the plan itself: kept once.
    valid = valid & ((fold == 0) | (tp_b > 1))
    valid = valid & ep_ok(model, ep, dp_b, cp_b, tp_b, etp_b)
    # The automatic split of the layers over pp x vp stages (uneven allowed, interleaved at most
    # two layers short) and the interleaved schedule's micro-batch rule (specs.validity).
    valid = valid & pipeline_layers_ok(model.num_layers, pp_b, vp)
    valid = valid & interleave_ok(pp_b, vp, microbatches)
    # ZeRO needs dp x cp > 1 to be valid (specs.validity.zero_ok); the search asks dp > 1, a
    # pruning of the context-parallel-only ZeRO twins (see the module docstring).
    valid = valid & ((zero == 0) | (dp_b > 1))
    shape = (tp_c.size, ep_v.size, fold_v.size, vp_v.size, mbs_v.size, zero_v.size)
    idx = np.nonzero(np.broadcast_to(valid, shape))
    pick = idx[0]
    heads = PlanBatch.from_arrays(
        tp=tp_c[pick],
        pp=pp_c[pick],
        dp=dp_c[pick],
        cp=cp_c[pick],
        ep=ep_v[idx[1]],
        etp=np.where(fold_v[idx[2]] == 1, 1, tp_c[pick]),
        vp=vp_v[idx[3]],
        micro_batch=mbs_v[idx[4]],
        zero=zero_v[idx[5]],
        recompute=rc_v[0],
        global_batch=np.int64(global_batch),
    )
    return PlanRuns(heads=heads, codes=rc_v)
