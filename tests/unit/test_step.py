"""Behaviour of the step-time model: accounting identities and the article's directional claims."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.costmodel.step import estimate_batch, estimate_plan
from gpuscale.costmodel.terms import BREAKDOWN, COMM_PARTS, PARTS
from gpuscale.errors import InputError
from gpuscale.specs import JobOptions, Plan, PlanBatch, Training

GENERIC = load_profile("generic")


def run(
    model: str,
    gpu: str,
    plan: Plan,
    *,
    seq: int = 4096,
    inter: str = "ib-ndr400",
    gpus_per_node: int = 8,
    precision: str = "bf16",
    profile=GENERIC,
    job=None,
):
    cluster = catalog.cluster(gpu, plan.num_gpus, gpus_per_node=gpus_per_node, inter=inter)
    training = Training(seq_len=seq, precision=precision)  # type: ignore[arg-type]
    return estimate_plan(catalog.model(model), cluster, training, plan, profile, job)


def test_breakdown_terms_sum_to_the_step() -> None:
    est = run(
        "llama3.1-70b",
        "h100-sxm",
        Plan(tp=8, pp=4, dp=4, vp=5, micro_batch=1, global_batch=256, zero=1),
    )
    step = float(est.step_time_s[0])
    b = est.breakdown(0)
    assert list(b) == list(BREAKDOWN)
    assert sum(b.values()) == pytest.approx(step, rel=1e-9)
    parts = est.parts(0)
    assert list(parts) == list(PARTS)
    assert sum(parts.values()) == pytest.approx(step, rel=1e-9)
    assert b["exposed_comm"] == pytest.approx(sum(parts[k] for k in COMM_PARTS))
    row = est.row(0)
    assert row["breakdown"] == b and sum(row["exposed_comm_parts"].values()) == pytest.approx(
        b["exposed_comm"]
    )
    assert 0 <= row["recompute_s"] <= b["compute"]


def test_throughput_is_tokens_per_step_over_step_time() -> None:
    plan = Plan(dp=8, micro_batch=2, global_batch=64)
    est = run("llama3.1-8b", "a100-sxm-80gb", plan, seq=2048)
    assert float(est.tokens_per_s[0]) * float(est.step_time_s[0]) == pytest.approx(64 * 2048)


def test_one_gpu_has_no_communication() -> None:
    est = run("gpt3-350m", "a100-sxm-80gb", Plan(micro_batch=8, global_batch=8), seq=2048)
    assert float(est.exposed_comm_s[0]) == 0.0
    assert float(est.bubble_s[0]) == 0.0


def test_vectorized_batch_matches_one_plan_at_a_time() -> None:
    plans = [
        Plan(tp=t, pp=p, dp=64 // (t * p), micro_batch=1, global_batch=512, zero=z, recompute=r)
        for t in (1, 2, 8)
        for p in (1, 2)
        for z in (0, 1, 3)
        for r in ("none", "full")
    ]
    model, cluster = catalog.model("llama2-13b"), catalog.cluster("h100-sxm", 64)
    training = Training(seq_len=4096)
    batch = estimate_batch(model, cluster, training, PlanBatch.from_plans(plans), GENERIC)
    for i, plan in enumerate(plans):
        one = estimate_plan(model, cluster, training, plan, GENERIC)
        assert float(batch.step_time_s[i]) == pytest.approx(float(one.step_time_s[0]), rel=1e-12)
        assert float(batch.memory_per_gpu_bytes[i]) == pytest.approx(
            float(one.memory_per_gpu_bytes[0])
        )


def test_tp8_inside_one_nvlink_node_beats_tp8_split_over_two_nodes() -> None:
    # The article: 70B with TP=8 on one NVLink node vs 4+4 over InfiniBand.
    plan = Plan(tp=8, micro_batch=1, global_batch=16, recompute="full")
    inside = run("llama3.1-70b", "h100-sxm", plan, gpus_per_node=8)
    split = run("llama3.1-70b", "h100-sxm", plan, gpus_per_node=4)
    assert float(inside.mfu[0]) > 1.15 * float(split.mfu[0])
    assert float(split.comm_tp_s[0]) > 1.8 * float(inside.comm_tp_s[0])


def test_per_gpu_efficiency_of_data_parallelism_falls_with_gpu_count() -> None:
    mfu = []
    for n in (8, 32, 128, 512):
        plan = Plan(dp=n, micro_batch=4, global_batch=4 * n)  # weak scaling, one micro-batch
        mfu.append(
            float(run("bert-large", "a100-sxm-80gb", plan, seq=512, inter="roce-100").mfu[0])
        )
    assert all(a >= b for a, b in itertools.pairwise(mfu))
    assert mfu[-1] < 0.9 * mfu[0]


def test_recompute_costs_time_full_more_than_selective() -> None:
    times = [
        float(
            run(
                "llama2-7b",
                "a100-sxm-80gb",
                Plan(dp=8, micro_batch=2, global_batch=16, recompute=r),
            ).step_time_s[0]
        )
        for r in ("none", "selective", "full")
    ]
    assert times[0] <= times[1] < times[2]
    assert times[2] / times[0] == pytest.approx(4 / 3, rel=0.12)  # one extra forward of three


def test_fp8_speeds_up_hopper_and_is_refused_where_it_does_not_exist() -> None:
    plan = Plan(tp=8, dp=1, micro_batch=1, global_batch=8)
    h_bf16 = float(run("gpt3-175b", "h100-sxm", plan, precision="bf16").step_time_s[0])
    h_fp8 = float(run("gpt3-175b", "h100-sxm", plan, precision="fp8").step_time_s[0])
    assert h_fp8 < 0.85 * h_bf16
    with pytest.raises(
        InputError,
        match="a100-sxm-80gb has no fp8 tensor-core rate; accepted: fp32, tf32, bf16, fp16",
    ):
        run("gpt3-175b", "a100-sxm-80gb", plan, precision="fp8")


def test_the_slowest_gpu_sets_the_pace_of_a_mixed_cluster() -> None:
    plan = Plan(dp=16, micro_batch=2, global_batch=32)
    model, training = catalog.model("llama2-7b"), Training(seq_len=4096)
    h100 = catalog.cluster("h100-sxm", 16)
    mixed = dataclasses.replace(h100, slowest_device=catalog.gpu("a100-sxm-80gb"))
    a100 = catalog.cluster("a100-sxm-80gb", 16, inter="ib-ndr400")
    t_h = float(estimate_plan(model, h100, training, plan, GENERIC).step_time_s[0])
    t_mixed = float(estimate_plan(model, mixed, training, plan, GENERIC).step_time_s[0])
    t_a = float(estimate_plan(model, a100, training, plan, GENERIC).step_time_s[0])
    assert t_mixed > 2 * t_h
    assert t_mixed == pytest.approx(t_a, rel=0.05)


def test_slow_storage_and_checkpoints_show_up_as_their_own_terms() -> None:
    plan = Plan(dp=64, micro_batch=8, global_batch=512)
    fast = run("gpt3-125m", "h100-sxm", plan, seq=2048)
    slow = run(
        "gpt3-125m",
        "h100-sxm",
        plan,
        seq=2048,
        job=JobOptions(
            storage_gb_per_s_per_node=0.001,
            checkpoint_every_steps=10,
            checkpoint_write_gb_per_s=0.1,
        ),
    )
    assert float(fast.data_s[0]) == 0.0 and float(fast.checkpoint_s[0]) == 0.0
    assert float(slow.data_s[0]) > 0 and float(slow.checkpoint_s[0]) > 0
    assert float(slow.step_time_s[0]) > float(fast.step_time_s[0])


def test_a_measured_profile_moves_the_prediction_the_way_the_measurement_says(
    tmp_path: Path,
) -> None:
    slow_net = tmp_path / "slow.yaml"
    slow_net.write_text(
        "schema_version: 1\nname: measured\nlinks:\n  inter: {bandwidth_gb_per_s: 5, latency_us: 30}\n"
    )
    plan = Plan(tp=8, dp=8, micro_batch=1, global_batch=64, zero=1)
    rated = run("llama2-70b", "h100-sxm", plan)
    measured = run(
        "llama2-70b", "h100-sxm", plan, profile=load_profile_for("generic", str(slow_net))
    )
    assert float(measured.comm_dp_s[0]) > float(rated.comm_dp_s[0])
    assert float(measured.step_time_s[0]) > float(rated.step_time_s[0])


def test_small_micro_batches_lower_gemm_efficiency() -> None:
    per_token = []
    for mbs in (1, 4, 16):
        est = run("gpt3-125m", "h100-sxm", Plan(micro_batch=mbs, global_batch=16), seq=512)
        per_token.append(float(est.step_time_s[0]) / (16 * 512))
    assert np.allclose(per_token, sorted(per_token, reverse=True))
    assert per_token[0] > 1.2 * per_token[-1]


def test_adapters_skip_weight_gradients_and_qlora_pays_for_dequantization() -> None:
    model, cluster = catalog.model("llama2-7b"), catalog.cluster("a100-sxm-80gb", 4)
    plan = Plan(dp=4, micro_batch=4, global_batch=16, recompute="full")
    step = {}
    for finetune in ("full", "lora", "qlora"):
        training = Training(seq_len=2048, finetune=finetune)  # type: ignore[arg-type]
        est = estimate_plan(model, cluster, training, plan, GENERIC)
        step[finetune] = float(est.step_time_s[0])
        if finetune != "full":
            assert float(est.gradient_bytes_per_gpu[0]) < 0.01 * 4 * 6.7e9
    # No weight gradients for the base, but the adapters' memory-bound traffic (scaling, add,
    # skinny GEMMs; costmodel/lora_compute.py) gives part of that back on an A100.
    assert 0.7 * step["full"] < step["lora"] < 0.95 * step["full"]
    assert step["lora"] < step["qlora"]


def test_optimizer_offload_moves_the_step_to_the_host() -> None:
    model, cluster = catalog.model("llama2-7b"), catalog.cluster("a100-sxm-80gb", 1)
    plan = Plan(micro_batch=8, global_batch=8, recompute="full")
    on_gpu = estimate_plan(model, cluster, Training(seq_len=2048), plan, GENERIC)
    offloaded = estimate_plan(
        model, cluster, Training(seq_len=2048, offload_optimizer=True), plan, GENERIC
    )
    assert float(offloaded.optimizer_s[0]) > 10 * float(on_gpu.optimizer_s[0])
    assert float(offloaded.memory_per_gpu_bytes[0]) < 0.5 * float(on_gpu.memory_per_gpu_bytes[0])


def test_pipeline_sends_inside_a_node_cost_time_but_less_than_across_nodes() -> None:
    plan = Plan(pp=2, dp=2, micro_batch=1, global_batch=16)  # stages 2 ranks apart: one node
    inside = run("llama2-7b", "h100-sxm", plan, gpus_per_node=8)
    across = run("llama2-7b", "h100-sxm", plan, gpus_per_node=2)
    assert 0 < float(inside.comm_pp_s[0]) < float(across.comm_pp_s[0])


def test_fsdp_pays_ring_latency_per_layer_so_pure_fsdp_stops_scaling() -> None:
    fsdp = load_profile("fsdp")
    per_gpu = []
    for n in (64, 8192):
        plan = Plan(dp=n, zero=3, micro_batch=1, global_batch=n, recompute="full")
        per_gpu.append(
            float(run("llama3.1-70b", "h100-sxm", plan, profile=fsdp).tokens_per_s[0]) / n
        )
    assert per_gpu[1] < 0.8 * per_gpu[0]


def test_lora_with_zero1_gathers_only_the_adapters() -> None:
    model, cluster = catalog.model("llama3.1-70b"), catalog.cluster("h100-sxm", 64)
    training = Training(seq_len=4096, finetune="lora")
    comm = [
        float(
            estimate_plan(
                model,
                cluster,
                training,
                Plan(tp=8, dp=8, zero=z, micro_batch=1, global_batch=8),
                load_profile("megatron-lm-2021"),
            ).comm_dp_s[0]
        )
        for z in (0, 1)
    ]
    assert comm[1] < 5 * comm[0] + 0.01


def test_offloaded_optimizers_share_the_node_host_memory() -> None:
    model, training = catalog.model("llama3.1-8b"), Training(seq_len=2048, offload_optimizer=True)
    times = []
    for n in (1, 8):
        cluster = catalog.cluster("a100-sxm-80gb", n)
        plan = Plan(dp=n, zero=2 if n > 1 else 0, micro_batch=1, global_batch=n)
        times.append(float(estimate_plan(model, cluster, training, plan, GENERIC).optimizer_s[0]))
    # one node's CPUs update all 8 GPUs' shards: far more than an eighth of one GPU's time
    assert times[1] > 4 * times[0] / 8


def test_expert_state_is_sharded_over_expert_data_parallel_ranks_only() -> None:
    model, cluster = catalog.model("mixtral-8x7b"), catalog.cluster("h100-sxm", 8)
    training = Training(seq_len=4096)
    opt = [
        float(
            estimate_plan(
                model,
                cluster,
                training,
                Plan(dp=8, ep=ep, zero=1, micro_batch=1, global_batch=8),
                GENERIC,
            ).optimizer_s[0]
        )
        for ep in (1, 8)
    ]
    # 8 GPUs hold each expert's optimizer state once in both layouts: ep=8 keeps whole experts,
    # ep=1 shards every expert 8 ways (it must not be divided by ep twice)
    assert opt[1] == pytest.approx(opt[0], rel=0.05)


def test_zero2_reduces_gradients_every_micro_batch_zero1_once_per_step() -> None:
    dp_profile = load_profile("megatron-lm-2021")  # no overlap: the counts show directly
    times = {}
    for zero in (1, 2):
        plan = Plan(dp=32, zero=zero, micro_batch=1, global_batch=256)  # 8 micro-batches
        est = run("llama3.1-8b", "a100-sxm-80gb", plan, inter="roce-100", profile=dp_profile)
        times[zero] = float(est.exposed_comm_s[0])
    assert times[2] > 3 * times[1]


def test_hidden_fsdp_traffic_still_costs_and_grows_with_the_group() -> None:
    # A small model whose FSDP gathers hide behind compute: without interference nothing is
    # exposed and per-GPU throughput does not fall with the GPU count (the optimizer's shard
    # even shrinks); with it, throughput falls as the ring (and its latency) grows, as
    # llm-foundry measures for its 125M-1B models from 16 to 128 GPUs.
    free = dataclasses.replace(
        GENERIC,
        constants={
            **GENERIC.constants,
            "comm_compute_interference": 0.0,
            "persistent_gemm_overlap_loss": 0.0,
        },
    )

    def per_gpu(dp: int, profile) -> tuple[float, float]:
        plan = Plan(dp=dp, zero=3, micro_batch=8, global_batch=8 * dp)
        est = run("gpt3-350m", "a100-sxm-80gb", plan, seq=2048, profile=profile)
        return float(est.tokens_per_s[0]) / dp, est.breakdown(0)["exposed_comm"]

    counts = (16, 32, 64, 128)
    hidden = [per_gpu(n, free) for n in counts]
    costed = [per_gpu(n, GENERIC) for n in counts]
    assert all(exposed == 0.0 for _, exposed in hidden)
    assert all(a <= b for (a, _), (b, _) in itertools.pairwise(hidden))
    assert all(a > b for (a, _), (b, _) in itertools.pairwise(costed))
    assert all(exposed > 0.0 for _, exposed in costed)


def test_torchtitan_fsdp_under_pp_gathers_once_per_step() -> None:
    # FSDP2 + PP in torchtitan keeps parameters unsharded across micro-batches: the gather and
    # reduce-scatter are paid once per step, so more micro-batches do not multiply them.
    model = catalog.model("llama3.1-70b")
    cluster = catalog.cluster("h100-sxm", 64, inter="roce-400")
    training = Training(seq_len=4096)
    plan = Plan(tp=8, pp=4, dp=2, micro_batch=1, global_batch=32, zero=3, recompute="full")
    titan = estimate_plan(model, cluster, training, plan, load_profile("torchtitan"))
    fsdp = estimate_plan(model, cluster, training, plan, load_profile("fsdp"))
    assert float(titan.comm_zero_s[0]) == 0.0 and float(titan.comm_dp_s[0]) > 0.0
    assert float(fsdp.comm_zero_s[0]) > float(titan.comm_dp_s[0])


def test_torchtitan_pp_reduce_scatter_runs_after_the_last_backward() -> None:
    # torch.distributed.pipelining calls FSDP's post_backward by hand once the last backward
    # has returned: with every window wide open and no interference, the gather still hides
    # but the gradient reduce-scatter is paid in full, by hand: one ring per layer of the
    # stage's fp32 gradient shard plus the host time and the copy passes around it.
    from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
    from gpuscale.costmodel.communication import params_per_gpu

    base = load_profile("torchtitan")
    wide = dataclasses.replace(
        base,
        overlap={**base.overlap, "zero": 1.0},
        constants={
            **base.constants,
            "comm_compute_interference": 0.0,
            "persistent_gemm_overlap_loss": 0.0,
            "zero3_copies_on_compute_stream": 0.0,
        },
    )
    off = dataclasses.replace(
        wide, constants={**wide.constants, "fsdp_pp_reduce_after_backward": 0.0}
    )
    model = catalog.model("llama3.1-70b")
    cluster = catalog.cluster("h100-sxm", 64, inter="roce-400")
    training = Training(seq_len=8192)
    plan = Plan(tp=8, pp=4, dp=2, micro_batch=4, global_batch=64, zero=3, recompute="full")
    after = float(estimate_plan(model, cluster, training, plan, wide).comm_dp_s[0])
    hidden = float(estimate_plan(model, cluster, training, plan, off).comm_dp_s[0])
    assert hidden == 0.0

    layers = 80 / 4
    grad = float(params_per_gpu(model, PlanBatch.from_plans([plan]))[0]) * 4.0  # fp32 reduce
    ring = float(
        collective_time_s("reduce_scatter", grad / layers, 2, 1, LevelBandwidth.of(cluster, wide))
    )
    c = wide.constants
    host = c["zero3_host_us_per_rank"] * 1e-6 * 2
    hbm = cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * wide.hbm_efficiency
    expected = layers * (ring + host) + grad * c["zero3_reduce_copy_passes"] / hbm
    assert after == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("dp", [2, 4, 8])
@pytest.mark.parametrize("pp", [1, 2, 4])
def test_reduce_after_backward_never_hides_more(dp: int, pp: int) -> None:
    base = load_profile("torchtitan")
    off = dataclasses.replace(
        base, constants={**base.constants, "fsdp_pp_reduce_after_backward": 0.0}
    )
    model = catalog.model("llama3.1-70b")
    cluster = catalog.cluster("h100-sxm", 8 * pp * dp, inter="roce-400")
    plan = Plan(tp=8, pp=pp, dp=dp, micro_batch=1, global_batch=8 * dp, zero=3, recompute="full")
    on_s = float(estimate_plan(model, cluster, Training(seq_len=4096), plan, base).step_time_s[0])
    off_s = float(estimate_plan(model, cluster, Training(seq_len=4096), plan, off).step_time_s[0])
    assert on_s >= off_s * (1.0 - 1e-12)
    if pp == 1:
        assert on_s == off_s  # no pipeline: FSDP's own hooks reduce during the backward


def test_fsdp2_copies_block_the_compute_stream() -> None:
    # FSDP2's all-gather copy-out and reduce-scatter copy-in run on (or block) the compute
    # stream: with every window wide open and no interference, a 1D FSDP plan still pays them,
    # by hand: 2 passes of the 16-bit weights per gather (forward and backward: 2 gathers) and
    # 1.5 passes of the fp32 gradient, at the achieved HBM rate.
    from gpuscale.costmodel.communication import params_per_gpu

    base = load_profile("torchtitan")
    constants = {
        **base.constants,
        "comm_compute_interference": 0.0,
        "persistent_gemm_overlap_loss": 0.0,
    }
    wide = dataclasses.replace(base, overlap={**base.overlap, "zero": 1.0}, constants=constants)
    hidden = dataclasses.replace(
        wide, constants={**constants, "zero3_copies_on_compute_stream": 0.0}
    )
    model = catalog.model("llama3.1-8b")
    cluster = catalog.cluster("h100-sxm", 8)
    training = Training(seq_len=8192)
    plan = Plan(dp=8, micro_batch=2, global_batch=16, zero=3, recompute="selective")
    paid = float(estimate_plan(model, cluster, training, plan, wide).comm_zero_s[0])
    free = float(estimate_plan(model, cluster, training, plan, hidden).comm_zero_s[0])
    assert free == 0.0
    params = float(params_per_gpu(model, PlanBatch.from_plans([plan]))[0])
    hbm = cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * wide.hbm_efficiency
    assert paid == pytest.approx((2 * 2.0 * params * 2.0 + 1.5 * params * 4.0) / hbm, rel=1e-9)


def _zero2_unhidden(n: int, per_unit: float) -> float:
    profile = dataclasses.replace(
        GENERIC, constants={**GENERIC.constants, "zero2_unit_collectives": per_unit}
    )
    plan = Plan(dp=n, zero=2, micro_batch=1, global_batch=n)
    return float(run("llama3.1-8b", "h100-sxm", plan, profile=profile).dp_sync_unhidden_s[0])


def test_fsdp_shard_grad_op_pays_the_ring_latency_once_per_unit() -> None:
    # FSDP SHARD_GRAD_OP: one all-gather and one reduce-scatter per transformer block (32 for
    # Llama 3.1 8B) instead of one bucketed pair per step: 31 extra of each, each a ring of
    # (n - 1) hops at the network's 6 us (ib-ndr400 in links.yaml) when the group spans nodes.
    extra = _zero2_unhidden(512, 1.0) - _zero2_unhidden(512, 0.0)
    assert extra == pytest.approx(31 * 2 * 511 * 6e-6, rel=1e-6)


def test_per_unit_latency_grows_with_the_group_and_bucketed_engines_skip_it() -> None:
    extras = [_zero2_unhidden(n, 1.0) - _zero2_unhidden(n, 0.0) for n in (16, 128, 512)]
    assert all(a < b for a, b in itertools.pairwise(extras))
    deepspeed = load_profile("deepspeed")
    assert deepspeed.const("zero2_unit_collectives") == 0.0
    assert GENERIC.const("zero2_unit_collectives") == 1.0


def test_fp16_megatron_2021_all_reduces_gradients_in_fp16() -> None:
    # The SC21/MLSys'23 runs (--fp16, no --accumulate-allreduce-grads-in-fp32) reduce the
    # parameters' dtype; Megatron-Core under --bf16 forces fp32 main grads.
    plan = Plan(tp=8, dp=4, micro_batch=1, global_batch=8)
    old = run(
        "llama3.1-8b",
        "a100-sxm-80gb",
        plan,
        precision="fp16",
        profile=load_profile("megatron-lm-2021"),
    )
    new = run(
        "llama3.1-8b", "a100-sxm-80gb", plan, precision="fp16", profile=load_profile("megatron")
    )
    assert float(old.gradient_bytes_per_gpu[0]) == pytest.approx(
        0.5 * float(new.gradient_bytes_per_gpu[0])
    )
    # before any overlap (the 2021 profile overlaps nothing), half the bytes on the wire
    assert float(old.dp_sync_unhidden_s[0]) < 0.6 * float(new.dp_sync_unhidden_s[0])


def test_megatron_cross_entropy_passes_by_hand() -> None:
    # Megatron's unfused vocab-parallel cross-entropy moves 38 bytes per logit forward and 14
    # backward (megatron.yaml); the generic fused loss 12 and 12. The head's time differs by
    # exactly those bytes at the profile's HBM rate.
    from gpuscale.costmodel.compute import layer_compute

    model, device = catalog.model("llama3.1-8b"), catalog.gpu("h100-sxm")
    training = Training(seq_len=4096)
    plans = PlanBatch.from_plans([Plan(tp=2, dp=4, micro_batch=1, global_batch=8)])
    megatron = load_profile("megatron")
    fused = dataclasses.replace(
        megatron,
        constants={
            **megatron.constants,
            "loss_forward_bytes_per_logit": 12.0,
            "loss_backward_bytes_per_logit": 12.0,
        },
    )
    a = layer_compute(model, device, training, plans, megatron)
    b = layer_compute(model, device, training, plans, fused)
    logits = 4096 * model.vocab_size / 2
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * megatron.hbm_efficiency
    assert float(a.head_forward_s[0] - b.head_forward_s[0]) == pytest.approx(26 * logits / hbm)
    assert float(a.head_backward_s[0] - b.head_backward_s[0]) == pytest.approx(2 * logits / hbm)


def test_attention_dropout_passes_outside_a_fused_attention() -> None:
    # Unfused attention with dropout on: the dropout kernel reads the s x s probabilities and
    # writes them and a 1-byte mask forward, and the reverse backward (2.5 two-byte passes
    # each way); a fused (flash) attention applies it inside the kernel at no extra pass.
    from gpuscale.costmodel.compute import UNFUSED_DROPOUT_PASSES, layer_compute

    model, device = catalog.model("llama3.1-8b"), catalog.gpu("a100-sxm-80gb")
    plans = PlanBatch.from_plans([Plan(tp=2, dp=4, micro_batch=2, global_batch=8)])
    profile = load_profile("megatron-lm-2021")

    def times(flash: bool, dropout: bool) -> tuple[float, float]:
        training = Training(seq_len=2048, flash_attention=flash, dropout=dropout)
        lc = layer_compute(model, device, training, plans, profile)
        return float(lc.layer_forward_s[0]), float(lc.layer_backward_s[0])

    score_bytes = 2.0 * 2 * (model.num_heads / 2) * 2048 * 2048
    hbm = device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    on, off = times(False, True), times(False, False)
    assert UNFUSED_DROPOUT_PASSES == 2.5
    assert on[0] - off[0] == pytest.approx(2.5 * score_bytes / hbm)
    assert on[1] - off[1] == pytest.approx(2.5 * score_bytes / hbm)
    assert times(True, True) == times(True, False)
