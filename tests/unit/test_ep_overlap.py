"""Megatron-Core's EP all-to-all overlap (``--ep-overlap``: ``--overlap-moe-expert-parallel-comm
--delay-wgrad-compute``): each 1F1B pair runs one micro-batch's forward beside another's
backward, so a pair's all-to-alls hide behind the other pass's compute; the passes the
schedule runs alone expose theirs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import api, catalog
from gpuscale.costmodel.communication import ep_unpaired_share
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.export import TrainingJob, export, job_from_document
from gpuscale.specs import Plan, PlanBatch, Training

# Qwen3-30B-A3B on one GB300 node as Megatron-Bridge's 26.06 recipe runs it (EP 8, mbs 8).
RUN = dict(gpu="gb300", gpus=8, ep=8, mbs=8, seq=4096, precision="mxfp8", framework="megatron")


def _ep(gbs: int, overlap: bool, **extra: object) -> float:
    est = api.estimate("qwen3-30b-a3b", gbs=gbs, ep_overlap=overlap, **{**RUN, **extra})
    return est.parts_s["comm_ep"]


def _warmups(pp: int, vp: int) -> list[int]:
    """Warm-up forwards of each stage under the interleaved schedule with the overlap
    (Megatron-Core ``get_pp_rank_microbatches``: ``2 (pp - r - 1) + (vp - 1) pp + 1``)."""
    return [2 * (pp - r - 1) + (vp - 1) * pp + 1 for r in range(pp)]


def test_passes_run_alone_are_the_first_forward_and_last_backward() -> None:
    plans = PlanBatch.from_plans(
        [
            Plan(dp=8, ep=8, micro_batch=8, global_batch=512),  # 8 micro-batches, no pipeline
            Plan(pp=4, vp=2, dp=2, ep=2, micro_batch=1, global_batch=32),  # 16, interleaved
            Plan(pp=4, vp=2, dp=2, ep=2, micro_batch=1, global_batch=4),  # 2: all warm-up
        ]
    )
    share = ep_unpaired_share(plans)
    assert share[0] == pytest.approx(1 / 8)
    assert share[1] == pytest.approx(np.mean(_warmups(4, 2)) / (16 * 2))
    assert share[2] == 1.0


def test_one_micro_batch_hides_nothing() -> None:
    # gbs = dp x mbs: the step is one forward and one backward, no pair to overlap
    assert _ep(64, True) == pytest.approx(_ep(64, False), rel=1e-12)


def test_paired_all_to_alls_cost_only_their_interference() -> None:
    # On NVLink within the node each layer's all-to-alls are shorter than its compute, so a
    # pair hides all of them: what stays is the unpaired share plus the overlapped compute's
    # slowdown (comm_compute_interference).
    interference = load_profile("megatron").const("comm_compute_interference")
    for gbs, m in ((512, 8), (1024, 16)):
        ratio = _ep(gbs, True) / _ep(gbs, False)
        assert ratio == pytest.approx(1 / m + interference * (1 - 1 / m), rel=1e-9)
    assert _ep(1024, True) / _ep(1024, False) < _ep(512, True) / _ep(512, False)


def test_an_all_to_all_longer_than_the_compute_stays_partly_exposed() -> None:
    # Over a slow inter-node fabric the per-layer all-to-alls outlast the pair's compute
    run = dict(RUN, gpu="h100-sxm", gpus=16, ep=16, inter="ib-hdr200", mbs=1, precision="bf16")
    est = {ov: api.estimate("qwen3-30b-a3b", gbs=256, ep_overlap=ov, **run) for ov in (False, True)}
    hidden = est[True].parts_s["comm_ep"]
    plain = est[False].parts_s["comm_ep"]
    window = est[False].parts_s["compute"]  # all compute of the step can hide at most this much
    assert plain - window <= hidden < plain


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ("llama3.1-8b", {"ep": 1}, "needs a mixture-of-experts model with --ep 2 or more"),
        ("qwen3-30b-a3b", {"ep": 1}, "needs a mixture-of-experts model with --ep 2 or more"),
        ("qwen3-30b-a3b", {"gpus": 16, "pp": 2}, "needs the interleaved schedule"),
        ("qwen3-30b-a3b", {"recompute": "full"}, "without full recompute"),
        (
            "qwen3-30b-a3b",
            {"recompute": "selective", "recompute_modules": "moe"},
            "without recomputing the MoE layer",
        ),
        ("qwen3-30b-a3b", {"precision": "fp32"}, "runs on a 16-bit model"),
    ],
)
def test_megatron_core_refusals_are_one_line(model: str, extra: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        api.estimate(model, gbs=512, ep_overlap=True, **{**RUN, **extra})


def test_estimate_echoes_it_and_calibrate_run_prices_it_the_same() -> None:
    est = api.estimate("qwen3-30b-a3b", gbs=512, ep_overlap=True, **RUN)
    doc = est.to_dict()
    assert doc["ep_overlap"] is True
    cal = api.calibrate_run(
        "qwen3-30b-a3b",
        gbs=512,
        ep_overlap=True,
        measured_tokens_per_s=est.tokens_per_s,
        **RUN,
    )
    assert cal.predicted_tokens_per_s_before == pytest.approx(est.tokens_per_s, rel=1e-12)
    assert cal.training["ep_overlap"] is True


def _job(**training: object) -> TrainingJob:
    plan = Plan(dp=8, ep=8, micro_batch=8, global_batch=512)
    return TrainingJob(
        model_id="qwen3-30b-a3b",
        model=catalog.model("qwen3-30b-a3b"),
        gpu="gb300",
        gpus=8,
        gpus_per_node=8,
        plan=plan,
        training=Training(seq_len=4096, **training),
    )


def _launch_args(job: TrainingJob) -> list[str]:
    script = export(job, "megatron").files[0].content
    return script.split("PLAN_ARGS=(", 1)[1].split(")", 1)[0].split()


def test_megatron_export_is_read_back_by_megatron_core() -> None:
    import torch
    from megatron.core.transformer import TransformerConfig

    args = _launch_args(_job(ep_overlap=True))
    assert "--overlap-moe-expert-parallel-comm" in args and "--delay-wgrad-compute" in args
    dispatcher = args[args.index("--moe-token-dispatcher-type") + 1]
    model = catalog.model("qwen3-30b-a3b")
    kw = dict(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        num_attention_heads=model.num_heads,
        num_moe_experts=model.num_experts,
        moe_router_topk=model.experts_per_token,
        expert_model_parallel_size=int(args[args.index("--expert-model-parallel-size") + 1]),
        moe_token_dispatcher_type=dispatcher,
        bf16=True,
        params_dtype=torch.bfloat16,
    )
    config = TransformerConfig(
        overlap_moe_expert_parallel_comm=True,
        delay_wgrad_compute=True,
        **kw,
    )
    assert config.overlap_moe_expert_parallel_comm and config.delay_wgrad_compute
    # megatron-core's own refusal of the default dispatcher: why the export names one
    with pytest.raises(AssertionError, match="alltoall/flex token dispatcher"):
        TransformerConfig(
            overlap_moe_expert_parallel_comm=True,
            **{**kw, "moe_token_dispatcher_type": "allgather"},
        )
    assert "--overlap-moe-expert-parallel-comm" not in _launch_args(_job())


def test_other_trainers_refuse_it_and_an_edited_document_is_checked() -> None:
    with pytest.raises(InputError, match="has no setting for --ep-overlap"):
        export(_job(ep_overlap=True), "torchtitan")
    run = dict(RUN, precision="bf16")  # the trainers' exports take 16-bit or FP8 recipes
    doc = api.estimate("qwen3-30b-a3b", gbs=512, ep_overlap=True, **run).to_dict()
    job = job_from_document(doc)
    assert job.training.ep_overlap
    edited = dict(doc, plan=dict(doc["plan"], recompute="full"))
    with pytest.raises(InputError, match="without full recompute"):
        job_from_document(edited)


def test_training_takes_a_switch_only() -> None:
    with pytest.raises(InputError, match="--ep-overlap is a switch"):
        Training(seq_len=4096, ep_overlap=1)
    assert dataclasses.replace(Training(seq_len=4096), ep_overlap=True).ep_overlap


def test_hoppers_persistent_matmuls_pay_more_for_the_hidden_part() -> None:
    # The overlapped all-to-alls run on a side stream beside whole layers, as the data-parallel
    # collectives do: on Hopper the persistent matmuls lose persistent_gemm_overlap_loss of
    # their progress meanwhile (data_parallel_interference), elsewhere the base share.
    profile = load_profile("megatron")
    base = profile.const("comm_compute_interference")
    loss = profile.const("persistent_gemm_overlap_loss")
    m = 8
    hopper = _ep(512, True, gpu="h100-sxm", precision="fp8") / _ep(
        512, False, gpu="h100-sxm", precision="fp8"
    )
    blackwell = _ep(512, True) / _ep(512, False)
    assert blackwell == pytest.approx(1 / m + base * (1 - 1 / m), rel=1e-9)
    assert 1 / m + base * (1 - 1 / m) < hopper < 1 / m + loss * (1 - 1 / m)


def test_the_schedule_holds_one_layer_more_or_one_chunk_more() -> None:
    # Without pipelining a pair adds one layer of the next micro-batch while it frees one of
    # the previous: one layer more than 1F1B. Interleaved, one more warm-up chunk per stage.
    from gpuscale.costmodel.activations import ep_overlap_extra_layers

    plans = PlanBatch.from_plans(
        [
            Plan(dp=8, ep=8, micro_batch=8, global_batch=512),
            Plan(pp=4, vp=2, dp=2, ep=2, micro_batch=1, global_batch=32),
            Plan(dp=8, ep=8, micro_batch=8, global_batch=64),  # one micro-batch: no pair
        ]
    )
    on_stage = np.array([48.0, 12.0, 48.0])
    on = Training(seq_len=4096, ep_overlap=True)
    assert list(ep_overlap_extra_layers(on, plans, on_stage)) == [1.0, 6.0, 0.0]
    assert ep_overlap_extra_layers(Training(seq_len=4096), plans, on_stage) == 0.0
    kept = api.estimate("qwen3-30b-a3b", gbs=512, **RUN)
    one_layer = (
        api.estimate("qwen3-30b-a3b", gbs=512, ep_overlap=True, **RUN).memory_per_gpu_gib
        - kept.memory_per_gpu_gib
    )
    layers = catalog.model("qwen3-30b-a3b").num_layers
    assert 0 < one_layer < kept.memory_per_gpu_gib / layers
