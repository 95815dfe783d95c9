"""The KV hand-off of disaggregated serving: which GPUs send a prompt's cache and how much each
carries (planner/serving/deployment.kv_transfer_s, after TensorRT-LLM's cache formatter), and the
wait behind earlier prompts' transfers on the same senders (kv_transfer_wait_s)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.collectives import LevelBandwidth
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.iteration import Parallelism, kv_bytes_per_token
from gpuscale.planner.serving.deployment import (
    Pool,
    decode_admission_s,
    kv_transfer_s,
    kv_transfer_wait_s,
)

PROFILE = load_profile_for("tensorrt-llm")
TOKENS = 1024.0


def _pool(workers: int, tp: int, adp: int = 1, ep: int | None = None) -> Pool:
    par = Parallelism(tp=tp, pp=1, ep=tp if ep is None else ep, attention_dp=adp)
    return Pool(workers=workers, par=par)


def _nic(cluster: object) -> tuple[float, float]:
    levels = LevelBandwidth.of(cluster, PROFILE)  # type: ignore[arg-type]
    return levels.nic_gb_per_s * 1e9 * levels.nics_per_gpu, levels.inter_latency_us * 1e-6


def test_mla_attention_dp_rank_sends_one_latent_copy_per_decode_tp_rank() -> None:
    # DeepSeek's latent is replicated on every attention-TP rank: an attention-DP prefill rank
    # (the only holder of the request) sends 8 full copies to a TP8 decode worker through its
    # own NIC; a TP8 prefill worker's 8 ranks each send one copy to their peer at once.
    spec = catalog.model("deepseek-ai/DeepSeek-R1")
    cluster = catalog.cluster("h200-sxm", 16)
    bw, lat = _nic(cluster)
    whole = kv_bytes_per_token(spec, Parallelism(tp=1, pp=1), "fp8") * TOKENS
    adp = kv_transfer_s(spec, cluster, _pool(1, 8, 8), _pool(1, 8), "fp8", PROFILE, TOKENS)
    tp = kv_transfer_s(spec, cluster, _pool(1, 8), _pool(1, 8), "fp8", PROFILE, TOKENS)
    to_adp = kv_transfer_s(spec, cluster, _pool(1, 8), _pool(1, 8, 8), "fp8", PROFILE, TOKENS)
    assert adp == pytest.approx(lat + 8 * whole / bw)
    assert tp == pytest.approx(lat + whole / bw)
    # a TP8 prefill worker hands an attention-DP decode rank one copy, from one sender
    assert to_adp == pytest.approx(lat + whole / bw)
    # 61 layers x 576 B x 1024 tokens x 8 copies at ~46 GB/s: a few ms, not the 0.1 ms of the
    # whole worker's eight NICs
    assert 3e-3 < adp < 10e-3


def test_gqa_heads_split_over_the_senders_and_the_receivers() -> None:
    # Llama-3.1-70B keeps 8 KV heads; each rank holds its heads' share. Four prefill ranks to
    # four decode ranks: a quarter each, in parallel. Eight prefill ranks to two decode ranks:
    # the receivers take half each and bound the time.
    spec = catalog.model("meta-llama/Llama-3.1-70B")
    cluster = catalog.cluster("h100-sxm", 16)
    bw, lat = _nic(cluster)
    whole = kv_bytes_per_token(spec, Parallelism(tp=1, pp=1), "bf16") * TOKENS
    # two TP4 workers of each kind fill a node each: every hand-off crosses nodes (one TP4
    # prefill beside three TP4 decode workers would share a node with one of them:
    # test_serving_placement.py)
    p4, d4 = _pool(2, 4, ep=1), _pool(2, 4, ep=1)
    p8, d2 = _pool(1, 8, ep=1), _pool(4, 2, ep=1)
    four = kv_transfer_s(spec, cluster, p4, d4, "bf16", PROFILE, TOKENS)
    eight_two = kv_transfer_s(spec, cluster, p8, d2, "bf16", PROFILE, TOKENS)
    assert four == pytest.approx(lat + whole / 4 / bw)
    assert eight_two == pytest.approx(lat + whole / 2 / bw)


def test_one_node_moves_the_cache_over_nvlink() -> None:
    spec = catalog.model("deepseek-ai/DeepSeek-R1")
    cluster = catalog.cluster("h200-sxm", 8)
    levels = LevelBandwidth.of(cluster, PROFILE)
    whole = kv_bytes_per_token(spec, Parallelism(tp=1, pp=1), "fp8") * TOKENS
    t = kv_transfer_s(spec, cluster, _pool(1, 4, 4), _pool(1, 4), "fp8", PROFILE, TOKENS)
    nvlink = levels.intra_gb_per_s * 1e9
    assert t == pytest.approx(levels.intra_latency_us * 1e-6 + 4 * whole / nvlink)


def test_md1_wait_by_hand() -> None:
    # Pollaczek-Khinchine with deterministic service: rho S / (2 (1 - rho))
    w = kv_transfer_wait_s(0.01, np.array([0.0, 50.0, 90.0, 100.0, 200.0]))
    assert w[0] == 0.0
    assert w[1] == pytest.approx(0.5 * 0.01 / (2 * 0.5))
    assert w[2] == pytest.approx(0.9 * 0.01 / (2 * 0.1))
    assert np.isinf(w[3]) and np.isinf(w[4])


@given(
    service=st.floats(min_value=1e-6, max_value=1.0),
    rate=st.floats(min_value=0.0, max_value=1e4),
)
def test_wait_grows_with_load(service: float, rate: float) -> None:
    w = kv_transfer_wait_s(service, np.array([rate, rate * 1.1 + 1e-9]))
    assert w[0] >= 0.0
    assert w[1] >= w[0]


def _disagg(prefill_adp: int, concurrency: int = 36) -> dict[str, object]:
    # The H200 1k/1k recipe c4_ctx1_gen9_tep8_batch256 (srt-slurm), sa-bench lengths; the
    # recipe's kv_cache_config dtype fp8 (serving_launches.disagg_kv_dtype).
    return infer(
        "deepseek-ai/DeepSeek-R1",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="fp8_block",
        kv_dtype="fp8",
        input_len=1024,
        output_len=1024,
        concurrency=concurrency,
        input_cv=0.06,
        output_cv=0.06,
        num_requests=5 * concurrency,
        prefill_workers=1,
        prefill_tp=8,
        prefill_ep=8,
        prefill_attention_dp=prefill_adp,
        decode_workers=9,
        decode_tp=8,
        decode_ep=8,
        decode_batch=256,
    ).to_dict()["options"][0]


def _parts(opt: dict[str, object]) -> list[float]:
    note = next(n for n in opt["notes"] if n.startswith("TTFT parts"))  # type: ignore[attr-defined]
    return [float(v) for v in re.findall(r"([\d.]+) ms", note)]


def test_ttft_parts_add_up_to_the_mean_ttft() -> None:
    for adp in (1, 8):
        opt = _disagg(adp)
        pre, admit, _hand_off, burst, queue = _parts(opt)
        assert pre + admit + burst + queue == pytest.approx(opt["ttft_ms"], abs=3.0)


def test_attention_dp_prefill_hands_off_through_one_nic() -> None:
    # the hand-off part of an attention-DP prefill worker is 8 latent copies through one NIC
    # (~6 ms at 1k tokens), a TP8 prefill worker's one copy per rank in parallel (< 1 ms)
    adp, tp = _parts(_disagg(8))[2], _parts(_disagg(1))[2]
    assert 4.0 < adp < 10.0
    assert tp < 1.0


def test_saturated_decode_fills_its_slots() -> None:
    # A closed loop far above the decode slots (the H100 recipe ctx2_gen1_dep16_batch256 shape)
    # runs every slot: the engine admits by slots and pages, so the deployment's capacity is
    # the decode throughput with each rank's ``max_batch_size`` running, and the TTFT is
    # C / capacity less the decode time. Near the slots the throughput flattens and a grid
    # step of 15% in throughput is ~25% of the running requests; the capacity is resolved
    # inside the step (a coarse grid ran ~155-175 of 200-240 slots).
    for b in (200, 224, 240):
        opt = infer(
            "deepseek-ai/DeepSeek-R1",
            gpu="h100-sxm",
            engine="tensorrt-llm",
            weights="fp8_block",
            kv_dtype="fp8",  # the recipe's kv_cache_config dtype
            input_len=1024,
            output_len=1024,
            concurrency=5000,
            prefill_workers=2,
            prefill_tp=16,
            prefill_ep=16,
            prefill_attention_dp=16,
            decode_workers=1,
            decode_tp=16,
            decode_ep=16,
            decode_attention_dp=16,
            decode_batch=b,
        ).to_dict()["options"][0]
        assert opt["saturated"]
        assert 0.98 * b <= opt["running_requests_per_rank"] <= b


def test_decode_admission_counts_whole_iterations() -> None:
    # TensorRT-LLM: fetched at an iteration start (half an iteration's wait), the transfer
    # checked at each later start: a hand-off ending within the first iteration costs one, a
    # longer one ceil(S / T) for one request; over requests whose hand-off ends at a uniform
    # phase of an iteration, max(1, S / T + 1/2) on average; the context's token is returned
    # on admission
    t = np.array([0.02, 0.02, 0.02, 0.02])
    s = np.array([0.0, 0.006, 0.02, 0.045])
    trt = engine("tensorrt-llm")
    assert decode_admission_s(t, s, trt) == pytest.approx([0.03, 0.03, 0.04, 0.065])
    # the mean of ceil over one iteration's width of hand-off, by quadrature
    for hand_off in (0.0, 0.006, 0.013, 0.02, 0.031, 0.045):
        u = hand_off + 0.02 * (np.arange(20000) + 0.5) / 20000 - 0.01
        whole = np.maximum(1.0, np.ceil(u / 0.02)).mean()
        got = decode_admission_s(np.array([0.02]), np.array([hand_off]), trt)[0]
        assert got == pytest.approx(0.02 * (0.5 + whole), rel=1e-3)


def test_decode_admission_rises_with_the_iteration() -> None:
    # A longer mean iteration never shortens the admission (ceil of the means dropped a whole
    # iteration where T outgrew the hand-off: 31 -> 21 ms on a DeepSeek-R1 split)
    t = np.linspace(0.005, 0.05, 400)
    trt = engine("tensorrt-llm")
    for hand_off in (0.0, 0.0125, 0.03):
        wait = decode_admission_s(t, np.full_like(t, hand_off), trt)
        assert np.all(np.diff(wait) > 0.0)


def test_decode_admission_is_each_engines_own() -> None:
    t = np.array([0.02, 0.02, 0.02, 0.02])
    s = np.array([0.0, 0.006, 0.02, 0.045])
    # vLLM pulls like TensorRT-LLM, then recomputes the last prompt token: one more iteration
    vllm = engine("vllm")
    assert decode_admission_s(t, s, vllm) == pytest.approx([0.05, 0.05, 0.06, 0.085])
    # SGLang: the prefill pushes into preallocated slots as soon as it ends; the decode finds
    # it at its next per-iteration poll and streams the prefill's token: no whole iterations
    sglang = engine("sglang")
    assert decode_admission_s(t, s, sglang) == pytest.approx(s + 0.01)
    assert {e.disagg_kv_transfer for e in (engine("tensorrt-llm"), vllm, sglang)} == {
        "decode_pull",
        "prefill_push",
    }


def test_pipeline_stages_send_and_receive_only_their_own_layers() -> None:
    # Llama-3.1-70B, TP8 prefill to TP8 decode (over the NICs): a PP2 prefill worker's two stages send their
    # halves of the layers at once (half the bytes per sender); a PP2 decode worker's ranks each
    # receive half. PP2 -> PP1: the PP1 receiver takes every layer (from both stages) and bounds
    # the time, as before.
    spec = catalog.model("meta-llama/Llama-3.1-70B")
    cluster = catalog.cluster("h100-sxm", 32)
    bw, lat = _nic(cluster)
    whole = kv_bytes_per_token(spec, Parallelism(tp=1, pp=1), "bf16") * TOKENS

    def pool(tp: int, pp: int) -> Pool:
        return Pool(workers=1, par=Parallelism(tp=tp, pp=pp, ep=1))

    flat = kv_transfer_s(spec, cluster, pool(8, 1), pool(8, 1), "bf16", PROFILE, TOKENS)
    staged = kv_transfer_s(spec, cluster, pool(8, 2), pool(8, 2), "bf16", PROFILE, TOKENS)
    to_flat = kv_transfer_s(spec, cluster, pool(8, 2), pool(8, 1), "bf16", PROFILE, TOKENS)
    from_flat = kv_transfer_s(spec, cluster, pool(8, 1), pool(8, 2), "bf16", PROFILE, TOKENS)
    assert flat == pytest.approx(lat + whole / 8 / bw)
    assert staged == pytest.approx(lat + whole / 8 / 2 / bw)
    assert to_flat == pytest.approx(flat)
    # one PP1 sender feeds both decode stages: it still carries all its layers
    assert from_flat == pytest.approx(flat)
