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


def layer_tensors(
    m: ModelSpec, tp: np.ndarray, ep: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """One transformer layer's small tensors on one rank, per plan: (elements of one tensor,
    tensors of that size), one pair per kind. DeepSpeed compares a parameter's own ``ds_numel``,
    the rank's Megatron tensor-parallel slice (``zero.Init`` wraps the model that
    ``megatron/model/transformer.py`` builds for its TP rank): the ColumnParallelLinear biases
    (query_key_value, dense_h_to_4h) hold ``1/tp`` of their width, the RowParallelLinear biases
    (dense, dense_4h_to_h) and the norms all of it; a rank holds ``num_experts / ep`` experts."""
    tp = np.asarray(tp, dtype=float)
    one = np.ones_like(tp)
    h = m.hidden_size
    kinds: list[tuple[np.ndarray, np.ndarray]] = []
    if m.qkv_bias:
        # query_key_value's output width, as params.attention_params counts it
        q_out = m.q_width * (2 if m.attention_output_gate else 1)
        kinds.append(((q_out + 2 * m.kv_width) / tp, one))
    if m.linear_bias:
        ffn_out = m.ffn_hidden_size * (2 if m.mlp == "gated" else 1)
        experts = np.maximum(m.num_experts / np.asarray(ep, dtype=float), 1.0) if m.is_moe else one
        kinds += [(h * one, one), (ffn_out / tp, experts), (h * one, experts)]
    # the layer's two norms: scale, and shift for LayerNorm
    kinds.append((h * one, 2.0 * norm_tensors(m) * one))
    return kinds


def norm_tensors(m: ModelSpec) -> int:
    """Tensors of one norm: RMSNorm a scale, LayerNorm a scale and a shift."""
    return 1 if m.norm == "rmsnorm" else 2


def post_step_gather(
    m: ModelSpec,
    threshold: float,
    layers: np.ndarray,
    tp: np.ndarray,
    ep: np.ndarray,
    ranks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per plan: (copies, elements) of ``_post_step``'s gather on one rank: the copy launches
    of ``_allgather_params``' loop (:func:`shard_copies`) and the elements it gathers, over the
    tensors of ``layers`` layers (:func:`layer_tensors`) and the final norm that have fewer than
    ``threshold`` elements (``persistent_parameters``: ``ds_numel < threshold``, strictly). The
    final norm is counted on every rank. Zeros when ``threshold`` is 0 (none modelled)."""
    layers = np.asarray(layers, dtype=float)
    copies = np.zeros_like(layers)
    elements = np.zeros_like(layers)
    if threshold <= 0:
        return copies, elements
    final = (float(m.hidden_size) * np.ones_like(layers), norm_tensors(m) * np.ones_like(layers))
    for (size, count), times in [*((k, layers) for k in layer_tensors(m, tp, ep)), (final, 1.0)]:
        held = np.where(size < threshold, count * times, 0.0)
        copies = copies + held * shard_copies(size, ranks)
        elements = elements + held * size
    return copies, elements


def shard_copies(sizes: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Copies ``_allgather_params`` launches for one tensor of ``sizes`` elements over a group
    of ``ranks`` (elementwise): the tensor is padded to a multiple of the group and split into
    shards of ``ceil(size / ranks)`` (``Init._aligned_size``, ``_partition_param``), and the
    loop copies the shards that start inside the tensor, ``ceil(size / shard)`` of them (at
    most ``ranks``)."""
    n = np.maximum(np.asarray(ranks, dtype=float), 1.0)
    s = np.asarray(sizes, dtype=float)
    shard = np.ceil(s / n)
    return np.minimum(n, np.ceil(s / shard))
