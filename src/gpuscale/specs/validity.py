"""Which parallel plans a model can run: the one rule set of gpuscale.

Every rule is written once, as a function over numpy arrays (a plain ``int`` works too), so that
:func:`check_plan` (one plan, one line naming the flag at fault) and :func:`valid_mask` (the
planner's vectorized filter over hundreds of thousands of candidates) cannot disagree. What the
mainstream training stacks accept:

- ``tp`` divides ``num_heads`` and ``ffn_hidden_size`` (Megatron-Core ColumnParallelLinear splits
  the output dimension with ``divide()``). Key/value heads either split evenly (``num_kv_heads``
  divisible by ``tp``) or, when ``tp`` is a multiple of ``num_kv_heads``, each KV head is
  replicated ``tp / num_kv_heads`` times, as vLLM and NeMo do for MQA/GQA models with few KV
  heads. Any other ratio would split a KV head.
- ``pp``: every pipeline stage keeps at least one layer when stages take ``ceil(layers / pp)``
  layers each and the last one the rest (Megatron's ``--decoder-first/last-pipeline-num-layers``
  allow uneven stages, e.g. Llama 3.1 405B's 126 layers on 16 stages); see
  :func:`pipeline_layers_ok`.
- ``vp`` > 1 needs ``pp`` > 1, equal stages (``pp * vp`` divides the layers) and a micro-batch
  count divisible by ``pp`` (Megatron-LM interleaved 1F1B, Narayanan et al. 2021,
  arXiv:2104.04473, Sec. 2.2.2; ``schedules.py`` rejects other counts).
- ``cp`` > 1 splits each sequence into ``2 * cp`` chunks for load-balanced causal ring attention
  (Megatron-Core context parallelism), so ``seq_len`` is divisible by ``2 * cp``.
- ``ep`` > 1 needs a mixture-of-experts model whose expert count it divides, and divides the
  ``dp * cp`` ranks that host the experts (Megatron-Core expert parallelism).
- ZeRO stages above 0 shard over the ``dp * cp`` ranks, so they need more than one (Megatron's
  distributed optimizer shards over the data-parallel-with-context-parallel group).
- the global batch is divisible by ``micro_batch * dp`` (checked by :class:`Plan` itself).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from gpuscale.errors import InputError
from gpuscale.specs.model import ModelSpec
from gpuscale.specs.plan import Plan, PlanBatch

A = TypeVar("A", int, np.ndarray)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def tp_ok(model: ModelSpec, tp: A) -> A:
    """``tp`` splits attention heads, KV heads (or replicates them) and the FFN evenly."""
    kv = model.num_kv_heads
    ok = (model.num_heads % tp == 0) & (model.ffn_hidden_size % tp == 0)
    return ok & ((kv % tp == 0) | (tp % kv == 0))


def pipeline_layers_ok(num_layers: int, pp: A) -> A:
    """Every one of ``pp`` stages keeps a layer when stages take ``ceil(layers / pp)`` each:
    ``(pp - 1) * ceil(layers / pp) < layers``. The one place that says how layers may split
    over stages (uneven first/last stages would change only this function)."""
    return (pp == 1) | ((pp - 1) * -(-num_layers // pp) < num_layers)


def interleave_ok(num_layers: int, pp: A, vp: A, microbatches: A) -> A:
    """Interleaved 1F1B: ``vp == 1``, or ``pp > 1`` with equal stages and micro-batches a
    multiple of ``pp``."""
    interleaved = (pp > 1) & (num_layers % (pp * vp) == 0) & (microbatches % pp == 0)
    return (vp == 1) | interleaved


def cp_ok(seq_len: int, cp: A) -> A:
    """``cp == 1``, or ``seq_len`` divisible by ``2 * cp`` (load-balanced causal chunks)."""
    return (cp == 1) | (seq_len % (2 * cp) == 0)


def ep_ok(model: ModelSpec, ep: A, dp: A, cp: A) -> A:
    """``ep == 1``, or an MoE model with ``ep`` dividing its experts and ``dp * cp``."""
    experts_ok = (model.num_experts % ep == 0) if model.is_moe else (ep == 1)
    return (ep == 1) | (experts_ok & ((dp * cp) % ep == 0))


def zero_ok(zero: A, dp: A, cp: A) -> A:
    """ZeRO > 0 shards over ``dp * cp`` ranks, so needs more than one."""
    return (zero == 0) | (dp * cp > 1)


def valid_mask(model: ModelSpec, plans: PlanBatch, seq_len: int) -> np.ndarray:
    """Which plans of ``plans`` ``model`` can run at ``seq_len`` (every rule above)."""
    ok = tp_ok(model, plans.tp)
    ok &= pipeline_layers_ok(model.num_layers, plans.pp)
    ok &= interleave_ok(model.num_layers, plans.pp, plans.vp, plans.num_microbatches)
    ok &= cp_ok(seq_len, plans.cp)
    ok &= ep_ok(model, plans.ep, plans.dp, plans.cp)
    ok &= zero_ok(plans.zero, plans.dp, plans.cp)
    return np.asarray(ok, dtype=bool)


def check_tp(model: ModelSpec, tp: int) -> None:
    if tp >= 1 and not tp_ok(model, tp):
        accepted = [d for d in range(1, model.num_heads + 1) if tp_ok(model, d)]
        raise InputError(
            f"--tp {tp} does not divide the {model.num_heads} attention heads, "
            f"{model.num_kv_heads} KV heads and FFN width {model.ffn_hidden_size} of "
            f"{model.name}; accepted: {', '.join(map(str, accepted))}",
            field="tp",
        )


def check_pp(model: ModelSpec, pp: int) -> None:
    if pp >= 1 and not pipeline_layers_ok(model.num_layers, pp):
        raise InputError(
            f"--pp {pp} leaves a pipeline stage without layers ({model.num_layers} layers of "
            f"{model.name}, up to {-(-model.num_layers // pp)} a stage); accepted: a --pp of at "
            f"most {model.num_layers} that gives every stage a layer",
            field="pp",
        )


def check_cp(seq_len: int, cp: int) -> None:
    if cp >= 1 and not cp_ok(seq_len, cp):
        raise InputError(
            f"--seq {seq_len} is not divisible by 2 x --cp = {2 * cp} (causal context "
            f"parallelism splits each sequence into 2 x cp balanced chunks); accepted: a --cp "
            f"with {seq_len} divisible by 2 x cp, or --cp 1",
            field="cp",
        )


def check_plan(model: ModelSpec, plan: Plan, seq_len: int) -> None:
    """Raise :class:`InputError` (naming the flag) unless ``model`` can run ``plan`` at
    ``seq_len``; the same rules as :func:`valid_mask`."""
    check_tp(model, plan.tp)
    check_pp(model, plan.pp)
    if not interleave_ok(model.num_layers, plan.pp, plan.vp, plan.num_microbatches):
        if model.num_layers % (plan.pp * plan.vp):
            raise InputError(
                f"--pp x --vp = {plan.pp * plan.vp} must divide the {model.num_layers} layers "
                f"for interleaving; accepted: --vp {_divisors(model.num_layers // plan.pp)}"
                if model.num_layers % plan.pp == 0
                else f"--vp {plan.vp} needs --pp to divide the {model.num_layers} layers "
                "(interleaving needs equal stages); accepted: --vp 1",
                field="vp",
            )
        raise InputError(
            f"--vp {plan.vp} needs the micro-batches per step (gbs/(mbs*dp) = "
            f"{plan.num_microbatches}) to be a multiple of --pp {plan.pp} (interleaved 1F1B)",
            field="vp",
        )
    check_cp(seq_len, plan.cp)
    if not ep_ok(model, plan.ep, plan.dp, plan.cp):
        if not model.is_moe or model.num_experts % plan.ep:
            raise InputError(
                f"--ep {plan.ep} needs a mixture-of-experts model whose expert count it divides"
                + (
                    f"; accepted: {_divisors(model.num_experts)}"
                    if model.is_moe
                    else f"; {model.name} is dense: accepted: --ep 1"
                ),
                field="ep",
            )
        raise InputError(f"--ep {plan.ep} must divide dp x cp = {plan.dp * plan.cp}", field="ep")
    if not zero_ok(plan.zero, plan.dp, plan.cp):
        raise InputError(
            f"--zero {plan.zero} shards over the data-parallel ranks, and dp x cp is 1; "
            "accepted: --zero with dp (or cp) of 2 or more, or --zero 0",
            field="zero",
        )


def check_lora_rank(model: ModelSpec, rank: int) -> None:
    """A LoRA adapter ``B @ A`` of rank ``r`` on a ``d x k`` weight has ``r <= min(d, k)``
    (Hu et al. 2021, arXiv:2106.09685, Sec. 4.1); the hidden size bounds every adapted weight."""
    if not 1 <= rank <= model.hidden_size:
        raise InputError(
            f"--lora-rank must be 1 to {model.hidden_size} ({model.name}'s hidden size: a "
            f"rank above it adapts nothing more), got {rank}",
            field="lora_rank",
        )
