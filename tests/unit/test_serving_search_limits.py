"""The SLO search names what ends a deployment's walk up the load as its curves compute it: the
p99 target reached, or the limit that sets its capacity (running slots, KV cache, token budget,
throughput peak; prefill workers, KV transfers or the decode workers' own limit when
disaggregated), and the verdict's words follow it (they said "runs out of batch" for every
capacity, prefill-bound splits included). Each case prices one deployment (``search.price``)
and checks the named limit against a figure of the capacity it claims, or lifts it."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.api import serving_search as ss
from gpuscale.planner.serving import search as ps
from gpuscale.planner.serving.deployment import Prediction
from gpuscale.planner.serving.steady_state import kv_capacity_requests, prefill_curve

SPLIT = "1 x TP1 prefill + 1 x TP1 decode"


def _ctx(gpus: int, engine: str, isl: int, osl: int, **slo: Any) -> ps.SearchContext:
    return ss.search_context(
        catalog.model("llama3.1-8b"), model="llama3.1-8b", gpu="h100-sxm", gpus=gpus,
        engine=engine, input_len=isl, output_len=osl, **slo,
    )  # fmt: skip


def _priced(ctx: ps.SearchContext, label: str) -> tuple[ps.Scored, ps.Candidate]:
    gpus = ctx.cluster.num_gpus
    cand = next(
        c for c in ps.candidates(ctx.model, gpus, ctx.cluster.gpus_per_node) if c.label == label
    )
    screened = ps.score(cand, ctx, False)
    assert screened is not None
    s = ps.price(screened, ctx)
    assert s is not None and s.exact
    return s, cand


def _capacity(ctx: ps.SearchContext, cand: ps.Candidate) -> Prediction:
    read = ps.open_loop_reader(cand, ctx)
    assert read is not None
    return read(1e9)


@pytest.mark.parametrize(
    ("engine", "isl", "osl", "name", "words"),
    [
        ("vllm", 128, 128, "running_slots", "running slots"),
        ("tensorrt-llm", 128, 128, "kv_cache", "KV cache fills"),
        # Prefill-bound: long prompts in chunks of the token budget (TensorRT-LLM, unchunked,
        # refuses a prompt above its budget: check_prompt_budget).
        ("vllm", 16384, 16, "token_budget", "token budget"),
    ],
)
def test_an_engine_names_the_limit_that_sets_its_capacity(
    engine: str, isl: int, osl: int, name: str, words: str
) -> None:
    ctx = _ctx(1, engine, isl, osl)
    s, cand = _priced(ctx, "1 x TP1")
    assert s.limit == "capacity" and s.capacity_limit == name
    said = ss.limit_words(s)
    assert words in said and "batch" not in said
    at_cap = _capacity(ctx, cand)
    more_slots = dataclasses.replace(ctx, eng=dataclasses.replace(ctx.eng, max_num_seqs=4096))
    budget = 4 * max(ctx.eng.max_num_batched_tokens, isl)
    more_budget = dataclasses.replace(
        ctx, eng=dataclasses.replace(ctx.eng, max_num_batched_tokens=budget)
    )
    cap, cap_slots = at_cap.requests_per_s, _capacity(more_slots, cand).requests_per_s
    if name == "running_slots":
        # the running requests sit on the engine's cap, and more slots serve more
        assert at_cap.running_per_rank == pytest.approx(ctx.eng.max_num_seqs, rel=1e-4)
        assert cap_slots > 1.01 * cap
        return
    # more slots change nothing (but the memory the engine sets aside per slot: 1e-4)
    assert cap_slots == pytest.approx(cap, rel=1e-3)
    if name == "kv_cache":
        # on the requests the KV pool holds
        held = kv_capacity_requests(at_cap.kv_tokens_per_rank, ctx.work, ctx.eng)
        assert at_cap.running_per_rank == pytest.approx(held, rel=1e-4)
    else:
        # far from both caps; a larger token budget serves more (fewer iterations, each with
        # its fixed costs, for the same prompt tokens: the GEMMs are linear in the tokens)
        assert at_cap.running_per_rank < 0.1 * ctx.eng.max_num_seqs
        assert _capacity(more_budget, cand).requests_per_s > 1.002 * cap


def test_an_engine_whose_throughput_peaks_says_so() -> None:
    ctx = ss.search_context(
        catalog.model("llama3.1-70b"), model="llama3.1-70b", gpu="h100-sxm", gpus=4,
        input_len=4096, output_len=1024,
    )  # fmt: skip
    s, cand = _priced(ctx, "1 x TP4")
    assert (s.limit, s.capacity_limit) == ("capacity", "throughput_peak")
    assert "throughput peaks" in ss.limit_words(s)
    at_cap = _capacity(ctx, cand)
    held = kv_capacity_requests(at_cap.kv_tokens_per_rank, ctx.work, ctx.eng)
    assert at_cap.running_per_rank < min(held, ctx.eng.max_num_seqs)


def test_a_split_names_its_prefill_workers_or_its_decode_workers() -> None:
    # long prompts, short answers: the prefill worker's throughput is the capacity
    ctx = _ctx(2, "vllm", 8192, 128)
    s, cand = _priced(ctx, SPLIT)
    assert (s.limit, s.capacity_limit) == ("capacity", "prefill_throughput")
    said = ss.limit_words(s)
    assert "prefill workers" in said and "batch" not in said
    assert cand.prefill is not None and cand.decode is not None
    eng_p, _ = ps.disaggregated_engines(ctx.eng, cand.prefill, cand.decode, ctx.work)
    it_p = ps._iteration_model(
        ctx.model, ctx.cluster, cand.prefill.par, ctx.fmt, ctx.kv_dtype, ctx.profile, ctx.eng
    )
    top = prefill_curve(it_p, eng_p, ctx.work, np.array([1.0])).capacity * cand.prefill.ranks
    assert _capacity(ctx, cand).requests_per_s == pytest.approx(top, rel=1e-5)
    # short prompts, long answers: the decode worker's KV cache
    s, _ = _priced(_ctx(2, "vllm", 128, 2048), SPLIT)
    assert (s.limit, s.capacity_limit) == ("capacity", "decode_kv_cache")
    assert "decode workers' KV cache" in ss.limit_words(s)


def test_a_target_reached_before_the_capacity_is_what_the_words_name() -> None:
    # the prefill-bound split under a TTFT target it reaches first: the words name the TTFT
    # p99, not the capacity (the capacity's limit is still reported, for the JSON)
    s, _ = _priced(_ctx(2, "vllm", 8192, 128, slo_ttft_ms=5000), SPLIT)
    assert (s.limit, s.capacity_limit) == ("ttft", "prefill_throughput")
    assert s.ttft_p99_s == pytest.approx(5.0, rel=1e-4)
    assert ss.limit_words(s) == "its TTFT p99 reaches the target at that load"
    # the slot-bound engine under a TPOT target below its capacity's
    s, _ = _priced(_ctx(1, "vllm", 128, 128, slo_tpot_ms=100), "1 x TP1")
    assert s.limit == "tpot" and s.tpot_p99_s == pytest.approx(0.1, rel=1e-4)
    assert ss.limit_words(s) == "its TPOT p99 reaches the target at that load"


def test_the_verdict_names_a_prefill_bound_runner_up_by_its_prefill() -> None:
    r = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=2, input_len=8192, output_len=128)
    split = next(s for s in r.ranked if s.cand.label == SPLIT)
    assert split.capacity_limit == "prefill_throughput"
    runner_up = r.explanation().split("Runner-up:")[1]
    assert ss.limit_words(r.ranked[1]) in runner_up and "runs out of batch" not in runner_up
    doc = r.to_dict()["options"]
    assert [o["capacity_limit"] for o in doc] == [s.capacity_limit for s in r.ranked]
    assert "prefill_throughput" in {o["capacity_limit"] for o in doc}


def test_an_options_keys_say_mean_requests_in_flight() -> None:
    """The mean number in flight at the option's Poisson rate is not a closed loop's clients:
    ``mean_requests_in_flight``, not ``concurrency`` (the search's schema 2)."""
    r = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=1, input_len=128, output_len=128)
    doc = r.to_dict()
    assert doc["schema_version"] == 2
    o = doc["options"][0]
    assert set(o) == {
        "label", "mode", "gpus", "mean_requests_in_flight", "ttft_ms_p99", "tpot_ms_p99",
        "goodput_tokens_per_s", "goodput_tokens_per_s_per_gpu", "requests_per_s",
        "capacity_resolved", "limit", "capacity_limit", "exact", "infer",
    }  # fmt: skip
    s = r.ranked[0]
    assert (
        o["mean_requests_in_flight"]
        == s.mean_in_flight
        == max(
            1,
            round(
                s.requests_per_s
                * infer("llama3.1-8b", **o["infer"]).to_dict()["options"][0]["e2e_s"]
            ),
        )
    )
    assert f"{s.mean_in_flight} requests in flight on average" in r.explanation()
