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
- ``pp``: the layers split over the stages the way Megatron-Core does
  (``TransformerConfig.__post_init__``, ``get_num_layers_to_build``), see
  :func:`pipeline_layers_ok`: evenly when ``pp * vp`` divides them; otherwise automatically
  uneven, the first and last ranks lighter (Llama 3.1 405B's 126 layers on 16 stages), with
  every stage keeping a layer; with interleaving the deficit is at most two layers (the
  embedding and loss counted as layers, Megatron-Bridge's Llama 3.1 405B at PP 8 x VP 8: 126 + 2
  = 128). Explicit first/last stage counts (``--decoder-first/last-pipeline-num-layers``) leave
  the rest evenly over the middle ranks, each count a multiple of ``vp``; embedding/loss counted
  as layers (``--account-for-embedding/loss-in-pipeline-split``) need ``pp * vp`` to divide the
  layers plus those.
- ``vp`` > 1 needs ``pp`` > 1 and a micro-batch count divisible by ``pp`` (Megatron-LM
  interleaved 1F1B, Narayanan et al. 2021, arXiv:2104.04473, Sec. 2.2.2; ``schedules.py``
  rejects other counts).
- ``cp`` > 1 splits each sequence into ``2 * cp`` chunks for load-balanced causal ring attention
  (Megatron-Core context parallelism), so ``seq_len`` is divisible by ``2 * cp``.
- ``ep`` > 1 needs a mixture-of-experts model whose expert count it divides; ``etp`` (each
  expert's tensor split) divides its MLP width; ``ep * etp`` divides the ``tp * dp * cp`` ranks
  of a pipeline stage (Megatron-Core parallel folding, Liu et al. 2025, arXiv:2504.14960: the
  MoE layers map the stage's ranks as ETP x EP x EDP). With ``etp = tp``, the default, that is
  ``ep`` dividing ``dp * cp``. A dense model has no experts to split: ``ep = 1``, ``etp = tp``.
- ZeRO stages above 0 shard over the ``dp * cp`` ranks, so they need more than one (Megatron's
  distributed optimizer shards over the data-parallel-with-context-parallel group).
- the global batch is divisible by ``micro_batch * dp`` (checked by :class:`Plan` itself).
- offloading the first N layers' activations (``--activation-offload-layers``, a training
  setting) needs ``pp`` 1, no recompute and N below the layer count
  (:func:`activation_offload_ok`; the planner's candidates are filtered by it).
- the EP all-to-all overlap (``--ep-overlap``, a training setting) needs experts split over
  ``ep`` >= 2, interleaving when pipelined, and no recompute of the MoE layer
  (:func:`check_ep_overlap`).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from gpuscale.errors import InputError, require
from gpuscale.specs.model import ModelSpec
from gpuscale.specs.plan import RECOMPUTE_CODE, Plan, PlanBatch
from gpuscale.specs.training import Training

A = TypeVar("A", int, np.ndarray)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def tp_ok(model: ModelSpec, tp: A) -> A:
    """``tp`` splits attention heads, KV heads (or replicates them) and the FFN evenly."""
    kv = model.num_kv_heads
    ok = (model.num_heads % tp == 0) & (model.ffn_hidden_size % tp == 0)
    return ok & ((kv % tp == 0) | (tp % kv == 0))


def interleave_deficit(num_layers: int, pp: A, vp: A) -> A:
    """Layers short of ``pp * vp`` equal virtual stages: ``ceil(L / (pp vp)) * pp vp - L``."""
    chunks = pp * vp
    return -(-num_layers // chunks) * chunks - num_layers


def pipeline_layers_ok(
    num_layers: int,
    pp: np.ndarray | int,
    vp: np.ndarray | int = 1,
    first: np.ndarray | int = 0,
    last: np.ndarray | int = 0,
    embedding: np.ndarray | bool = False,
    loss: np.ndarray | bool = False,
) -> np.ndarray:
    """How ``num_layers`` may split over ``pp`` ranks of ``vp`` virtual stages: the one place
    that says it (module docstring; the split itself is :func:`gpuscale.costmodel.pipeline.
    stage_layers`). ``first``/``last`` > 0 are explicit first/last rank counts; ``embedding``/
    ``loss`` count those as layers of the first/last stage."""
    pp, vp = np.asarray(pp, dtype=np.int64), np.asarray(vp, dtype=np.int64)
    first, last = np.asarray(first, dtype=np.int64), np.asarray(last, dtype=np.int64)
    # Automatic split: ceil(L / pp) layers a stage leaves every stage one when
    # (pp - 1) * ceil(L / pp) < L; interleaved, at most the two layers of embedding and loss short.
    automatic = ((pp - 1) * -(-num_layers // pp) < num_layers) & (
        (vp == 1) | (interleave_deficit(num_layers, pp, vp) <= 2)
    )
    # Embedding/loss as layers: pp * vp virtual stages of (L + e + l) / (pp vp) units each.
    units = num_layers + np.asarray(embedding, dtype=np.int64) + np.asarray(loss, dtype=np.int64)
    accounted = units % (pp * vp) == 0
    # Explicit counts: the rest evenly over the middle ranks, each with a layer, all counts a
    # multiple of vp (Megatron-Core TransformerConfig).
    middle_ranks = pp - (first > 0) - (last > 0)
    rest = num_layers - first - last
    ranks = np.maximum(middle_ranks, 1)
    per_middle = np.where(middle_ranks > 0, rest // ranks, vp)
    explicit = np.where(
        middle_ranks > 0, (rest >= middle_ranks) & (rest % ranks == 0), rest == 0
    ) & ((vp == 1) | ((first % vp == 0) & (last % vp == 0) & (per_middle % vp == 0)))
    is_explicit = (first > 0) | (last > 0)
    is_accounted = np.asarray(embedding, dtype=bool) | np.asarray(loss, dtype=bool)
    ok = np.where(is_explicit, explicit, np.where(is_accounted, accounted, automatic))
    return np.asarray((pp == 1) | ok, dtype=bool)


def interleave_ok(pp: A, vp: A, microbatches: A) -> A:
    """Interleaved 1F1B: ``vp == 1``, or ``pp > 1`` with micro-batches a multiple of ``pp``
    (how the layers split over the virtual stages is :func:`pipeline_layers_ok`)."""
    return (vp == 1) | ((pp > 1) & (microbatches % pp == 0))


def cp_ok(seq_len: int, cp: A) -> A:
    """``cp == 1``, or ``seq_len`` divisible by ``2 * cp`` (load-balanced causal chunks)."""
    return (cp == 1) | (seq_len % (2 * cp) == 0)


def ep_ok(model: ModelSpec, ep: A, dp: A, cp: A, tp: A, etp: A) -> A:
    """``ep`` and ``etp`` split the experts of ``model`` over a pipeline stage's ranks (module
    docstring)."""
    if not model.is_moe:
        return (ep == 1) & (etp == tp)
    return (
        (model.num_experts % ep == 0)
        & (model.ffn_hidden_size % etp == 0)
        & ((tp * dp * cp) % (ep * etp) == 0)
    )


def zero_ok(zero: A, dp: A, cp: A) -> A:
    """ZeRO > 0 shards over ``dp * cp`` ranks, so needs more than one."""
    return (zero == 0) | (dp * cp > 1)


def valid_mask(model: ModelSpec, plans: PlanBatch, seq_len: int) -> np.ndarray:
    """Which plans of ``plans`` ``model`` can run at ``seq_len`` (every rule above)."""
    ok = tp_ok(model, plans.tp)
    ok &= pipeline_layers_ok(
        model.num_layers,
        plans.pp,
        plans.vp,
        plans.first_stage_layers,
        plans.last_stage_layers,
        plans.embedding_in_split,
        plans.loss_in_split,
    )
    ok &= interleave_ok(plans.pp, plans.vp, plans.num_microbatches)
    ok &= cp_ok(seq_len, plans.cp)
    ok &= ep_ok(model, plans.ep, plans.dp, plans.cp, plans.tp, plans.etp)
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
    """``--pp`` alone, under the automatic split."""
    if pp >= 1 and not pipeline_layers_ok(model.num_layers, pp):
        raise InputError(
            f"--pp {pp} leaves a pipeline stage without layers ({model.num_layers} layers of "
            f"{model.name}, up to {-(-model.num_layers // pp)} a stage); accepted: a --pp of at "
            f"most {model.num_layers} that gives every stage a layer",
            field="pp",
        )


def check_pipeline(model: ModelSpec, plan: Plan) -> None:
    """Refuse a pipeline split :func:`pipeline_layers_ok` rejects, saying why."""
    L, pp, vp = model.num_layers, plan.pp, plan.vp
    first, last = plan.first_stage_layers, plan.last_stage_layers
    accounting = plan.embedding_in_split or plan.loss_in_split
    if pipeline_layers_ok(L, pp, vp, first, last, plan.embedding_in_split, plan.loss_in_split):
        return
    if first or last:
        middle_ranks = pp - (first > 0) - (last > 0)
        rest = L - first - last
        if rest < 0 or (middle_ranks == 0 and rest) or (middle_ranks > 0 and rest < middle_ranks):
            why = (
                f"--first-stage-layers {first} and --last-stage-layers {last} leave {rest} of the "
                f"{L} layers for {middle_ranks} middle pipeline ranks (each needs at least one)"
            )
        elif middle_ranks > 0 and rest % middle_ranks:
            why = (
                f"the {rest} layers left after the first/last stages do not split evenly over "
                f"the {middle_ranks} middle pipeline ranks"
            )
        else:
            per_middle = rest // middle_ranks if middle_ranks else vp
            why = (
                f"with --vp {vp} the first ({first or per_middle}), last ({last or per_middle}) "
                f"and middle ({per_middle}) stage layer counts must be multiples of {vp}"
            )
        raise InputError(why, field="first_stage_layers")
    if accounting:
        units = L + int(plan.embedding_in_split) + int(plan.loss_in_split)
        raise InputError(
            f"--pp x --vp = {pp * vp} must divide the {L} layers plus the embedding/loss "
            f"counted as layers ({units})",
            field="embedding_as_layer" if plan.embedding_in_split else "loss_as_layer",
        )
    check_pp(model, pp)
    accepted = [v for v in range(1, L + 1) if pipeline_layers_ok(L, pp, v)]
    raise InputError(
        f"--pp x --vp = {pp * vp} must divide the {L} layers of {model.name} (or {L} + 1 or "
        f"+ 2 with the embedding and loss counted as layers); accepted: --vp "
        f"{', '.join(map(str, accepted))}, or --first-stage-layers/--last-stage-layers for "
        "another uneven split",
        field="vp",
    )


def activation_offload_ok(
    model: ModelSpec, pp: np.ndarray | int, recompute: np.ndarray | int, layers: int
) -> np.ndarray:
    """Offloading the first ``layers`` layers' activations (Transformer Engine's CPU offload, as
    Megatron-Core drives it) needs one micro-batch in flight and no recompute, and fewer layers
    than the model has: Megatron-Core's ``TransformerConfig`` refuses it with pipeline
    parallelism, with activation recompute, and with as many layers as the model's. ``recompute``
    holds :data:`~gpuscale.specs.plan.RECOMPUTE_CODE` codes."""
    if layers == 0:
        return np.ones_like(np.asarray(pp), dtype=bool)
    return (
        (np.asarray(pp) == 1)
        & (np.asarray(recompute) == RECOMPUTE_CODE["none"])
        & (layers < model.num_layers)
    )


def check_ep_overlap(model: ModelSpec, plan: Plan, training: Training) -> None:
    """The EP all-to-all overlap (``--ep-overlap``) as Megatron-Core's ``TransformerConfig``
    accepts it: expert parallelism, interleaved stages when pipelined, no full recompute and
    no recompute of the MoE layer (its all-to-alls would run again outside the schedule);
    nothing to check when ``training`` does not overlap."""
    if not training.ep_overlap:
        return
    require(
        model.is_moe and plan.ep > 1,
        f"--ep-overlap hides expert-parallel all-to-alls, so it needs a mixture-of-experts "
        f"model with --ep 2 or more, got {model.name} at --ep {plan.ep}",
        field="ep_overlap",
    )
    require(
        plan.pp == 1 or plan.vp > 1,
        f"--ep-overlap with pipeline parallelism needs the interleaved schedule (Megatron-Core "
        f"asks for virtual pipeline stages), got --pp {plan.pp} --vp {plan.vp}; accepted: "
        "--vp 2 or more, or --pp 1",
        field="ep_overlap",
    )
    require(
        plan.recompute != "full",
        "--ep-overlap runs without full recompute (Megatron-Core refuses the pair); accepted: "
        "--recompute none or selective with it",
        field="ep_overlap",
    )
    require(
        plan.recompute != "selective" or "moe" not in training.selective_modules,
        "--ep-overlap runs without recomputing the MoE layer (Megatron-Core refuses 'moe' in "
        "--recompute-modules with it); accepted: the other modules",
        field="ep_overlap",
    )


def check_activation_offload_layers(model: ModelSpec, plan: Plan, layers: int) -> None:
    """Refuse what :func:`activation_offload_ok` rejects, saying which condition and what is
    accepted."""
    if bool(activation_offload_ok(model, plan.pp, RECOMPUTE_CODE[plan.recompute], layers)):
        return
    require(
        plan.pp == 1,
        f"--activation-offload-layers runs without pipeline parallelism (one micro-batch's "
        f"forward, then its backward), got --pp {plan.pp}; accepted: --pp 1 with it",
        field="activation_offload_layers",
    )
    require(
        plan.recompute == "none",
        f"--activation-offload-layers keeps the activations instead of recomputing them, got "
        f"--recompute {plan.recompute}; accepted: --recompute none with it",
        field="activation_offload_layers",
    )
    raise InputError(
        f"--activation-offload-layers {layers} must be fewer than the {model.num_layers} layers "
        f"of {model.name}; accepted: 0 to {model.num_layers - 1}",
        field="activation_offload_layers",
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
    check_pipeline(model, plan)
    if not interleave_ok(plan.pp, plan.vp, plan.num_microbatches):
        raise InputError(
            f"--vp {plan.vp} needs the micro-batches per step (gbs/(mbs*dp) = "
            f"{plan.num_microbatches}) to be a multiple of --pp {plan.pp} (interleaved 1F1B)",
            field="vp",
        )
    check_cp(seq_len, plan.cp)
    check_experts(model, plan)
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


def check_recompute_modules(model: ModelSpec, modules: tuple[str, ...]) -> None:
    """Megatron-Core refuses ``mla_up_proj`` without MLA (``TransformerConfig.__post_init__``);
    ``moe``/``moe_act`` re-run nothing in a dense model: one clear line instead of a no-op."""
    if "mla_up_proj" in modules and not model.is_mla:
        raise InputError(
            f"--recompute-modules mla_up_proj needs multi-latent attention, and {model.name} "
            "has none; accepted: core_attn, layernorm, mlp (and moe, moe_act for MoE models)",
            field="recompute_modules",
        )
    for module in ("moe", "moe_act"):
        if module in modules and not model.is_moe:
            raise InputError(
                f"--recompute-modules {module} needs a mixture-of-experts model, and "
                f"{model.name} is dense; accepted: core_attn, layernorm, mlp",
                field="recompute_modules",
            )


def check_experts(model: ModelSpec, plan: Plan) -> None:
    """One clear line for the first expert-split rule ``plan`` breaks (:func:`ep_ok`)."""
    if ep_ok(model, plan.ep, plan.dp, plan.cp, plan.tp, plan.etp):
        return
    if not model.is_moe:
        flag = "ep" if plan.ep != 1 else "etp"
        raise InputError(
            f"--{flag} {getattr(plan, flag)} needs a mixture-of-experts model; {model.name} is "
            f"dense: accepted: --ep 1 (and --etp left to --tp)",
            field=flag,
        )
    if model.num_experts % plan.ep:
        raise InputError(
            f"--ep {plan.ep} needs a mixture-of-experts model whose expert count it divides; "
            f"accepted: {_divisors(model.num_experts)}",
            field="ep",
        )
    if model.ffn_hidden_size % plan.etp:
        raise InputError(
            f"--etp {plan.etp} must divide the expert MLP width {model.ffn_hidden_size} of "
            f"{model.name}; accepted: {_divisors(model.ffn_hidden_size)}",
            field="etp",
        )
    ranks = plan.tp * plan.dp * plan.cp
    if plan.etp == plan.tp:
        raise InputError(
            f"--ep {plan.ep} must divide dp x cp = {plan.dp * plan.cp}, or fold over the "
            f"tensor-parallel ranks with --etp 1 (--ep x --etp must divide tp x dp x cp = "
            f"{ranks})",
            field="ep",
        )
    raise InputError(
        f"--ep {plan.ep} x --etp {plan.etp} = {plan.ep * plan.etp} must divide the "
        f"tp x dp x cp = {ranks} ranks of a pipeline stage; accepted: --ep x --etp dividing "
        f"{ranks}",
        field="ep",
    )
