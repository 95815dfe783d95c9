"""Model states: weights, gradients and optimizer states, per parameter and per GPU.

Bytes per trainable parameter (Rajbhandari et al. 2020, ZeRO, arXiv:1910.02054, Sec. 3.1: mixed
precision Adam keeps ``2 + 2 + 12`` bytes: 16-bit weights and gradients, fp32 master weights,
momentum and variance):

==================  =======  =====  ===============================================
training            weights  grads  optimizer
==================  =======  =====  ===============================================
fp32                4        4      states in fp32
16-bit + master     2        2      4 (fp32 master) + states in fp32
16-bit, pure        2        2      states in the 16-bit dtype
==================  =======  =====  ===============================================

States per parameter: AdamW two, SGD with momentum one, 8-bit AdamW two bytes plus block-wise
fp32 scales (Dettmers et al. 2022, arXiv:2110.02861, Sec. 2, block size 2048), Adafactor one
row and one column statistic per weight matrix and a full one per vector (Shazeer & Stern 2018,
arXiv:1804.04235, Alg. 4; no first moment, as PyTorch's and Hugging Face's defaults). The
per-tensor ``step`` counters (0-d, on the host unless ``capturable``) are not counted.

LoRA (Hu et al. 2021, arXiv:2106.09685) freezes the base and trains ``r(d_in + d_out)``
parameters per adapted linear. QLoRA (Dettmers et al. 2023, arXiv:2305.14314, Sec. 3) stores the
frozen linear weights of the blocks as 4-bit NF4 with one fp32 absmax per 64 weights (0.5 bit
per parameter), or with double quantization 8-bit absmax plus one fp32 constant per 256 blocks
(``8/64 + 32/(64·256)`` = 0.127 bit); embeddings, norms, biases and the output head stay 16-bit
(bitsandbytes/PEFT skip ``lm_head``; torchtune quantizes only its ``LoRALinear`` layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.costmodel.params import (
    embedding_params,
    expert_layer_params,
    layer_params,
    norm_params,
    total_params,
)
from gpuscale.costmodel.profile import Profile
from gpuscale.specs import ModelSpec
from gpuscale.specs.training import Training

DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}

NF4_BITS = 4
NF4_BLOCK = 64
"""QLoRA Sec. 3: one absmax per block of 64 weights."""
DOUBLE_QUANT_BLOCK = 256
"""QLoRA Sec. 3: the 8-bit absmax constants are quantized in blocks of 256."""
ADAM8BIT_BLOCK = 2048
"""Dettmers et al. 2022, Sec. 2: block-wise quantization with blocks of 2048 values."""


def nf4_bytes_per_param(double_quant: bool) -> float:
    """Storage of one NF4 weight with its share of the quantization constants."""
    constants = (
        (1.0 / NF4_BLOCK + 4.0 / (NF4_BLOCK * DOUBLE_QUANT_BLOCK))
        if double_quant
        else 4.0 / NF4_BLOCK
    )
    return NF4_BITS / 8 + constants


def linear_shapes(model: ModelSpec) -> dict[str, tuple[int, int]]:
    """``(d_in, d_out)`` of every linear layer of one block (one expert for the MLP)."""
    h, q, kv, f = model.hidden_size, model.q_width, model.kv_width, model.ffn_hidden_size
    shapes = {"q": (h, q), "k": (h, kv), "v": (h, kv), "o": (q, h), "up": (h, f), "down": (f, h)}
    if model.mlp == "gated":
        shapes["gate"] = (h, f)
    return shapes


MLP_MATRICES = ("gate", "up", "down")


@dataclass(frozen=True, slots=True)
class LinearInstances:
    """Copies of one linear layer of ``(d_in, d_out)`` in the mean block; ``routed`` for the
    routed experts' (what expert parallelism splits)."""

    d_in: int
    d_out: int
    count: float
    routed: bool = False
    blocks: float = 1.0
    """Share of the blocks that hold it (the MoE blocks' share for experts): the kernels it
    launches per mean block."""


def block_linears(model: ModelSpec, name: str) -> list[LinearInstances]:
    """Linear ``name`` of :func:`linear_shapes` in the mean block, as ``params.layer_params``
    counts blocks: attention projections once; an MLP matrix once in a dense model, and in an
    MoE model once per routed and shared expert in the MoE blocks' share plus once at the dense
    width in the rest (DeepSeek-V3's leading dense blocks, Llama 4 Maverick's every other one).
    Counting every expert on every block made Maverick's adapters and Adafactor factors ~2x."""
    d_in, d_out = linear_shapes(model)[name]
    if name not in MLP_MATRICES or not model.is_moe:
        return [LinearInstances(d_in, d_out, 1.0)]
    share = model.moe_layer_share
    out = [LinearInstances(d_in, d_out, model.num_experts * share, routed=True, blocks=share)]
    if model.shared_experts:
        out.append(LinearInstances(d_in, d_out, model.shared_experts * share, blocks=share))
    if share < 1.0:
        width = model.dense_ffn_hidden_size or model.ffn_hidden_size
        dense = (width, d_out) if name == "down" else (d_in, width)
        out.append(LinearInstances(*dense, 1.0 - share, blocks=1.0 - share))
    return out


def _targets(model: ModelSpec, training: Training) -> list[LinearInstances]:
    shapes = linear_shapes(model)
    return [x for t in training.lora_targets if t in shapes for x in block_linears(model, t)]


def mlp_linears(model: ModelSpec) -> list[LinearInstances]:
    """Every MLP matrix of the mean block (:func:`block_linears` of gate, up and down)."""
    shapes = linear_shapes(model)
    return [x for n in MLP_MATRICES if n in shapes for x in block_linears(model, n)]


def _adapters(model: ModelSpec, training: Training) -> float:
    """Adapter elements of the mean block, unrounded: ``r x (d_in + d_out)`` per adapted linear
    (Hu et al. 2021, arXiv:2106.09685 Sec. 4)."""
    r = training.lora_rank
    return sum(r * (x.d_in + x.d_out) * x.count for x in _targets(model, training))


def routed_expert_weights(model: ModelSpec) -> int:
    """Weight elements of the routed experts' MLPs in the mean block (0 for a dense model): all
    experts of an MoE block times the MoE blocks' share, as ``params.expert_layer_params``
    counts them (DeepSeek-V3's leading dense blocks, Llama 4 Maverick's every other one)."""
    return round(sum(x.d_in * x.d_out * x.count for x in mlp_linears(model) if x.routed))


def attention_matrices(model: ModelSpec) -> list[tuple[int, int, float]]:
    """``(d_in, d_out, copies)`` of the token mixer's weight matrices in the mean block: Q (twice
    as wide with an output gate), K, V and the output projection; for multi-head latent
    attention (DeepSeek-V2 arXiv:2405.04434 Sec. 2.1, ``params.attention_params``) the query
    down/up projections, the joint KV down-projection (latent plus rotary key), the KV
    up-projection and the output, plus a DSA indexer's three (``params.indexer_params``); for a
    Gated DeltaNet hybrid (Qwen3.5) the full-attention layers' share of those and the linear
    layers' in_proj_qkv, in_proj_z, in_proj_b/a and out_proj (``params.linear_attention_params``)
    in theirs."""
    h = model.hidden_size
    if model.is_mla:
        heads = model.num_heads
        qk = model.qk_nope_head_dim + model.qk_rope_head_dim
        query = (
            [(h, model.q_lora_rank), (model.q_lora_rank, heads * qk)]
            if model.q_lora_rank
            else [(h, heads * qk)]
        )
        kv = [
            (h, model.kv_lora_rank + model.qk_rope_head_dim),
            (model.kv_lora_rank, heads * (model.qk_nope_head_dim + model.v_head_dim)),
        ]
        out = [(heads * model.v_head_dim, h)]
        indexer: list[tuple[int, int]] = []
        if model.indexer_heads:
            d = model.indexer_head_dim
            q_in = model.q_lora_rank or h
            indexer = [(q_in, model.indexer_heads * d), (h, d), (h, model.indexer_heads)]
        return [(a, b, 1.0) for a, b in query + kv + out + indexer]
    q_out = model.q_width * (2 if model.attention_output_gate else 1)
    full = [(h, q_out), (h, model.kv_width), (h, model.kv_width), (model.q_width, h)]
    if not model.has_gated_deltanet:
        return [(a, b, 1.0) for a, b in full]
    linear_share = model.linear_attention_layers / model.num_layers
    key = model.linear_num_key_heads * model.linear_key_head_dim
    value = model.linear_num_value_heads * model.linear_value_head_dim
    heads = model.linear_num_value_heads
    linear = [(h, 2 * key + value), (h, value), (h, heads), (h, heads), (value, h)]
    return [(a, b, 1.0 - linear_share) for a, b in full] + [(a, b, linear_share) for a, b in linear]


def block_linear_weights(model: ModelSpec) -> int:
    """Weight elements (no biases) of every linear in the mean block: attention, routed and
    shared experts in the MoE blocks' share, dense MLPs in the rest; what QLoRA quantizes.
    ``num_layers`` times it is the blocks' linear weights (params.layer_params' convention)."""
    attention = sum(a * b * n for a, b, n in attention_matrices(model))
    return round(attention + sum(x.d_in * x.d_out * x.count for x in mlp_linears(model)))


def lora_params_per_layer(model: ModelSpec, training: Training) -> int:
    """Adapter parameters of the mean block (:func:`_adapters`)."""
    return round(_adapters(model, training))


def lora_head_params(model: ModelSpec, training: Training) -> int:
    return (
        training.lora_rank * (model.hidden_size + model.vocab_size)
        if "head" in training.lora_targets
        else 0
    )


def lora_params(model: ModelSpec, training: Training) -> int:
    """Trainable adapter parameters of the whole model (0 for full fine-tuning), the blocks'
    counted before rounding (the mean block is fractional where block kinds differ)."""
    if not training.is_lora:
        return 0
    blocks = round(model.num_layers * _adapters(model, training))
    return blocks + lora_head_params(model, training)


def adafactor_state_elements(model: ModelSpec, training: Training) -> int:
    """Elements of Adafactor's factored second moment over the trainable parameters:
    ``rows + cols`` per matrix, the full size of every vector."""
    if training.is_lora:
        r = training.lora_rank
        per_layer = round(
            sum((x.d_in + r + r + x.d_out) * x.count for x in _targets(model, training))
        )
        head = (
            2 * r + model.hidden_size + model.vocab_size if "head" in training.lora_targets else 0
        )
        return model.num_layers * per_layer + head
    h, v = model.hidden_size, model.vocab_size
    matrices = round(
        sum((a + b) * n for a, b, n in attention_matrices(model))
        + sum((x.d_in + x.d_out) * x.count for x in mlp_linears(model))
    )
    # The router is a matrix of the MoE blocks only (their share of the mean block).
    router = model.moe_layer_share if model.is_moe else 0.0
    matrices += round((h + model.num_experts) * router)
    vectors = (
        layer_params(model) - block_linear_weights(model) - round(model.num_experts * h * router)
    )
    per_layer = matrices + vectors
    embed = (v + h) * (1 if model.tied_embeddings else 2)
    if model.position == "learned":
        embed += model.max_seq_len + h
    return model.num_layers * per_layer + embed + norm_params(model) + model.extra_params


@dataclass(frozen=True, slots=True)
class BytesPerParam:
    """Bytes each trainable parameter costs, by where they live."""

    weights: float
    gradients: float
    optimizer: float
    """Master copy (if any) plus optimizer states."""


def trainable_bytes(model: ModelSpec, training: Training) -> BytesPerParam:
    """Per trainable parameter: the table in the module docstring."""
    fp32 = training.precision == "fp32"
    word = 4.0 if fp32 else 2.0
    master = 4.0 if (training.master_weights and not fp32) else 0.0
    state = 4.0 if (fp32 or training.master_weights) else word
    if training.optimizer == "adamw":
        states = 2 * state
    elif training.optimizer == "sgd-momentum":
        states = state
    elif training.optimizer == "adamw-8bit":
        states = 2 * (1.0 + 4.0 / ADAM8BIT_BLOCK)
    else:
        trainable = lora_params(model, training) if training.is_lora else total_params(model)
        states = state * adafactor_state_elements(model, training) / trainable
    return BytesPerParam(weights=word, gradients=word, optimizer=master + states)


BF16_GRAD_BYTES = 2.0


def grad_reduce_bytes(training: Training, profile: Profile) -> float:
    """Bytes per gradient the data-parallel reduction sends: the framework's word (profile
    ``grad_reduce_bytes``), or bf16 under ``grad_reduce_in_bf16``."""
    if training.grad_reduce_in_bf16:
        return BF16_GRAD_BYTES
    return profile.const("grad_reduce_bytes")


def grad_buffer_bytes(training: Training, profile: Profile) -> float:
    """Bytes per gradient of a mixed-precision run's gradient buffer: the framework's (profile
    ``gradient_buffer_bytes``: 16-bit in DeepSpeed/FSDP mixed precision, ZeRO's 16 bytes/param;
    fp32 ``main_grad`` in Megatron, 18), or bf16 under ``grad_reduce_in_bf16``."""
    if training.grad_reduce_in_bf16:
        return BF16_GRAD_BYTES
    return profile.const("gradient_buffer_bytes")


@dataclass(frozen=True, slots=True)
class ParamSplit:
    """Parameters by how they are stored and where they sit in the model.

    ``layer_*`` are per transformer block (``*_expert`` the expert MLPs, split by expert
    parallelism); ``first``/``last`` are outside the blocks on the first/last pipeline stage.
    """

    trainable_layer_dense: int
    trainable_layer_expert: int
    trainable_first: int
    trainable_last: int
    frozen_layer_dense_bytes: float
    frozen_layer_expert_bytes: float
    frozen_first_bytes: float
    frozen_last_bytes: float
    largest_trainable_tensor: int
    """Elements of the biggest trainable tensor: the gradient optimizer-in-backward holds."""
    tied_table: int
    """Elements of a tied embedding, counted in both ``first`` and ``last``: subtract once when
    one stage holds both."""


def _outside_blocks(model: ModelSpec) -> tuple[int, int]:
    """Parameters outside the blocks on the first stage (embedding, positions, extras) and on
    the last (final norm and an untied head; a tied head is a copy of the embedding there,
    as Megatron keeps one on the last stage)."""
    table = model.vocab_size * model.hidden_size
    first = embedding_params(model) - (0 if model.tied_embeddings else table) + model.extra_params
    last = norm_params(model) + table
    return first, last


def param_split(model: ModelSpec, training: Training) -> ParamSplit:
    """Split the model's parameters for :func:`~gpuscale.costmodel.memory.training_memory`."""
    expert = expert_layer_params(model)
    dense = layer_params(model) - expert
    first, last = _outside_blocks(model)
    tied = model.vocab_size * model.hidden_size if model.tied_embeddings else 0
    if not training.is_lora:
        largest = max(
            model.vocab_size * model.hidden_size,
            max(a * b for a, b in linear_shapes(model).values()),
        )
        return ParamSplit(
            trainable_layer_dense=dense,
            trainable_layer_expert=expert,
            trainable_first=first,
            trainable_last=last,
            frozen_layer_dense_bytes=0.0,
            frozen_layer_expert_bytes=0.0,
            frozen_first_bytes=0.0,
            frozen_last_bytes=0.0,
            largest_trainable_tensor=largest,
            tied_table=tied,
        )
    word = DTYPE_BYTES["fp32"] if training.precision == "fp32" else DTYPE_BYTES["bf16"]
    shapes = linear_shapes(model)
    expert_weights = routed_expert_weights(model) if model.is_moe else 0
    dense_weights = block_linear_weights(model) - expert_weights
    quant = nf4_bytes_per_param(training.double_quant) if training.finetune == "qlora" else word
    r = training.lora_rank
    lora_expert = round(
        sum(r * (x.d_in + x.d_out) * x.count for x in _targets(model, training) if x.routed)
    )
    return ParamSplit(
        trainable_layer_dense=lora_params_per_layer(model, training) - lora_expert,
        trainable_layer_expert=lora_expert,
        trainable_first=0,
        trainable_last=lora_head_params(model, training),
        frozen_layer_dense_bytes=dense_weights * quant + (dense - dense_weights) * word,
        frozen_layer_expert_bytes=expert_weights * quant + (expert - expert_weights) * word,
        frozen_first_bytes=first * word,
        frozen_last_bytes=last * word,
        largest_trainable_tensor=max(r * max(d_in, d_out) for d_in, d_out in shapes.values()),
        tied_table=tied,
    )
