"""Ring attention as PyTorch's context_parallel runs it (costmodel/ring_attention.py): the byte
counts per ring step, the repeated K/V heads, and the all-gathered K/V the first step hides."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel import ring_attention as ring
from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import Plan, Training

TORCHTITAN = load_profile("torchtitan")
RING_CONSTANTS = ("cp_ring_unfused_passes", "cp_kv_heads_repeated", "cp_kv_all_gather")


def without_ring(profile):
    """``profile`` with the three context_parallel constants off (the Megatron/TE ring)."""
    return dataclasses.replace(
        profile, constants={**profile.constants, **dict.fromkeys(RING_CONSTANTS, 0.0)}
    )


def run(model: str, plan: Plan, seq: int, profile=TORCHTITAN, gpu: str = "h100-sxm"):
    cluster = catalog.cluster(gpu, plan.num_gpus, gpus_per_node=8, inter="ib-ndr400")
    training = Training(seq_len=seq, precision="bf16")
    return estimate_plan(catalog.model(model), cluster, training, plan, profile)


def test_merge_bytes_are_the_counted_passes_per_step() -> None:
    one = ring.RingShapes(out_elements=np.array([1.0]), kv_elements=np.array([1.0]))
    fwd, bwd = ring.merge_bytes(one, np.array([4]))
    # Forward: 12 per output element + 8 per K element once, then 3 later steps of a K/V send
    # copy (8) and a merge of the whole output in fp32 (38).
    assert fwd[0] == pytest.approx(12 + 8 + 3 * (8 + 38))
    # Backward: casts and zero-fills (10 per E, 28 per K), 3 send copies (8), dQ += on 4 steps
    # (10 each), step 0's dK/dV accumulate + send copy (36), 3 later half-accumulates + cat +
    # send copy (42 each).
    assert bwd[0] == pytest.approx(10 + 28 + 3 * 8 + 4 * 10 + 36 + 3 * 42)


def test_no_ring_no_merge_bytes() -> None:
    shapes = ring.RingShapes(out_elements=np.array([5.0, 5.0]), kv_elements=np.array([2.0, 2.0]))
    fwd, bwd = ring.merge_bytes(shapes, np.array([1, 2]))
    assert fwd[0] == 0 and bwd[0] == 0
    assert fwd[1] > 0 and bwd[1] > 0


def test_repeated_kv_heads_are_query_width_and_gqa_keeps_one_head_per_tp_rank() -> None:
    m = catalog.model("llama3.1-8b")  # 32 query heads, 8 KV heads of 128
    tokens, tp = np.array([1000.0, 1000.0]), np.array([1, 16])
    expanded = ring.ring_shapes(m, tokens, tp, heads_repeated=True)
    assert list(expanded.kv_elements) == list(expanded.out_elements)
    assert expanded.out_elements[0] == 1000 * 32 * 128
    native = ring.ring_shapes(m, tokens, tp, heads_repeated=False)
    assert native.kv_elements[0] == 1000 * 8 * 128
    # TP 16 > 8 KV heads: each rank keeps one whole (replicated) head.
    assert native.kv_elements[1] == 1000 * 128


def test_more_cp_ranks_at_one_length_mean_smaller_ring_steps() -> None:
    by_cp = {
        cp: run("llama3.1-8b", Plan(tp=1, dp=8 // cp, cp=cp, global_batch=8 // cp), seq=65536)
        for cp in (2, 4, 8)
    }
    steps = [
        float(by_cp[cp].compute_s[0]) for cp in (2, 4, 8)
    ]  # less math per rank with more ranks
    assert steps[0] > steps[1] > steps[2]
    shapes = [
        ring.ring_shapes(catalog.model("llama3.1-8b"), np.array([65536 / cp]), np.array([1]), True)
        for cp in (2, 4, 8)
    ]
    assert shapes[0].out_elements[0] == 2 * shapes[1].out_elements[0]
    assert shapes[1].out_elements[0] == 2 * shapes[2].out_elements[0]


def test_context_parallel_costs_more_in_pytorch_ring_and_nothing_without_cp() -> None:
    plain = without_ring(TORCHTITAN)
    cp_plan = Plan(tp=1, dp=2, cp=4, global_batch=2)
    ring_run = run("llama3.1-8b", cp_plan, seq=131072)
    te_run = run("llama3.1-8b", cp_plan, seq=131072, profile=plain)
    assert float(ring_run.compute_s[0]) > float(te_run.compute_s[0])
    assert float(ring_run.step_time_s[0]) > float(te_run.step_time_s[0])
    no_cp = Plan(tp=1, dp=8, global_batch=8)
    assert float(run("llama3.1-8b", no_cp, 32768).step_time_s[0]) == pytest.approx(
        float(run("llama3.1-8b", no_cp, 32768, profile=plain).step_time_s[0]), rel=1e-12
    )


# The ring with its collectives launch-ordered ahead of the attention kernels (each one can
# hide behind the kernel it was issued beside).
OVERLAPPING = dataclasses.replace(
    TORCHTITAN,
    constants={**TORCHTITAN.constants, "cp_comm_waits_for_attention_kernel": 0.0},
)


def _cross_node_ring(profile):
    """Llama 405B, TP 8 fills a node, so the CP ranks sit on different nodes and share one NIC
    each: the estimate, the hand-priced gather and dK/dV hop, and one ring step's kernels."""
    m = catalog.model("llama3.1-405b")
    plan = Plan(tp=8, cp=8, dp=1, global_batch=1)
    seq = 262144
    est = run("llama3.1-405b", plan, seq=seq, profile=profile)
    cluster = catalog.cluster("h100-sxm", 64, gpus_per_node=8, inter="ib-ndr400")
    levels = LevelBandwidth.of(cluster, profile)
    tokens = seq / 8
    kv = 2.0 * tokens * (m.q_width / 8) * 2.0  # K and V, repeated heads, bf16
    gather = float(collective_time_s("all_gather", 8 * kv, 8, 1, levels))
    grad_hop = float(collective_time_s("send_recv", 2 * kv, 8, 1, levels))  # fp32
    return est, gather, grad_hop


def test_torchtitans_ring_collectives_hide_behind_nothing() -> None:
    # Each collective waits for the attention kernel it was issued beside to release the SMs:
    # per layer the forward gather, the backward gather and the cp dK/dV hops all add.
    est, gather, grad_hop = _cross_node_ring(TORCHTITAN)
    per_layer = gather + gather + 8 * grad_hop
    layers = float(est.layers_per_stage[0])
    assert float(est.comm_cp_s[0]) == pytest.approx(layers * per_layer, rel=1e-9)
    overlapped, _, _ = _cross_node_ring(OVERLAPPING)
    assert float(overlapped.comm_cp_s[0]) < float(est.comm_cp_s[0])


def test_cross_node_all_gather_is_hidden_by_the_first_step_only() -> None:
    # With the collectives ordered ahead of the kernels, the all-gathered K/V still outlasts
    # the first ring step.
    m = catalog.model("llama3.1-405b")
    plan = Plan(tp=8, cp=8, dp=1, global_batch=1)
    seq = 262144
    est = run("llama3.1-405b", plan, seq=seq, profile=OVERLAPPING)
    cluster = catalog.cluster("h100-sxm", 64, gpus_per_node=8, inter="ib-ndr400")
    levels = LevelBandwidth.of(cluster, TORCHTITAN)
    tokens = seq / 8
    kv = 2.0 * tokens * (m.q_width / 8) * 2.0  # K and V, repeated heads, bf16
    gather = float(collective_time_s("all_gather", 8 * kv, 8, 1, levels))
    grad_hop = float(collective_time_s("send_recv", 2 * kv, 8, 1, levels))  # fp32
    # One layer: hand-priced from the kernels' per-step windows.
    from gpuscale.costmodel.compute import layer_compute
    from gpuscale.specs import PlanBatch

    lc = layer_compute(
        m, cluster.device, Training(seq_len=seq), PlanBatch.from_plans([plan]), OVERLAPPING
    )
    f, b = float(lc.attention_forward_s[0]) / 8, float(lc.attention_backward_s[0]) / 8
    i = OVERLAPPING.const("comm_compute_interference")

    def exposed(c: float, w: float) -> float:
        return max(c - w, 0.0) + i * min(c, w)

    assert gather > f  # the premise: the first step cannot hide the gather
    per_layer = exposed(gather, f) + exposed(gather, b) + 7 * exposed(grad_hop, b) + grad_hop
    layers = float(est.layers_per_stage[0])
    assert float(est.comm_cp_s[0]) == pytest.approx(layers * per_layer, rel=1e-9)


def test_full_recompute_gathers_kv_again() -> None:
    plan = Plan(tp=8, cp=4, dp=2, global_batch=2)
    none = run("llama3.1-70b", plan, seq=131072)
    full = run("llama3.1-70b", dataclasses.replace(plan, recompute="full"), seq=131072)
    assert float(full.comm_cp_s[0]) > float(none.comm_cp_s[0])


def test_only_the_rings_first_step_is_a_causal_kernel() -> None:
    from gpuscale.costmodel.compute import layer_compute
    from gpuscale.specs import PlanBatch

    m = catalog.model("llama3.1-8b")
    device = catalog.gpu("h100-sxm")
    full_rate = dataclasses.replace(
        TORCHTITAN,
        constants={**TORCHTITAN.constants, "attention_causal_relative_efficiency": 1.0},
    )
    ratio = TORCHTITAN.const("attention_causal_relative_efficiency")
    plans = PlanBatch.from_plans(
        [Plan(tp=1, dp=8, global_batch=8), Plan(tp=1, dp=2, cp=4, global_batch=2)]
    )
    training = Training(seq_len=65536)
    slow = layer_compute(m, device, training, plans, TORCHTITAN).attention_forward_s
    fast = layer_compute(m, device, training, plans, full_rate).attention_forward_s
    assert slow[0] / fast[0] == pytest.approx(1.0 / ratio)  # no CP: every kernel is causal
    assert slow[1] / fast[1] == pytest.approx(0.25 / ratio + 0.75)  # 1 of 4 ring steps


def test_float8_tensor_parallel_all_gathers_move_one_byte() -> None:
    # torchao's float8 TP styles cast before the sequence-parallel all-gather (forward input,
    # backward output gradient); the reduce-scatters stay 16-bit.
    m = catalog.model("llama3.1-70b")
    plan = Plan(tp=8, dp=1, global_batch=1, sequence_parallel=True)
    cluster = catalog.cluster("h100-sxm", 8, gpus_per_node=8, inter="ib-ndr400")
    fp8 = Training(seq_len=8192, precision="fp8")
    bf16_gathers = dataclasses.replace(
        TORCHTITAN, constants={**TORCHTITAN.constants, "tp_fp8_all_gather": 0.0}
    )
    est = estimate_plan(m, cluster, fp8, plan, TORCHTITAN)
    old = estimate_plan(m, cluster, fp8, plan, bf16_gathers)
    levels = LevelBandwidth.of(cluster, TORCHTITAN)
    msg = 8192 * m.hidden_size * 2.0
    pair = float(collective_time_s("reduce_scatter", msg, 8, 8, levels)) + float(
        collective_time_s("all_gather", msg / 2.0, 8, 8, levels)
    )
    all_reduce = float(collective_time_s("all_reduce", msg, 8, 8, levels))
    assert pair < all_reduce
    assert float(est.comm_tp_s[0]) / float(old.comm_tp_s[0]) == pytest.approx(pair / all_reduce)
    # bf16 training keeps 16-bit gathers whatever the profile says.
    bf16 = Training(seq_len=8192, precision="bf16")
    assert float(estimate_plan(m, cluster, bf16, plan, TORCHTITAN).comm_tp_s[0]) == pytest.approx(
        float(estimate_plan(m, cluster, bf16, plan, bf16_gathers).comm_tp_s[0])
    )


def test_ring_backward_buffers_are_the_counted_bytes() -> None:
    one = ring.RingShapes(out_elements=np.array([1.0, 1.0]), kv_elements=np.array([1.0, 1.0]))
    cp = np.array([1, 8])
    # All-gathered: 8 ranks' K and V at 2 bytes (32), the send copy of K/V (4), the step's dQ
    # (2 per E) and half-K dK/dV (2 per K), the fp32 dQ accumulator (4 per E) and the fp32
    # dK/dV received, updated and sent (24 per K); no ring at cp = 1.
    gathered = ring.ring_workspace_bytes(one, cp, 2.0, all_gather=True)
    assert gathered.tolist() == [0.0, 32 + 4 + 2 + 2 + 4 + 24]
    # Point to point the step holds one received K/V pair instead of the whole gather.
    p2p = ring.ring_workspace_bytes(one, cp, 2.0, all_gather=False)
    assert p2p.tolist() == [0.0, 4 + 4 + 2 + 2 + 4 + 24]


def test_ring_buffers_raise_the_peak_where_a_layer_sets_it() -> None:
    from gpuscale.costmodel.memory import plan_memory

    # 405B 4D (torchtitan Table 6 shape): the first pipeline stage peaks inside a layer's
    # backward, so the ring's buffers add to it, times the allocator's reserve.
    m = catalog.model("llama3.1-405b")
    training = Training(seq_len=262144, precision="fp8", master_weights=True)
    plan = Plan(tp=8, pp=8, dp=1, cp=8, micro_batch=1, global_batch=8, zero=3, recompute="full")
    on = plan_memory(m, training, plan, TORCHTITAN)
    off = plan_memory(m, training, plan, without_ring(TORCHTITAN))
    tokens = np.array([262144 / 8])
    shapes = ring.ring_shapes(m, tokens, np.array([8]), heads_repeated=True)
    buffers = ring.ring_workspace_bytes(shapes, np.array([8]), 2.0, all_gather=True)[0]
    assert on["allocated"] - off["allocated"] == pytest.approx(buffers, rel=1e-9)
    fragmentation = TORCHTITAN.const("memory_allocator_fragmentation")
    assert on["reserved"] - off["reserved"] == pytest.approx(buffers * fragmentation, rel=1e-9)
    # Without context parallelism nothing changes.
    flat = dataclasses.replace(plan, cp=1, dp=8)
    assert plan_memory(m, training, flat, TORCHTITAN) == plan_memory(
        m, training, flat, without_ring(TORCHTITAN)
    )


def test_eight_b_long_context_peaks_at_the_loss_whatever_the_ring() -> None:
    from gpuscale.costmodel.memory import plan_memory

    # torchtitan Table 2 (8B, 8 GPUs, 32k tokens per rank, CP 1-8) measured 83.9-84.5 GiB
    # reserved: flat. The fp32 logits' working set at the loss outweighs the ring's buffers
    # (9 GiB at CP 8), so the predicted peak is flat too: memory pressure does not grow with CP.
    m = catalog.model("llama3.1-8b")
    peaks = []
    for cp in (1, 2, 4, 8):
        training = Training(seq_len=32768 * cp, precision="fp8", master_weights=True)
        plan = Plan(
            dp=8 // cp, cp=cp, micro_batch=1, global_batch=8 // cp, zero=3, recompute="full"
        )
        peaks.append(plan_memory(m, training, plan, TORCHTITAN)["reserved"])
    assert max(peaks) - min(peaks) < 1e-6 * peaks[0]
