"""Activation memory: the tensors the forward pass keeps for the backward pass.

Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), Sec. 4.1, Eq. 1: one layer keeps ``sbh(34 + 5as/h)`` bytes in 16-bit
activations with 1-byte dropout masks; Sec. 4.2 (Eq. 2, Table 2): tensor parallelism divides the
``24 + 5as/h`` part by ``t`` and sequence parallelism the remaining ``10`` too; selective
recompute drops the ``5as/h`` attention-core term; full recompute keeps only the ``2sbh`` layer
input. Here the same terms are written per token and per tensor, so that they extend to
grouped-query attention, gated MLPs, flash attention, frozen (LoRA) weights and fp32 training,
and the unit tests compare every term with what PyTorch autograd really saves.

Tensors each layer keeps (``e`` bytes per element, ``h`` hidden, ``q``/``kv`` query and
key/value widths, ``f`` MLP width, ``a`` heads), per token:

=====================================  ==========================  ===========================
tensor                                 bytes                       kept when
=====================================  ==========================  ===========================
two norm inputs + statistics           ``2(eh + stats)``           always (``stats``: fp32
                                                                   rstd, + mean for LayerNorm)
attention/MLP linear inputs            ``eh`` each                 that linear's weight trains
Q, K, V                                ``e(q + 2kv)``              always (unfused: ``3eq``,
                                                                   K and V expanded to q heads)
flash attention output + logsumexp     ``eq + 4a``                 flash attention
unfused attention: softmax output      ``e·a·s``                   no flash, no selective recomp.
unfused attention: dropout mask+out    ``(1 + e)·a·s``             ... and dropout
attention output (output-proj input)   ``eq``                      no flash, its weight trains
MLP: gated (SwiGLU input gate|up)      ``2ef``                     always
MLP: plain (GeLU input)                ``ef``                      always
MLP: down-projection input             ``ef``                      its weight trains
dropout masks after attention and MLP  ``2h``                      dropout
LoRA ``x·A`` of each adapted linear    ``er``                      LoRA
=====================================  ==========================  ===========================

Flash attention (Dao et al. 2022, arXiv:2205.14135, Alg. 2) keeps Q, K, V, the output and the
row log-sum-exp instead of the ``s x s`` probabilities. The SwiGLU term is what Megatron's fused
``bias_swiglu`` keeps (its ``2f``-wide input; the product is recomputed); an unfused
``silu(g) * u`` keeps ``3f`` instead. A linear layer whose weight is frozen needs only its
weight to propagate the input gradient, so PyTorch does not keep its input (verified in
tests/unit/test_memory_torch.py) -- that is why LoRA saves less than full fine-tuning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from gpuscale.specs import ModelSpec, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CODE
from gpuscale.specs.training import Training

Stage = Literal["first", "last"]

FP32_BYTES = 4
MASK_BYTES = 1
"""A dropout mask is a ``bool`` tensor (Korthikanti Sec. 4.1; ``torch.native_dropout``)."""

LOSS_TRANSIENT_COPIES = 2
"""Unfused cross-entropy backward (PyTorch ``log_softmax`` + ``nll_loss``): while the saved fp32
log-probabilities are still alive it materialises the fp32 gradient of the log-probabilities
and then that of the logits, two more ``s x vocab`` fp32 tensors."""

ACTIVATION_OFFLOAD_LAYERS_IN_FLIGHT = 2
"""With activation offloading the device keeps the layer being computed and the one whose
copy to or from the host is in flight (torchtune ``OffloadActivations``, double buffering)."""


@dataclass(frozen=True, slots=True)
class LayerTerms:
    """Bytes one transformer layer keeps per token of one micro-batch, before any parallel split.

    ``replicated`` is split only by sequence parallelism, ``split`` by tensor parallelism alone,
    ``per_seq`` (unfused attention probabilities) is per token *per token of context* and is
    split by tensor parallelism; ``lora`` (adapter ranks are not split) is replicated in TP.
    """

    replicated: float
    split: float
    per_seq: float
    lora: float
    checkpoint: float
    """The layer input, all full recompute keeps (Korthikanti Sec. 4.3)."""
    gathered: float = 0.0
    """Linear inputs kept all-gathered over the sequence (not split by TP or SP; DTensor
    sequence parallelism, :attr:`Training.sp_saves_gathered_input`); zero otherwise."""

    @property
    def selective_removable(self) -> float:
        return self.per_seq


def _trainable(training: Training, target: str) -> bool:
    return training.finetune == "full" or target in training.lora_targets


def _eager_norm_extra(model: ModelSpec, training: Training) -> float:
    """Per-token bytes an eager RMSNorm keeps beyond a fused one's input and statistics: its
    fp32 upcast input instead of the 16-bit one, plus the normalized output its weight's
    gradient needs when the weight trains (Hugging Face ``LlamaRMSNorm``)."""
    if model.norm != "rmsnorm":
        return 0.0
    e, h = training.activation_bytes, model.hidden_size
    return float(FP32_BYTES * h - e * h + e * h * (training.finetune == "full"))


def _linear_input_bytes(training: Training) -> float:
    """Bytes per element of a linear layer's saved input: the low-precision cast under
    :attr:`Training.low_precision_saved_inputs` (full fine-tuning; the LoRA terms below count
    16-bit copies), else the activation word."""
    return training.activation_bytes if training.is_lora else training.linear_input_bytes


def _mlp_bytes(model: ModelSpec, training: Training) -> float:
    """Per token and routed copy: the gated activation's ``2f`` input (a plain one's ``f``),
    kept in 16 bits by the activation function, and the down projection's input when its
    weight trains."""
    e, f = training.activation_bytes, model.ffn_hidden_size
    b = _linear_input_bytes(training)
    return (2 * e * f if model.mlp == "gated" else e * f) + b * f * _trainable(training, "down")


def layer_terms(model: ModelSpec, training: Training) -> LayerTerms:
    """Per-token bytes of one layer (see the module table)."""
    e = training.activation_bytes
    h, q, kv, f, a = (
        model.hidden_size,
        model.q_width,
        model.kv_width,
        model.ffn_hidden_size,
        model.num_heads,
    )
    k = model.experts_per_token
    stats = FP32_BYTES * (1 if model.norm == "rmsnorm" else 2)
    mask = MASK_BYTES if training.dropout else 0

    b = _linear_input_bytes(training)
    qkv_trains = any(_trainable(training, t) for t in ("q", "k", "v"))
    up_trains = any(_trainable(training, t) for t in ("gate", "up"))
    replicated: float = 2 * (e * h + stats) + 2 * mask * h + b * h * qkv_trains
    # Routed tokens are copied once per chosen expert before the experts' first linear.
    replicated += b * h * k * up_trains

    o_trains = _trainable(training, "o")
    if training.flash_attention:
        # The kernel keeps its output; the output projection shares it in 16 bits and keeps a
        # cast of its own under low-precision saved inputs.
        # Q, K and V as the kernel takes them (MLA's values are narrower than its keys).
        v, out = model.v_width, model.attention_out_width
        split = e * (q + kv + v) + e * out + FP32_BYTES * a + (b < e) * b * out * o_trains
    else:
        # Unfused attention multiplies by K and V expanded to every query head (Hugging Face
        # ``repeat_kv``, Megatron's unfused core attention), so it keeps them at query width.
        split = e * 3 * q + b * q * o_trains
    per_seq = a * (e + mask * (MASK_BYTES + e)) if not training.flash_attention else 0.0

    split += k * _mlp_bytes(model, training)

    if training.is_lora and training.lora_dropout > 0:
        # Each adapter's A matrix keeps its own dropped-out input and the dropout's mask
        # (PEFT ``lora_dropout(x)`` per adapter) instead of the layer input they would share.
        copy = e + MASK_BYTES
        targets = training.lora_targets
        replicated -= e * h * qkv_trains + e * h * k * up_trains
        replicated += copy * h * sum(t in targets for t in ("q", "k", "v"))
        replicated += copy * h * k * sum(t in targets for t in ("gate", "up"))
        split += copy * q * ("o" in targets) + k * copy * f * ("down" in targets)
        split -= e * f * k * _trainable(training, "down")
        if not training.flash_attention:
            split -= e * q * _trainable(training, "o")

    if not training.fused_elementwise:
        # Eager PyTorch (Hugging Face ``LlamaRMSNorm``/``LlamaMLP``, torchtune, torchtitan):
        # RMSNorm upcasts its input to fp32 and keeps it (pow, mul), and keeps its normalized
        # output when its weight trains; SiLU-gating keeps the SiLU output for the mul. Rotary
        # multiplies by cos/sin tables that need no gradient, so it keeps no per-token tensor;
        # nn.LayerNorm and nn.GELU are single native kernels: nothing extra (all verified in
        # tests/unit/test_memory_torch.py).
        replicated += 2 * _eager_norm_extra(model, training)
        if model.mlp == "gated":
            split += k * e * f

    lora = 0.0
    if training.is_lora:
        per_layer = {
            "q": 1,
            "k": 1,
            "v": 1,
            "o": 1,
            "gate": k * (model.mlp == "gated"),
            "up": k,
            "down": k,
        }
        lora = e * training.lora_rank * sum(per_layer.get(t, 0) for t in training.lora_targets)
    gathered = 0.0
    if training.sp_saves_gathered_input and not (training.is_lora and training.lora_dropout > 0):
        # The q/k/v and gate/up inputs (the norm outputs) are kept at full sequence length.
        gathered = b * h * qkv_trains + b * h * k * up_trains
        replicated -= gathered
    return LayerTerms(
        replicated=replicated,
        split=split,
        per_seq=per_seq,
        lora=lora,
        checkpoint=e * h,
        gathered=gathered,
    )


def module_savings(model: ModelSpec, training: Training) -> LayerTerms:
    """Per-token bytes of one layer that Megatron-Core's selective recompute frees, for the
    modules of ``training.recompute_modules`` (``TransformerConfig.recompute_modules``), in the
    buckets of :func:`layer_terms` (``checkpoint`` unused). What each module is, in
    Megatron-Core (``transformer_layer.py``, ``multi_latent_attention.py``, ``moe/experts.py``):

    - ``core_attn``: the attention core is checkpointed; only an unfused one keeps anything
      beyond its inputs (the ``s x s`` probabilities, Korthikanti et al. 2022, Sec. 5).
    - ``mla_up_proj``: MLA's up-projections and RoPE run under output-discarding
      checkpointing, so Q, K and V the attention kernel saves are freed and re-formed.
    - ``layernorm``: output-discarding checkpointing of the norms that are modules of their
      own; with Transformer Engine the input norm is one only under MLA (else fused into the
      QKV linear, ``IdentityOp``), and the norm output an MoE layer's router reads is not
      among :func:`layer_terms` (a gap of those terms, not of Megatron), so only MLA's q/kv
      down-projection input is freed.
    - ``mlp`` / ``moe``: the dense MLP / the whole MoE layer is checkpointed and keeps its
      input only (the mean block's dense or MoE share, :attr:`ModelSpec.moe_layer_share`);
      the dense MLP's fused pre-MLP norm output and statistics go with it, while an MoE
      layer's separate norm runs before the checkpoint.
    - ``moe_act``: the experts' activation output (the second expert GEMM's input) is
      discarded after use and re-formed from the first GEMM's output (``moe_act`` needs
      grouped GEMMs).
    """
    modules = training.recompute_modules
    e, h, q, kv, f = (
        training.activation_bytes,
        model.hidden_size,
        model.q_width,
        model.kv_width,
        model.ffn_hidden_size,
    )
    # A discarded tensor frees what it held: under low-precision saved inputs Megatron-Core
    # makes the recomputed module's consumer keep its 16-bit input instead
    # (``set_save_original_input``) and drops it, so the base term is what goes.
    b = _linear_input_bytes(training)
    k = model.experts_per_token
    terms = layer_terms(model, training)
    qkv_trains = any(_trainable(training, t) for t in ("q", "k", "v"))
    up_trains = any(_trainable(training, t) for t in ("gate", "up"))
    mlp = _mlp_bytes(model, training)
    share = model.moe_layer_share
    replicated = split = gathered = 0.0
    per_seq = terms.per_seq if "core_attn" in modules else 0.0
    if "mla_up_proj" in modules and model.is_mla:
        split += e * (q + kv + model.v_width) if training.flash_attention else e * 3 * q
    if "layernorm" in modules and model.is_mla:
        if terms.gathered > 0:
            gathered += b * h * qkv_trains
        else:
            replicated += b * h * qkv_trains
    if "mlp" in modules:
        # Transformer Engine fuses the pre-MLP norm into the first MLP linear, so the
        # checkpointed MLP keeps only the norm's input: its output and statistics go too.
        stats = FP32_BYTES * (1 if model.norm == "rmsnorm" else 2)
        norm_out = (1.0 - share) * b * h * up_trains
        if terms.gathered > 0:
            gathered += norm_out
        else:
            replicated += norm_out
        replicated += (1.0 - share) * stats
        split += (1.0 - share) * k * mlp
    if "moe" in modules:
        copies = share * b * h * k * up_trains
        if terms.gathered > 0:
            gathered += copies
        else:
            replicated += copies
        split += share * k * mlp
    elif "moe_act" in modules:
        split += share * k * b * f * _trainable(training, "down")
    return LayerTerms(
        replicated=replicated,
        split=split,
        per_seq=per_seq,
        lora=0.0,
        checkpoint=0.0,
        gathered=gathered,
    )


@dataclass(frozen=True, slots=True)
class OpSacTerms:
    """Per-token bytes torchtitan's per-op selective checkpointing keeps for one layer
    (torchtitan ``_apply_ac_to_transformer_block``, ``selective_ac_option = "op"``): the layer
    input, the output of every odd-numbered ``aten.mm`` of the forward (the even ones are
    recomputed), the attention kernel's outputs, and under tensor parallelism the
    reduce-scatter outputs. Everything else is recomputed from these."""

    by_sp: float
    """Split by sequence parallelism only: the layer input."""
    by_tp: float
    """Column-parallel matmul outputs and the attention outputs, split by tensor parallelism."""
    whole: float
    """Row-parallel matmul outputs: under tensor parallelism a partial sum of the full hidden
    width before its reduce-scatter (DTensor ``Partial``), so not split at all."""
    reduce_scatter: float
    """The sequence-parallel reduce-scatter outputs, kept only when ``tp > 1``; split by SP."""


def op_sac_terms(model: ModelSpec, training: Training) -> OpSacTerms:
    """:class:`OpSacTerms` of one layer. The matmuls run in forward order q, k, v, o, (gate),
    up, down (torchtitan Llama: ``wq, wk, wv``, ``wo``, then ``w2(silu(w1 x) * w3 x)``)."""
    e = training.activation_bytes
    h, q, kv, f = model.hidden_size, model.q_width, model.kv_width, model.ffn_hidden_size
    k = model.experts_per_token
    order = [("q", q, True), ("k", kv, True), ("v", kv, True), ("o", h, False)]
    if model.mlp == "gated":
        order.append(("gate", k * f, True))
    order += [("up", k * f, True), ("down", k * h, False)]
    by_tp = whole = 0.0
    for index, (_, width, column) in enumerate(order):
        if index % 2:  # torchtitan recomputes every second mm (``mm_count % 2 == 0``)
            continue
        if column:
            by_tp += e * width
        else:
            whole += e * width
    attention = e * q + (FP32_BYTES * model.num_heads if training.flash_attention else 0)
    return OpSacTerms(
        by_sp=float(e * h), by_tp=by_tp + attention, whole=whole, reduce_scatter=2.0 * e * h
    )


def head_terms(model: ModelSpec, training: Training) -> tuple[float, float, float]:
    """Per-token bytes kept by the last stage outside the layers: ``(replicated, vocab_split,
    loss_transient)``. Korthikanti Sec. 4.4: the final norm input, the output-layer input and
    the fp32 logits of the cross-entropy (``4sbv/t``, vocabulary-parallel). A chunked loss keeps
    the 16-bit logits instead and works on one chunk in fp32; a fused one keeps none."""
    e = training.activation_bytes
    h = model.hidden_size
    stats = FP32_BYTES * (1 if model.norm == "rmsnorm" else 2)
    replicated: float = e * h + stats + e * h * _trainable(training, "head")
    if not training.fused_elementwise:
        replicated += _eager_norm_extra(model, training)
    if training.task != "lm" or training.loss == "fused":
        return replicated, 0.0, 0.0
    if training.loss in ("chunked", "te"):
        # te: Transformer Engine's kernel saves the 16-bit logits and writes the gradient over
        # them (cross_entropy_backward_kernel stores into X_ptr): nothing transient.
        return replicated, float(e * model.vocab_size), 0.0
    if training.loss == "compiled":
        # One fused kernel reads the 16-bit logits it keeps and writes their 16-bit gradient.
        return replicated, float(e * model.vocab_size), float(e * model.vocab_size)
    logits = FP32_BYTES * model.vocab_size
    return replicated, logits, LOSS_TRANSIENT_COPIES * logits


def embedding_terms(model: ModelSpec, training: Training) -> float:
    """Per-token bytes the first stage keeps for the embedding: its dropout mask (Korthikanti
    Sec. 4.4, ``sbhp`` over ``p`` micro-batches in flight)."""
    return float(MASK_BYTES * model.hidden_size) if training.dropout else 0.0


@dataclass(frozen=True, slots=True)
class StageActivations:
    """Activation bytes of one GPU of a pipeline stage, one element per plan."""

    stored: np.ndarray
    """Kept from forward to backward, all micro-batches in flight together."""
    workspace: np.ndarray
    """A layer's working set while it is recomputed and differentiated."""
    loss: np.ndarray
    """The loss's working set at the start of backward (zero on stages without the head)."""
    cuda_graphs: bool = False
    host: np.ndarray | float = 0.0
    """Saved activations offloaded to host memory, all micro-batches in flight together (not
    on the device)."""

    @property
    def transient(self) -> np.ndarray:
        """Extra working set at the worst moment of backward. The layer's and the loss's happen
        at different moments, so the allocator reuses one's memory for the other; a CUDA
        graph's private pool keeps the captured layers' working set reserved between replays
        (PyTorch 'CUDA Graphs' notes, graph memory management), so then both are held."""
        if self.cuda_graphs:
            return self.workspace + self.loss
        return np.maximum(self.workspace, self.loss)

    @property
    def peak(self) -> np.ndarray:
        return self.stored + self.transient

    @property
    def cached(self) -> np.ndarray:
        """Freed but still reserved by the caching allocator at the peak, on a stage that
        computes the loss: the forward frees each layer's working set into cached blocks sized
        like a layer's tensors; the ``s x vocab`` loss tensors are larger than any of them and
        take fresh segments; backward's layer recompute then reuses the first blocks. Both
        sets stay reserved, so the reserved peak holds the smaller working set on top of the
        allocated peak (PyTorch 'CUDA semantics', memory management: freed blocks stay cached
        for reuse; a request larger than every cached block allocates a new segment). Under
        CUDA graphs both are already counted as live."""
        if self.cuda_graphs:
            return np.zeros_like(self.stored)
        return np.where(self.loss > 0, np.minimum(self.workspace, self.loss), 0.0)


def layers_on_stage(model: ModelSpec, plans: PlanBatch) -> np.ndarray:
    """Layers held by the most loaded stage (uneven splits: costmodel/pipeline.py)."""
    from gpuscale.costmodel.pipeline import stage_layers

    return stage_layers(model, plans).heaviest


def microbatches_in_flight(plans: PlanBatch) -> np.ndarray:
    """Micro-batch-layers of activations the first stage holds under 1F1B, in units of one
    micro-batch through the stage's layers: ``min(p, m)`` micro-batches (Narayanan et al. 2021,
    Sec. 2.2.1), times ``1 + (p-1)/(p·v)`` with ``v`` interleaved chunks (Korthikanti Sec. 4.2.3)."""
    pp = plans.pp.astype(float)
    inflight = np.minimum(pp, plans.num_microbatches.astype(float))
    interleave = np.where(plans.vp > 1, 1.0 + (pp - 1.0) / (pp * plans.vp), 1.0)
    return np.maximum(inflight, 1.0) * interleave


def ep_overlap_extra_layers(
    training: Training, plans: PlanBatch, on_stage: np.ndarray
) -> np.ndarray | float:
    """Layers of one micro-batch's activations that Megatron-Core's EP A2A overlap keeps beyond
    1F1B's. Each forward-backward pair runs layer by layer, the forward of layer ``j`` of one
    micro-batch beside the backward of a layer of another (``TransformerLayerSchedulePlan.run``),
    so one layer's worth is added while one is freed: the crossing holds one layer more.
    Interleaved, each stage also runs one more warm-up forward so each pair's passes are
    independent (``schedules.py``: ``num_warmup_microbatches + 1``): one model chunk,
    ``1 / vp`` of the stage's layers. None with a single micro-batch, which has no pair."""
    if not training.ep_overlap:
        return 0.0
    extra = np.where(plans.pp > 1, on_stage / plans.vp, 1.0)
    return np.where(plans.num_microbatches > 1, extra, 0.0)


def stage_activations(
    model: ModelSpec, training: Training, plans: PlanBatch, stage: Stage
) -> StageActivations:
    """Activation bytes per GPU on the ``first`` or ``last`` pipeline stage of every plan (the
    same GPU when ``pp == 1``)."""
    shared = _per_layer(model, training, plans, None)
    acts = _on_stage(model, training, plans, shared, stage, tokens_workspace(shared))
    return StageActivations(
        stored=acts.stored.ravel(),
        workspace=acts.workspace.ravel(),
        loss=acts.loss.ravel(),
        cuda_graphs=acts.cuda_graphs,
        host=np.broadcast_to(acts.host, acts.stored.shape).ravel(),
    )


def saved_layer_bytes(model: ModelSpec, training: Training, plans: PlanBatch) -> np.ndarray:
    """Bytes one layer saves for its backward per micro-batch on one GPU, per plan: what an
    activation offload copies to host memory and back for each offloaded layer."""
    shared = _per_layer(model, training, plans, None)
    return (shared.tokens * shared.stored_layer).ravel()


def stage_activations_runs(
    model: ModelSpec, training: Training, runs: PlanBatch, codes: np.ndarray | None
) -> tuple[StageActivations, StageActivations]:
    """:func:`stage_activations` of the first and of the last stage of a batch made of runs of
    plans alike but for the recompute choice, with the codes ``codes`` in each run: ``runs``
    holds one plan per run and everything but the stored layer is priced once per run.
    ``stored`` and ``workspace`` are 2-D, one row per code and one column per run (rows of
    whole runs, so that every operation runs along long rows); ``loss`` is 1-D, one element per
    run. ``codes=None``: each plan of ``runs`` with its own recompute, one row. The
    stage-independent per-layer terms are computed once for both stages."""
    shared = _per_layer(model, training, runs, codes)
    workspace = tokens_workspace(shared)
    return (
        _on_stage(model, training, runs, shared, "first", workspace),
        _on_stage(model, training, runs, shared, "last", workspace),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _PerLayer:
    """The terms both stages share: tokens, layers and the per-token bytes of one layer, one
    element per plan (``stored_layer`` and ``workspace``: one row per recompute code, see
    :func:`stage_activations_runs`)."""

    sp: np.ndarray
    tokens: np.ndarray
    layers: np.ndarray
    """Layers whose saved activations stay on the device."""
    offloaded: np.ndarray
    """Layers whose saved activations are in host memory (activation offloading)."""
    stored_layer: np.ndarray
    workspace: np.ndarray
    head: np.ndarray
    loss: np.ndarray


def tokens_workspace(shared: _PerLayer) -> np.ndarray:
    """A layer's working set per GPU (the same on every stage)."""
    return shared.tokens * shared.workspace


def _per_layer(
    model: ModelSpec, training: Training, plans: PlanBatch, codes: np.ndarray | None
) -> _PerLayer:
    terms = layer_terms(model, training)
    tp = plans.tp.astype(float)
    sp = np.where(plans.sequence_parallel & (plans.tp > 1), tp, 1.0)
    context = training.seq_len / plans.cp
    tokens = plans.micro_batch * context

    full_layer = (
        (terms.replicated + terms.lora) / sp
        + terms.split / tp
        + terms.per_seq * context / tp
        + terms.gathered
    )
    checkpoint = terms.checkpoint / sp
    if training.selective_policy == "op":
        op = op_sac_terms(model, training)
        selective = np.minimum(
            op.by_sp / sp + op.by_tp / tp + op.whole + np.where(tp > 1, op.reduce_scatter / sp, 0),
            full_layer,
        )
    elif training.selective_policy == "layer":
        # torchtitan per-layer SAC: one layer in ``selective_every`` fully recomputed.
        every = float(training.selective_every)
        selective = (checkpoint + (every - 1.0) * full_layer) / every
    else:
        off = module_savings(model, training)
        selective = full_layer - (
            off.replicated / sp + off.split / tp + off.per_seq * context / tp + off.gathered
        )
    # The layer being recomputed holds its full set again during its backward (per-layer SAC:
    # the recomputed layer is one with only its input kept).
    layer_sac = training.selective_policy == "layer"
    full, chosen = RECOMPUTE_CODE["full"], RECOMPUTE_CODE["selective"]
    if codes is None:
        recompute = plans.recompute
        stored_layer = np.where(
            recompute == full,
            checkpoint,
            np.where(recompute == chosen, selective, full_layer),
        )
        workspace = np.where(
            (recompute == chosen) & layer_sac,
            full_layer - checkpoint,
            full_layer - stored_layer,
        )
        stored_layer, workspace = stored_layer[None, :], workspace[None, :]
    else:
        # One row per code, the same choice per plan as above.
        kept = {full: checkpoint, chosen: selective}
        stored = [kept.get(int(code), full_layer) for code in codes]
        freed: dict[int, np.ndarray] = {}
        for code, layer in zip(codes, stored, strict=True):
            if int(code) not in freed:
                recomputed = int(code) == chosen and layer_sac
                freed[int(code)] = full_layer - (checkpoint if recomputed else layer)
        stored_layer = np.stack(stored)
        workspace = np.stack([freed[int(code)] for code in codes])

    on_stage = layers_on_stage(model, plans).astype(float)
    layers = on_stage
    if training.activation_offload:
        layers = np.minimum(layers, ACTIVATION_OFFLOAD_LAYERS_IN_FLIGHT)
    # Transformer Engine's CPU offload of the first N layers peaks at (layers - N) layers' saved
    # activations (cpu_offload.py OffloadSynchronizer._default_offload_sync_init).
    layers = np.maximum(layers - training.activation_offload_layers, 0.0)
    head_replicated, head_vocab, loss_transient = head_terms(model, training)
    head = tokens * (head_replicated / sp + head_vocab / tp)
    loss = tokens * loss_transient / tp
    return _PerLayer(
        sp=sp,
        tokens=tokens,
        layers=layers,
        offloaded=on_stage - layers,
        stored_layer=stored_layer,
        workspace=workspace,
        head=head,
        loss=loss,
    )


def _on_stage(
    model: ModelSpec,
    training: Training,
    plans: PlanBatch,
    shared: _PerLayer,
    stage: Stage,
    workspace: np.ndarray,
) -> StageActivations:
    """One stage, 2-D as :func:`stage_activations_runs` gives it; ``workspace`` is
    :func:`tokens_workspace` of ``shared``."""
    sp, tokens, layers = shared.sp, shared.tokens, shared.layers
    stored_layer = shared.stored_layer
    head, loss = shared.head, shared.loss
    extra = ep_overlap_extra_layers(training, plans, layers + shared.offloaded)
    if stage == "last":
        # 1F1B: the last stage runs each micro-batch's backward right after its forward.
        return StageActivations(
            stored=tokens * (layers + extra) * stored_layer + head,
            workspace=workspace,
            loss=loss,
            cuda_graphs=training.cuda_graphs,
            host=tokens * shared.offloaded * stored_layer,
        )
    in_flight = np.maximum(np.minimum(plans.pp, plans.num_microbatches), 1)
    stored = tokens * (
        (layers * microbatches_in_flight(plans) + extra) * stored_layer
        + embedding_terms(model, training) / sp * in_flight
    )
    single = plans.pp == 1
    if single.any():
        stored = np.where(single, stored + head, stored)
    return StageActivations(
        stored=stored,
        workspace=workspace,
        loss=np.where(single, loss, 0.0),
        cuda_graphs=training.cuda_graphs,
        host=tokens * shared.offloaded * microbatches_in_flight(plans) * stored_layer,
    )
