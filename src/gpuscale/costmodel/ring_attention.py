"""Context parallelism as PyTorch's ``context_parallel`` runs it (torchtitan's CP): ring attention
with round-robin ("zig-zag") load balancing, priced per ring step from the sizes of its tensors.

The algorithm (torch/distributed/tensor/experimental/_attention.py, ``_templated_ring_attention``
and ``_templated_ring_attention_backward``, torch 2.5-2.7; Liu et al. 2023, Ring Attention,
arXiv:2310.01889; Brandon et al. 2023, Striped Attention, arXiv:2311.09431, for the causal load
balance): each rank holds 2 of the 2*cp sequence chunks, runs one causal attention kernel on its
own chunks and then ``cp - 1`` non-causal kernels, each on the same number of query-key pairs,
and folds every partial result into the output by its log-sum-exp. The kernels are the
attention kernels of the rest of the model (``compute.py``); what the ring adds is priced here:

- **Merge and accumulation passes** (``cp_ring_unfused_passes``): the forward merges each step's
  output in fp32 as separate element-wise kernels (``_SDPAMerger``: cast, ``out - block_out``,
  the sigmoid-weighted product, the subtraction; ``_partial_update``'s ``torch.cat`` copy), and
  the backward accumulates dQ, dK and dV in fp32 (``convert_to_f32``), copying dK/dV into one
  send buffer every step (``torch.cat``). The byte counts per element are below; they are read
  from the code, not fitted.
- **KV with repeated heads** (``cp_kv_heads_repeated``): torchtitan's Llama repeats K and V to
  the query heads before SDPA (torchtitan/models/llama/model.py, ``repeat_kv``), so the ring
  moves and accumulates query-width K and V (4x the 8B's K/V, 16x the 405B's).
- **All-gathered KV** (``cp_kv_all_gather``): the default rotater (``_AllGatherRotater``,
  ``_cp_options.rotate_method = ALL_GATHER``; torchtitan's default since PR #728, Dec 2024; the
  "pass-KV" variant of the PyTorch context-parallel tutorial, after Yang et al. 2024,
  arXiv:2411.01783, which all-gathers K/V during the local SDPA) all-gathers every rank's K
  and V once per attention call and waits for it after the first (local) step, so only that
  step hides it;
  the backward all-gathers K and V again and passes the fp32 dK/dV to the next rank every step
  (``_AllToAllRotater``), each send hidden behind the next step's kernel and the last one
  behind nothing.

The slowest rank sets the pace: rank ``cp - 1`` runs every non-causal step with the whole
query (``i <= rank`` branch), the most merge traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuscale.specs import ModelSpec

# Bytes moved per element, counted from _templated_ring_attention (forward) on the slowest rank.
# E = elements of the local attention output (tokens x query width), K = elements of one of the
# local K or V tensors. Per call: key/value.contiguous() (2 tensors x (read 2 + write 2) = 8 per
# K element); the step-0 output cast to fp32 (read 2 + write 4) and the final cast back (read 4 +
# write 2): 12 per E.
FORWARD_FIXED_E = 12.0
FORWARD_FIXED_K = 8.0
# Per step that sends (i < cp - 1): torch.cat of K and V into the send buffer, 8 per K element.
SEND_CAT_K = 8.0
# Per merged step (i >= 1): block output cast to fp32 (6), ``out - block_out`` (read 4 + 4, write
# 4), the sigmoid-weighted product (read 4, write 4), the subtraction (read 4 + 4, write 4): 38
# per E. (The log-sum-exp terms are per head and token, not per element: negligible.)
FORWARD_STEP_E = 38.0
# Backward per call: fp32 zeros for dQ (4 per E) and dK, dV (8 per K); key/value.contiguous()
# (8 per K); dQ and dK/dV cast back to 16 bits (6 per E, 12 per K).
BACKWARD_FIXED_E = 10.0
BACKWARD_FIXED_K = 28.0
# Backward per step: dQ += step gradient (read 4 + 2, write 4: 10 per E); dK, dV accumulated
# (step 0: += on the whole, 2 x 10 = 20 per K; later steps on the slowest rank: += on the first
# half, 10, then _partial_update's torch.cat copy of both, 16: 26) and copied into the fp32 send
# buffer (torch.cat, 16 per K).
BACKWARD_STEP_E = 10.0
BACKWARD_FIRST_STEP_K = 20.0 + 16.0
BACKWARD_LATER_STEP_K = 26.0 + 16.0
# The dK/dV accumulators travel in fp32 (``convert_to_f32``).
GRAD_KV_BYTES = 4.0


@dataclass(frozen=True, slots=True)
class RingShapes:
    """Per-layer tensor sizes of one context-parallel rank, arrays over plans."""

    out_elements: np.ndarray
    """Local attention output: tokens x query width / tp."""
    kv_elements: np.ndarray
    """One of the local K or V tensors as the ring sees it (repeated heads included)."""


def ring_shapes(
    m: ModelSpec, tokens: np.ndarray, tp: np.ndarray, heads_repeated: bool
) -> RingShapes:
    """Sizes of the local output and K (or V) of one layer on one rank holding ``tokens``."""
    tokens = np.asarray(tokens, dtype=float)
    tp = np.asarray(tp, dtype=float)
    q_local = m.q_width / tp
    # A TP rank keeps at least one whole KV head (replicated when tp > KV heads).
    kv_local = q_local if heads_repeated else np.maximum(m.kv_width / tp, m.head_dim)
    return RingShapes(out_elements=tokens * q_local, kv_elements=tokens * kv_local)


def merge_bytes(shapes: RingShapes, cp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """HBM bytes of the ring's own element-wise passes per layer on the slowest rank: (forward,
    backward). Zero without context parallelism (no ring runs)."""
    cp = np.asarray(cp, dtype=float)
    later = np.maximum(cp - 1.0, 0.0)
    e, k = shapes.out_elements, shapes.kv_elements
    forward = (
        FORWARD_FIXED_E * e + FORWARD_FIXED_K * k + later * (SEND_CAT_K * k + FORWARD_STEP_E * e)
    )
    backward = (
        BACKWARD_FIXED_E * e
        + BACKWARD_FIXED_K * k
        + later * SEND_CAT_K * k
        + cp * BACKWARD_STEP_E * e
        + BACKWARD_FIRST_STEP_K * k
        + later * BACKWARD_LATER_STEP_K * k
    )
    ring = cp > 1
    return np.where(ring, forward, 0.0), np.where(ring, backward, 0.0)


# Live buffers of the ring's backward on the slowest rank, counted from
# _templated_ring_attention_backward (torch 2.5-2.6) at its largest moment: a later step of the
# ``i <= rank`` branch, after ``_partial_update`` and the ``torch.cat`` of the send buffer. In
# bytes per element (K = one of K or V as the ring sees it, E = the local output):
# - the K/V the step reads: the all-gathered K and V of every rank (``_AllGatherRotater``, cp x 2
#   per K element at the training word) or, point to point, the received pair (2 per K);
# - ``next_kv = torch.cat([key, value])`` built every step for the send (2 per K);
# - the step's gradients from the SDPA backward at the training word: dQ over E, dK and dV over
#   the half of K the step read (1 per K in all);
# - the fp32 accumulators (``convert_to_f32``): dQ (4 per E); dK/dV three times over, the
#   received buffer, the ``_partial_update`` results and the fp32 send buffer (3 x 2 x 4 = 24 per
#   K).
RING_BWD_SEND_KV = 2.0
RING_BWD_STEP_GRAD_E = 1.0
RING_BWD_STEP_GRAD_K = 1.0
RING_BWD_DQ_ACC_E = 4.0
RING_BWD_DKV_FP32_K = 24.0


def ring_workspace_bytes(
    shapes: RingShapes, cp: np.ndarray, word: float, all_gather: bool
) -> np.ndarray:
    """Bytes the ring's backward keeps live beyond the layer's own activations, per layer on the
    slowest rank (counted above); zero without context parallelism."""
    cp = np.asarray(cp, dtype=float)
    e, k = shapes.out_elements, shapes.kv_elements
    held = (cp if all_gather else np.ones_like(cp)) * 2.0 * word * k
    live = (
        held
        + RING_BWD_SEND_KV * word * k
        + word * (RING_BWD_STEP_GRAD_E * e + RING_BWD_STEP_GRAD_K * k)
        + RING_BWD_DQ_ACC_E * e
        + RING_BWD_DKV_FP32_K * k
    )
    return np.where(cp > 1, live, 0.0)
