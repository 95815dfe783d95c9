"""The continuous-batching serving model: conservation, Little's law, monotonicity, memory."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import InputError, infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import gemm_precision, is_weight_only, weight_format
from gpuscale.costmodel.serving.iteration import Parallelism, kv_bytes_per_token
from gpuscale.planner.serving.deployment import _iteration_model, kv_pool
from gpuscale.planner.serving.steady_state import Workload, closed_loop, load_curve

WORK = Workload(input_len=1024.0, output_len=512.0)


def _curve(model: str = "llama3.1-8b", eng_name: str = "vllm", gpu: str = "h100-sxm"):
    m = catalog.model(model)
    cl = catalog.cluster(gpu, 1)
    eng = engine(eng_name)
    prof = load_profile(eng.cost_profile)
    par = Parallelism()
    fmt = weight_format("bf16")
    kv, _, _ = kv_pool(m, cl, par, fmt, "bf16", prof, eng, WORK)
    it = _iteration_model(m, cl, par, fmt, "bf16", prof, eng)
    return load_curve(it, eng, WORK, kv), kv


def test_littles_law_holds_in_closed_loop() -> None:
    # C requests in flight = throughput x time in system (queue + service), at every load.
    curve, kv = _curve()
    for c in (1, 8, 64, 256, 2048):
        p = closed_loop(curve, float(c), kv, WORK)
        assert p.x * p.e2e_s == pytest.approx(c, rel=0.02)


def test_decoding_requests_are_conserved_along_the_curve() -> None:
    # Little's law on the decode phase: n decoding = rate x (OSL-1) iterations x iteration time.
    curve, _ = _curve()
    ok = curve.feasible
    n_dec = curve.running - curve.x * curve.iteration_s * curve.prefill_iterations
    assert np.allclose(n_dec[ok], curve.x[ok] * (WORK.output_len - 1) * curve.iteration_s[ok])


def test_more_concurrency_raises_latency_and_throughput_until_saturation() -> None:
    levels = [1, 4, 16, 64, 256, 1024, 4096]
    out = [
        infer(
            "llama3.1-8b",
            gpu="h100-sxm",
            engine="vllm",
            input_len=1024,
            output_len=512,
            concurrency=c,
        ).to_dict()["options"][0]
        for c in levels
    ]
    ttft = [o["ttft_ms"] for o in out]
    tpot = [o["tpot_ms"] for o in out]
    thr = [o["output_tokens_per_s"] for o in out]
    sim = slice(0, 6)  # 1 ... 1024: the cohort simulation
    assert all(b >= a * 0.999 for a, b in pairwise(ttft[sim]))
    assert all(b >= a * 0.999 for a, b in pairwise(tpot[sim]))
    assert all(b >= a * 0.98 for a, b in pairwise(thr[sim]))  # flat once saturated
    # Saturated: throughput stops growing, the extra requests only wait (queue in TTFT).
    assert out[5]["saturated"] and out[5]["queue_wait_ms"] > 0
    # 4096 clients exceed the simulation's cohorts: the steady state takes over and agrees on
    # the plateau within 10% (the seam between the two models).
    assert out[6]["saturated"] and thr[6] == pytest.approx(thr[5], rel=0.1)
    assert ttft[6] > 3 * ttft[5]


def test_open_loop_below_capacity_serves_the_offered_rate() -> None:
    o = infer("llama3.1-8b", gpu="h100-sxm", engine="sglang", request_rate=2.0).to_dict()
    opt = o["options"][0]
    assert opt["requests_per_s"] == pytest.approx(2.0, rel=1e-6)
    assert not opt["saturated"]


def test_open_loop_past_capacity_saturates_with_growing_wait() -> None:
    low = infer("llama3.1-8b", gpu="h100-sxm", engine="vllm", request_rate=1e4, num_requests=500)
    high = infer("llama3.1-8b", gpu="h100-sxm", engine="vllm", request_rate=1e4, num_requests=2000)
    a, b = low.to_dict()["options"][0], high.to_dict()["options"][0]
    assert a["saturated"] and b["ttft_ms"] > 3 * a["ttft_ms"]


def test_reserving_engine_holds_fewer_requests_than_on_demand() -> None:
    m = catalog.model("llama3.1-70b")
    from gpuscale.planner.serving.steady_state import kv_capacity_requests

    reserve = kv_capacity_requests(1e5, WORK, engine("tensorrt-llm"))
    demand = kv_capacity_requests(1e5, WORK, engine("vllm"))
    assert reserve < demand
    assert m.num_layers == 80


def test_mla_caches_the_latent_not_the_heads() -> None:
    ds = catalog.model("deepseek-ai/DeepSeek-R1")
    per_tok = kv_bytes_per_token(ds, Parallelism(tp=8), "bf16")
    # (512 + 64) values x 2 bytes x 61 layers, the same on every TP rank.
    assert per_tok == pytest.approx(576 * 2 * 61)
    llama = catalog.model("llama3.1-70b")
    assert kv_bytes_per_token(llama, Parallelism(tp=8), "bf16") == pytest.approx(2 * 128 * 2 * 80)


def test_fp8_on_ampere_is_weight_only_and_nvfp4_on_hopper_too() -> None:
    a100, h100 = catalog.gpu("a100-sxm-80gb"), catalog.gpu("h100-sxm")
    assert gemm_precision(weight_format("fp8"), h100) == "fp8"
    assert is_weight_only(weight_format("fp8"), a100)
    assert is_weight_only(weight_format("nvfp4"), h100)
    o = infer("llama3.1-8b", gpu="a100-sxm-80gb", weights="fp8", concurrency=8).to_dict()
    assert o["options"][0]["weight_only"] is True


def test_expert_parallel_attention_dp_deployment_predicts() -> None:
    o = infer(
        "deepseek-r1",
        gpu="h200-sxm",
        engine="sglang",
        weights="fp8_block",
        tp=8,
        ep=8,
        attention_dp=8,
        concurrency=256,
        input_len=1024,
        output_len=1024,
    )
    opt = o.to_dict()["options"][0]
    assert opt["fits"] and opt["output_tokens_per_s"] > 0 and opt["gpus"] == 8


def test_disaggregated_uses_both_pools() -> None:
    o = infer(
        "llama3.1-70b",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        weights="fp8",
        concurrency=32,
        prefill_workers=1,
        prefill_tp=4,
        decode_workers=1,
        decode_tp=4,
    )
    opt = o.to_dict()["options"][0]
    assert opt["mode"] == "disaggregated" and opt["gpus"] == 8
    assert any("KV transfer" in n for n in opt["notes"])


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"concurrency": 4, "request_rate": 1.0}, "concurrency"),
        ({"concurrency": 4, "weights": "fp9"}, "weights"),
        ({"concurrency": 4, "engine": "tgi"}, "engine"),
        ({"concurrency": 4, "ep": 2}, "ep"),
        ({"concurrency": 4, "tp": 4, "attention_dp": 3}, "attention_dp"),
    ],
)
def test_bad_input_names_the_argument(kwargs, field) -> None:
    with pytest.raises(InputError) as exc:
        infer("llama3.1-8b", gpu="h100-sxm", **kwargs)
    assert exc.value.field == field


@pytest.mark.parametrize("eng_name", ["tensorrt-llm", "vllm", "sglang"])
@pytest.mark.parametrize("conc", [1, 8, 48])
def test_cohort_simulation_conserves_requests_and_obeys_littles_law(eng_name, conc) -> None:
    from gpuscale.planner.serving.cohort_sim import simulate

    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h100-sxm", 1)
    eng = engine(eng_name)
    prof = load_profile(eng.cost_profile)
    it = _iteration_model(m, cl, Parallelism(), weight_format("bf16"), "bf16", prof, eng)
    sim = simulate(
        it, eng, WORK, conc, max_running=1e9, warmup_cycles=1, measured_cycles=3, rounds=3
    )
    assert sim is not None
    # Every client completes one request per measured cycle: nothing is lost or duplicated.
    assert sim.weight.sum() == pytest.approx(3 * conc)
    # Little's law: in flight = throughput x time in system (request overhead aside).
    e2e = float(np.average(sim.e2e_s, weights=sim.weight)) - eng.request_overhead_ms * 1e-3
    assert sim.requests_per_s * e2e == pytest.approx(conc, rel=0.1)
    assert np.all(sim.ttft_s > 0) and np.all(sim.tpot_s > 0)


def test_a_last_partial_round_goes_to_the_first_clients_to_finish() -> None:
    # 12 requests from 8 clients: a round of 8, then 4 (not two rounds of 8 counted as 12).
    kw = {"gpu": "h100-sxm", "engine": "vllm", "input_len": 1024, "output_len": 256}
    eight = infer("llama3.1-8b", concurrency=8, num_requests=8, **kw).to_dict()["options"][0]
    four = infer("llama3.1-8b", concurrency=4, num_requests=4, **kw).to_dict()["options"][0]
    twelve = infer("llama3.1-8b", concurrency=8, num_requests=12, **kw).to_dict()["options"][0]
    # The run lasts about a round at 8 and one at 4 (the second starts as the first ends).
    expect = 12 / (8 / eight["requests_per_s"] + 4 / four["requests_per_s"])
    assert twelve["requests_per_s"] == pytest.approx(expect, rel=0.1)
    sixteen = infer("llama3.1-8b", concurrency=8, num_requests=16, **kw).to_dict()["options"][0]
    assert twelve["requests_per_s"] < 0.9 * sixteen["requests_per_s"]


def test_prefill_first_engine_stalls_decodes_behind_a_burst() -> None:
    # SGLang runs the burst's prefill batches before decoding: TTFT grows with the burst, and
    # a mixed engine (vLLM) keeps decoding through it.
    kw = {"gpu": "h100-sxm", "input_len": 2048, "output_len": 256, "concurrency": 64}
    sg = infer("llama3.1-8b", engine="sglang", **kw).to_dict()["options"][0]
    vl = infer("llama3.1-8b", engine="vllm", **kw).to_dict()["options"][0]
    assert sg["ttft_ms"] > vl["ttft_ms"]


def test_spread_lengths_widen_the_tails_not_the_means() -> None:
    kw = {"gpu": "h100-sxm", "engine": "vllm", "request_rate": 4.0}
    fixed = infer("llama3.1-8b", **kw).to_dict()["options"][0]
    spread = infer("llama3.1-8b", input_cv=0.8, output_cv=0.8, **kw).to_dict()["options"][0]
    assert spread["ttft_ms"] == pytest.approx(fixed["ttft_ms"])
    assert spread["ttft_ms_p99"] > fixed["ttft_ms_p99"]
    assert spread["e2e_s_p99"] > fixed["e2e_s_p99"]
    assert spread["e2e_s_p50"] < fixed["e2e_s_p50"]  # lognormal: median below the mean


def _llama_sim(eng_name: str, conc: int, **kw):
    from gpuscale.planner.serving.cohort_sim import simulate

    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h100-sxm", 1)
    eng = engine(eng_name)
    prof = load_profile(eng.cost_profile)
    it = _iteration_model(m, cl, Parallelism(), weight_format("bf16"), "bf16", prof, eng)
    sim = simulate(it, eng, WORK, conc, max_running=1e9, **kw)
    assert sim is not None
    return sim


@pytest.mark.parametrize("eng_name", ["tensorrt-llm", "sglang"])
def test_benchmark_rounds_are_weighted_from_a_few_simulated_ones(eng_name) -> None:
    # A benchmark of 20 rounds of C requests: 4 simulated rounds (burst, two full-load rounds,
    # the tail) with the last full-load round standing for the 16 not simulated give the same
    # means as simulating all 20, and every measured request is counted once.
    short = _llama_sim(eng_name, 24, measured_cycles=4, rounds=20)
    full = _llama_sim(eng_name, 24, measured_cycles=20, rounds=20)
    assert short.weight.sum() == pytest.approx(20 * 24)
    assert full.weight.sum() == pytest.approx(20 * 24)
    for a, b in ((short.ttft_s, full.ttft_s), (short.tpot_s, full.tpot_s)):
        mean_a = np.average(a, weights=short.weight)
        mean_b = np.average(b, weights=full.weight)
        assert mean_a == pytest.approx(mean_b, rel=0.05)


def test_the_measured_burst_raises_mean_ttft() -> None:
    # The measured phase starts with a burst of C prompts (aiperf drains its warm-up first):
    # counting that round cannot make the mean TTFT smaller than the rounds after it alone,
    # since the burst's last prompts queue behind C - 1 others.
    with_burst = _llama_sim("tensorrt-llm", 48, warmup_cycles=0, measured_cycles=4, rounds=4)
    without = _llama_sim("tensorrt-llm", 48, warmup_cycles=1, measured_cycles=3, rounds=3)
    mean_with = np.average(with_burst.ttft_s, weights=with_burst.weight)
    mean_without = np.average(without.ttft_s, weights=without.weight)
    assert mean_with >= mean_without


def test_expected_max_normal_matches_known_order_statistics() -> None:
    from gpuscale.costmodel.serving.iteration import expected_max_normal

    assert expected_max_normal(1) == 0.0
    # Exact E[max of 2 standard normals] = 1/sqrt(pi) = 0.564; of 8: 1.423 (Harter 1961).
    assert expected_max_normal(2) == pytest.approx(1 / np.sqrt(np.pi), abs=0.03)
    assert expected_max_normal(8) == pytest.approx(1.423, abs=0.02)
    assert expected_max_normal(64) > expected_max_normal(8)


def test_expert_load_on_the_busiest_rank() -> None:
    from gpuscale.costmodel.serving.iteration import expert_load

    t = np.array([4.0, 64.0, 4096.0])
    # One rank holds every expert: the expected counts, no straggler.
    touched, pairs = expert_load(t, 256, 8, 1)
    p = 1.0 - (1.0 - 8 / 256) ** t
    assert touched == pytest.approx(np.maximum(256 * p, 1.0))
    assert pairs == pytest.approx(t * 8)
    # Hand case: 4 tokens, top-8 of 256 experts, EP 8 -> 32 experts per rank, p = 0.1184,
    # mean touched 3.79, sd sqrt(32 p (1-p)) = 1.83, Blom z_8 = 1.42: busiest rank ~6.4.
    touched8, pairs8 = expert_load(t, 256, 8, 8)
    assert touched8[0] == pytest.approx(6.4, abs=0.15)
    # The busiest rank never holds more experts than it has, nor less than the mean share.
    assert np.all(touched8 <= 32.0) and np.all(touched8 >= 32 * p - 1e-9)
    assert np.all(pairs8 >= t * 8 / 8)
    # Large batches balance out: the straggler's excess shrinks relative to the mean.
    excess = pairs8 / (t * 8 / 8) - 1.0
    assert excess[0] > excess[1] > excess[2]
    assert excess[2] < 0.1


def test_expert_parallel_decode_waits_for_the_busiest_rank() -> None:
    # The same MoE layer sharded over 8 EP ranks decodes a small batch more slowly than the
    # per-rank mean would (the straggler holds more experts), but never slower than one rank
    # holding all touched experts.
    from gpuscale.costmodel.serving.iteration import expert_load

    touched8, _ = expert_load(np.array([4.0]), 256, 8, 8)
    touched1, _ = expert_load(np.array([4.0]), 256, 8, 1)
    assert touched1[0] / 8 < touched8[0] < touched1[0]


def test_requests_spread_evenly_over_attention_ranks() -> None:
    # C clients over R ranks: R - (C mod R) ranks hold floor(C/R), the rest one more. Fewer
    # clients than ranks means each request has a rank to itself (the lone-request figures);
    # every measured request is counted once and the throughput adds up over the ranks.
    from gpuscale.planner.serving.cohort_sim import BENCHMARK_ROUNDS, simulate, simulate_ranks

    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h100-sxm", 1)
    eng = engine("sglang")
    prof = load_profile(eng.cost_profile)
    it = _iteration_model(m, cl, Parallelism(), weight_format("bf16"), "bf16", prof, eng)
    one = simulate(it, eng, WORK, 1, max_running=1e9)
    three = simulate(it, eng, WORK, 3, max_running=1e9)
    two = simulate(it, eng, WORK, 2, max_running=1e9)
    assert one is not None and two is not None and three is not None
    lone = simulate_ranks(it, eng, WORK, 3, 8, max_running=1e9)
    assert lone is not None
    assert np.average(lone.ttft_s, weights=lone.weight) == pytest.approx(
        np.average(one.ttft_s, weights=one.weight)
    )
    assert lone.requests_per_s * 8 == pytest.approx(3 * one.requests_per_s)
    mixed = simulate_ranks(it, eng, WORK, 11, 4, max_running=1e9)  # 1 rank x 2, 3 ranks x 3
    assert mixed is not None
    assert mixed.weight.sum() == pytest.approx(BENCHMARK_ROUNDS * 11)
    # The ranks run side by side and the benchmark ends with the last of them: every measured
    # request over the longest rank's duration.
    requests = two.requests_per_s * two.duration_s + 3 * three.requests_per_s * three.duration_s
    assert mixed.duration_s == pytest.approx(max(two.duration_s, three.duration_s))
    assert mixed.requests_per_s * 4 == pytest.approx(requests / mixed.duration_s)
    assert requests == pytest.approx(BENCHMARK_ROUNDS * 11)
    mean = np.average(mixed.ttft_s, weights=mixed.weight)
    lo = np.average(two.ttft_s, weights=two.weight)
    hi = np.average(three.ttft_s, weights=three.weight)
    assert min(lo, hi) <= mean <= max(lo, hi)
    same = simulate_ranks(it, eng, WORK, 3, 1, max_running=1e9)
    assert same is not None
    assert np.average(same.ttft_s, weights=same.weight) == pytest.approx(
        np.average(three.ttft_s, weights=three.weight)
    )


def test_attention_dp_closed_loop_is_continuous_in_concurrency() -> None:
    # Below one request per attention rank every request runs alone: TTFT does not change with
    # C, and it does not fall when the ranks fill up.
    kw = {"gpu": "h200-sxm", "engine": "sglang", "weights": "fp8", "tp": 8, "ep": 8}
    ttft = [
        infer("deepseek-r1", attention_dp=8, concurrency=c, **kw).to_dict()["options"][0]["ttft_ms"]
        for c in (1, 4, 8, 12, 16)
    ]
    assert ttft[0] == pytest.approx(ttft[1]) and ttft[1] == pytest.approx(ttft[2])
    assert all(b >= a * 0.999 for a, b in pairwise(ttft))


@pytest.mark.parametrize("name", ["qwen3.5-397b-a17b", "glm-5", "deepseek-v3", "llama3.1-70b"])
def test_served_weights_match_the_catalog_parameter_count(name: str) -> None:
    """What one unsplit bf16 instance stores equals the parameter count of costmodel/params.py
    (hybrid Gated DeltaNet layers, output gates and sparse-attention indexers included)."""
    from gpuscale.costmodel.params import total_params
    from gpuscale.costmodel.serving.iteration import weight_bytes_per_gpu

    m = catalog.model(name)
    stored = weight_bytes_per_gpu(m, Parallelism(), weight_format("bf16")) / 2.0
    assert stored == pytest.approx(total_params(m), rel=0.01)
