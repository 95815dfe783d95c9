"""Data-parallel gradient synchronisation under each communication hook of ``gpuscale.runtime``:
time on the network, extra time on the GPU for encoding and decoding, and bytes that leave a
node. Pure functions of the gradient size and the cluster's two levels.

Network time uses the collectives of :mod:`gpuscale.costmodel.collectives` (alpha-beta with
NCCL's bus factors). A collective's ``message_bytes`` is the full buffer, as nccl-tests sizes it:
an all-gather of ``n`` payloads of ``p`` bytes is priced at ``n * p``.

Codec time counts the memory traffic of each hook as ``gpuscale.runtime`` implements it (unfused
PyTorch element-wise ops, each reading and writing whole tensors), at the profile's achieved HBM
bandwidth. It is charged to the step unhidden: encoding runs on the same GPU as backward, so it
lengthens the compute stream rather than hiding behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.errors import require

HOOKS: tuple[str, ...] = ("default", "bf16", "hierarchical", "hierarchical+bf16", "topk", "qsgd")
"""Hooks priced here. ``fp16`` variants cost the same as ``bf16`` ones."""

FIDELITY = {
    "default": "exact",
    "bf16": "16-bit",
    "hierarchical": "exact",
    "hierarchical+bf16": "16-bit",
    "topk": "lossy",
    "qsgd": "lossy",
}
"""``exact``: PyTorch's default mean gradient to float32 rounding; ``16-bit``: the same mean,
rounded to 16 bits on the wire; ``lossy``: a different, compressed mean that relies on error
feedback to converge (check the loss curve)."""

WIRE_16BIT_BYTES = 2.0
TOPK_PAIR_BYTES = 8.0
"""float32 value + int32 index per kept entry (runtime/hooks/topk.py ``encode``)."""
QSGD_NORM_BYTES = 4.0

# Memory traffic per gradient entry, in bytes, of each hook's element-wise work, counted from
# gpuscale/runtime/hooks/*.py (an fp32 op that reads one tensor and writes one moves 8 bytes per
# entry). The default hook divides in place once; only the excess over it is charged.
DEFAULT_BYTES_PER_ENTRY = 8.0
"""``div_`` of the fp32 bucket (4 + 4)."""
CAST_BYTES_PER_ENTRY = 16.0
"""fp32 -> 16-bit copy (4 + 2), divide in 16 bits (2 + 2), copy back (2 + 4)."""
HIERARCHICAL_BYTES_PER_ENTRY = 20.0
"""Zeroed padded buffer (4), divide into it (8), copy out (8): buckets are padded to a multiple
of the node size."""
SHARD_CAST_BYTES_PER_ENTRY = 12.0
"""+bf16: the node's shard to 16 bits (4 + 2) and back (2 + 4); a shard is 1/L of the bucket."""
RADIX_SELECT_PASSES = 4.0
"""PyTorch's multi-block top-k is a radix select on 32-bit keys, 8 bits per pass
(aten/src/ATen/native/cuda/TensorTopK.cu, ``RADIX_BITS = 8``): four reads of |x|."""
TOPK_BYTES_PER_ENTRY = 12.0 + 8.0 + 4.0 * RADIX_SELECT_PASSES + 8.0 + 4.0 + 8.0
"""Error-feedback add (4 + 4 + 4), |x| (8), radix-select passes (4 each), residual clone (8),
zeroing the output (4), divide (8)."""
TOPK_BYTES_PER_KEPT = 16.0
"""Per kept entry of every rank: value and index read (8), read-modify-write of the target (8)."""
QSGD_BYTES_PER_ENTRY = 12.0 + 115.0 + 25.0 + 2.0 + 4.0 + 8.0
"""Error-feedback add (12); ``quantize`` (115: padded copy 12, norm 4, |x| / scale / floor /
fraction / add / clamp / sign-multiply 8-12 each, random draw 4, compare and casts 20); own
decode and ``p - Q(p)`` for the residual (25); packing (2); zeroing (4); divide (8)."""
QSGD_BYTES_PER_ENTRY_PER_RANK = 25.0
"""Decoding one rank's payload: int8 -> fp32 (1 + 4), scale (8), add into the sum (8 + 4)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HookOptions:
    """Parameters of the lossy hooks, as ``gpuscale.runtime`` takes them."""

    topk_ratio: float = 0.01
    """Fraction of the entries each rank sends."""
    qsgd_levels: int = 127
    qsgd_chunk: int = 512

    def __post_init__(self) -> None:
        require(0 < self.topk_ratio <= 1, f"--topk-ratio must be in (0, 1], got {self.topk_ratio}")
        require(
            1 <= self.qsgd_levels <= 32767,
            f"--qsgd-levels must be in 1..32767, got {self.qsgd_levels}",
        )
        require(self.qsgd_chunk >= 1, f"--qsgd-chunk must be >= 1, got {self.qsgd_chunk}")


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncCost:
    """One step's gradient synchronisation under one hook, before any overlap with backward."""

    hook: str
    network_s: float
    codec_s: float
    """GPU time of encoding and decoding beyond the default hook's (never hidden)."""
    node_egress_bytes: float
    """Bytes that leave one node per step (the traffic the inter-node fabric must carry)."""
    fidelity: str
    """``exact``, ``16-bit`` or ``lossy`` (see :data:`FIDELITY`)."""


def _time(op: str, size: float, n: int, per_node: int, levels: LevelBandwidth) -> float:
    return float(collective_time_s(op, size, n, per_node, levels))


def sync_costs(
    entries: float,
    entry_bytes: float,
    num_gpus: int,
    gpus_per_node: int,
    levels: LevelBandwidth,
    hbm_bytes_per_s: float,
    options: HookOptions | None = None,
) -> dict[str, SyncCost]:
    """Cost of averaging ``entries`` gradient values of ``entry_bytes`` each over a
    data-parallel group of ``num_gpus`` GPUs placed ``gpus_per_node`` to a node."""
    opts = options or HookOptions()
    n = num_gpus
    local = min(gpus_per_node, n)
    nodes = max(1, n // local)
    size = entries * entry_bytes
    crosses = nodes > 1
    # A ring all-reduce moves 2(n-1)/n of the buffer out of every rank, and each node's share of
    # the ring crosses its boundary once (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce
    # algorithms", JPDC 69(2), Sec. 3); the two-level scheme sends the node's reduced buffer
    # once: 2(N-1)/N of it (Jia et al. 2018, arXiv:1807.11205, Sec. 3.3).
    ring_out = 2.0 * (n - 1) / n * size if crosses else 0.0
    two_level_out = 2.0 * (nodes - 1) / nodes * size

    def cost(hook: str, network_s: float, bytes_per_entry: float, egress: float) -> SyncCost:
        extra = max(bytes_per_entry - DEFAULT_BYTES_PER_ENTRY, 0.0) * entries
        return SyncCost(
            hook=hook,
            network_s=network_s,
            codec_s=extra / hbm_bytes_per_s,
            node_egress_bytes=egress,
            fidelity=FIDELITY[hook],
        )

    half = WIRE_16BIT_BYTES / entry_bytes
    node_rs_ag = _time("reduce_scatter", size, local, local, levels) + _time(
        "all_gather", size, local, local, levels
    )
    shard = size / local
    out = {
        "default": cost(
            "default",
            _time("all_reduce", size, n, local, levels),
            DEFAULT_BYTES_PER_ENTRY,
            ring_out,
        ),
        "bf16": cost(
            "bf16",
            _time("all_reduce", size * half, n, local, levels),
            CAST_BYTES_PER_ENTRY,
            ring_out * half,
        ),
        "hierarchical": cost(
            "hierarchical",
            node_rs_ag + _time("all_reduce", shard, nodes, 1, levels),
            HIERARCHICAL_BYTES_PER_ENTRY,
            two_level_out,
        ),
        "hierarchical+bf16": cost(
            "hierarchical+bf16",
            node_rs_ag + _time("all_reduce", shard * half, nodes, 1, levels),
            HIERARCHICAL_BYTES_PER_ENTRY + SHARD_CAST_BYTES_PER_ENTRY / local,
            two_level_out * half,
        ),
    }
    kept = min(entries, max(1.0, math.ceil(opts.topk_ratio * entries)))
    topk_payload = kept * TOPK_PAIR_BYTES
    out["topk"] = cost(
        "topk",
        _time("all_gather", n * topk_payload, n, local, levels),
        TOPK_BYTES_PER_ENTRY + n * kept / entries * TOPK_BYTES_PER_KEPT,
        (n - 1) * topk_payload if crosses else 0.0,
    )
    code_bytes = 1.0 if opts.qsgd_levels <= 127 else 2.0
    qsgd_payload = entries * code_bytes + math.ceil(entries / opts.qsgd_chunk) * QSGD_NORM_BYTES
    out["qsgd"] = cost(
        "qsgd",
        _time("all_gather", n * qsgd_payload, n, local, levels),
        QSGD_BYTES_PER_ENTRY + n * QSGD_BYTES_PER_ENTRY_PER_RANK,
        (n - 1) * qsgd_payload if crosses else 0.0,
    )
    return out
