"""ZeRO-3's persistent parameters: the small tensors (biases, norms) DeepSpeed keeps gathered
through forward and backward, and the host loop that gathers them again after every optimizer
step in the 2021 releases.

DeepSpeed marks every parameter with fewer than ``stage3_param_persistence_threshold``
elements (default 1e5) persistent (``FP16_DeepSpeedZeroOptimizer_Stage3.persistent_parameters``,
deepspeed/runtime/zero/stage3.py, v0.3.13 12a53b4 to v0.5.x). The end of ``backward`` partitions
every parameter (``_partition_all_parameters``) and ``step`` ends in ``_post_step``, which
gathers the persistent ones again with one blocking ``all_gather`` (``Init._allgather_params``,
partition_parameters.py): it then loops over every persistent tensor and, inside, over every
rank whose shard starts inside the tensor, copying that shard out of the gathered buffer with
its own ``narrow(...).copy_(...)``. One Python iteration and one copy launch per (tensor, rank).
"""

from __future__ import annotations

import numpy as np

from gpuscale.specs import ModelSpec


def persistent_tensor_sizes(m: ModelSpec, threshold: float) -> np.ndarray:
    """Element counts of one transformer layer's tensors below ``threshold`` elements: the
    linear biases (Megatron GPT: query_key_value, dense, dense_h_to_4h, dense_4h_to_h;
    megatron/model/transformer.py) and the two norms' scale (and shift for LayerNorm). Empty
    when ``threshold`` is 0 (no persistent parameters modelled)."""
    if threshold <= 0:
        return np.zeros(0)
    h = m.hidden_size
    ffn_out = m.ffn_hidden_size * (2 if m.mlp == "gated" else 1)
    experts = m.num_experts if m.is_moe else 1
    tensors: list[int] = []
    if m.qkv_bias:
        tensors.append(h + 2 * m.kv_width)
    if m.linear_bias:
        tensors += [h] + [ffn_out, h] * experts
    sizes = np.concatenate(
        [np.asarray(tensors, dtype=float), np.tile(final_norm_sizes(m, np.inf), 2)]
    )
    return sizes[sizes < threshold]


def final_norm_sizes(m: ModelSpec, threshold: float) -> np.ndarray:
    """The final norm's tensors below ``threshold`` elements (scale, and shift for LayerNorm)."""
    sizes = np.full(1 if m.norm == "rmsnorm" else 2, float(m.hidden_size))
    return sizes[sizes < threshold] if threshold > 0 else np.zeros(0)


def shard_copies(sizes: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Copies ``_allgather_params`` launches for tensors of ``sizes`` elements over groups of
    ``ranks``: each tensor is padded to a multiple of the group and split into shards of
    ``ceil(size / ranks)`` (``Init._aligned_size``, ``_partition_param``), and the loop copies
    the shards that start inside the tensor, ``ceil(size / shard)`` of them (at most ``ranks``).
    Returns the sum over ``sizes`` for every group size in ``ranks``."""
    n = np.maximum(np.asarray(ranks, dtype=float), 1.0)[:, None]
    s = np.asarray(sizes, dtype=float)[None, :]
    if s.size == 0:
        return np.zeros(n.shape[0])
    shard = np.ceil(s / n)
    return np.minimum(n, np.ceil(s / shard)).sum(axis=1)
