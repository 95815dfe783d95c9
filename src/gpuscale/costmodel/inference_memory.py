"""Serving memory per GPU: weights, KV cache and the activation working set.

- Weights: the blocks' linear layers in the serving dtype; embeddings, head and norms in 16 bits.
  ``int4`` is group-wise with an fp16 scale and zero point per 128 weights (AWQ, Lin et al. 2024,
  arXiv:2306.00978, Sec. 4; GPTQ g128); ``int8``/``fp8`` carry per-channel scales (negligible).
- KV cache: ``2 · layers · kv_heads · head_dim · context · batch`` elements (Pope et al. 2022,
  "Efficiently Scaling Transformer Inference", arXiv:2211.05102, Sec. 3.1); grouped-query
  attention shrinks it by ``heads / kv_heads``. Tensor parallelism splits the KV heads; when
  ``tp`` exceeds them each rank keeps a replica of one head (vLLM, Megatron).
- Activations: one layer's working set for the tokens of one forward pass (prefill chunk) with
  flash attention, plus the fp32 logits of the last position of every sequence.

Vectorized over arrays of ``tp`` and ``pp``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from gpuscale.costmodel.model_states import DTYPE_BYTES, block_linear_weights
from gpuscale.costmodel.params import layer_params, norm_params, total_params
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.specs import ModelSpec
from gpuscale.specs.training import Inference

GIB = float(2**30)
INT4_GROUP = 128
"""AWQ/GPTQ default group size; each group stores an fp16 scale and an fp16 zero point."""
SIXTEEN_BIT = 2.0
FP32_BYTES = 4.0


def weight_bytes_per_param(dtype: str) -> float:
    """Storage of one quantized linear weight, constants included."""
    if dtype == "int4":
        return 0.5 + 2 * SIXTEEN_BIT / INT4_GROUP
    return DTYPE_BYTES[dtype]


@dataclass(frozen=True, slots=True)
class InferenceMemory:
    """Bytes per GPU of the worst GPU; each field an array over the ``(tp, pp)`` given."""

    weights: np.ndarray
    kv_cache: np.ndarray
    activations: np.ndarray
    overhead: np.ndarray
    total: np.ndarray

    def row(self, i: int) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)[i]) for f in fields(self)}


def inference_memory(
    model: ModelSpec,
    inference: Inference,
    tp: np.ndarray | int = 1,
    pp: np.ndarray | int = 1,
    profile: Profile | None = None,
) -> InferenceMemory:
    """Peak serving memory per GPU for every ``(tp, pp)`` pair."""
    prof = profile if profile is not None else load_profile("generic")
    tp_a, pp_a = np.broadcast_arrays(np.atleast_1d(np.asarray(tp)), np.atleast_1d(np.asarray(pp)))
    tp_f = tp_a.astype(float)
    layers = (-(-model.num_layers // pp_a)).astype(float)

    linear = block_linear_weights(model)
    per_layer = (
        linear * weight_bytes_per_param(inference.weight_dtype)
        + (layer_params(model) - linear) * SIXTEEN_BIT
    )
    outside = (total_params(model) - model.num_layers * layer_params(model)) * SIXTEEN_BIT
    table = model.vocab_size * model.hidden_size * SIXTEEN_BIT
    # With pipelining the first stage holds the embedding, the last the head (and final norm).
    first = outside - (0 if model.tied_embeddings else table) - norm_params(model) * SIXTEEN_BIT
    last_outside = table + norm_params(model) * SIXTEEN_BIT
    stage_outside = np.where(pp_a == 1, outside, max(first, last_outside))
    weights = (layers * per_layer + stage_outside) / tp_f

    kv_heads = np.maximum(model.num_kv_heads / tp_f, 1.0)
    kv = (
        2
        * layers
        * kv_heads
        * model.head_dim
        * inference.context_len
        * inference.batch
        * DTYPE_BYTES[inference.kv_dtype]
    )

    tokens = min(inference.batch * inference.context_len, inference.max_batched_tokens)
    widest = max(
        model.q_width + 2 * model.kv_width,
        (3 if model.mlp == "gated" else 2) * model.ffn_hidden_size * model.experts_per_token,
    )
    working = tokens * SIXTEEN_BIT * (2 * model.hidden_size + widest / tp_f)
    logits = inference.batch * model.vocab_size * FP32_BYTES / tp_f
    activations = working + logits

    allocated = weights + kv + activations
    overhead = (
        allocated * (prof.const("memory_allocator_fragmentation") - 1.0)
        + prof.const("memory_cuda_context_gib") * GIB
        + np.where(tp_a * pp_a > 1, prof.const("memory_nccl_buffers_gib") * GIB, 0.0)
    )
    return InferenceMemory(
        weights=weights,
        kv_cache=kv,
        activations=activations,
        overhead=overhead,
        total=allocated + overhead,
    )
