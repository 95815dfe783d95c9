"""SGLang's --max-prefill-tokens (soft) and --enable-mixed-chunk in the cohort simulation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import infer
from gpuscale.catalog.serving_engines import EngineProfile, engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.cohort_sim import simulate, simulate_ranks
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.steady_state import Workload


def _it(eng: EngineProfile) -> IterationModel:
    return _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h200-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )


def _burst_groups(eng: EngineProfile, isl: int, conc: int) -> list[float]:
    """Sizes of the groups of the start burst that get their first token together."""
    work = Workload(input_len=isl, output_len=64)
    sim = simulate_ranks(_it(eng), eng, work, conc, 1, max_running=1e9, burst_only=True)
    assert sim is not None
    groups: dict[float, float] = {}
    for t, w in zip(sim.ttft_s.tolist(), sim.weight.tolist(), strict=True):
        groups[round(t, 9)] = groups.get(round(t, 9), 0.0) + w
    return [groups[t] for t in sorted(groups)]


def test_default_limit_never_binds_below_the_chunk_budget() -> None:
    # ServerArgs default 16384 is above the 8192-token chunk budget of H100/H200: the profile's
    # limit changes nothing against no limit at all.
    eng = engine("sglang")
    assert eng.max_prefill_tokens == 16384 and eng.max_num_batched_tokens == 8192
    free = dataclasses.replace(eng, max_prefill_tokens=None)
    for isl, conc in ((1000, 32), (5000, 8), (300, 64)):
        work = Workload(input_len=isl, output_len=128)
        a = simulate(_it(eng), eng, work, conc, max_running=1e9)
        b = simulate(_it(free), free, work, conc, max_running=1e9)
        assert a is not None and b is not None
        np.testing.assert_allclose(a.ttft_s, b.ttft_s)
        np.testing.assert_allclose(a.tpot_s, b.tpot_s)


def test_a_request_reaching_the_limit_waits_also_with_chunking() -> None:
    # SGLang 0.5.x PrefillAdder.add_one_req: a request whose prompt reaches what is left of the
    # limit waits for the next batch unless it is the batch's first, with chunked prefill on
    # too (only sglang PR #25741, 2026-05, exempted chunking). 1000-token prompts: a limit of
    # 2001 starts two per batch, 2000 one (the second's 1000 tokens reach the 1000 left). The
    # earlier reading (the crossing request runs whole) gave [3, 3, 2] and [2, 2, 2, 2].
    eng = engine("sglang")
    assert eng.chunked_prefill
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=None), 1000, 8) == [8.0]
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=2001), 1000, 8) == [2.0] * 4
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=2000), 1000, 8) == [1.0] * 8


def test_no_chunk_of_a_request_that_reaches_the_limit() -> None:
    # 5000-token prompts, chunk budget 8192, limit 9000: the second prompt (5000 tokens) reaches
    # the 4000 left, so no chunk of it rides beside the first; without the limit the 3192 tokens
    # left start it as a chunk, its last 1808 ride beside the whole third prompt in the next
    # batch, and the third gets its first token a batch sooner: the same prompt tokens in two
    # batches instead of three, one batch's fixed costs (at least the engine's host overhead)
    # less. (The second's first token comes with the second batch either way.)
    eng = engine("sglang")
    work = Workload(input_len=5000, output_len=64)
    third = {}
    for limit in (None, 9000):
        e = dataclasses.replace(eng, max_prefill_tokens=limit)
        sim = simulate_ranks(_it(e), e, work, 3, 1, max_running=1e9, burst_only=True)
        assert sim is not None
        third[limit] = float(np.max(sim.ttft_s))
    assert third[None] + eng.iteration_overhead_us * 1e-6 < third[9000]


def test_without_chunking_the_limit_is_hard_but_the_first_prompt_always_runs() -> None:
    # add_one_req without chunked prefill: a request whose tokens reach what is left of the
    # limit waits for the next batch, unless it is the batch's first.
    eng = dataclasses.replace(engine("sglang"), chunked_prefill=False)
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=2001), 1000, 8) == [2.0] * 4
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=2000), 1000, 8) == [1.0] * 8
    assert _burst_groups(dataclasses.replace(eng, max_prefill_tokens=500), 1000, 3) == [1.0] * 3


def test_no_chunk_starts_once_the_limit_is_spent() -> None:
    # 5000-token prompts, chunk budget 8192: without a limit the 3192 tokens left beside the
    # first prompt start the next one as a chunk; with the limit at 5000 none is left, so each
    # batch prefills one prompt and the burst's last prompt finishes later.
    eng = engine("sglang")
    work = Workload(input_len=5000, output_len=64)
    last = {}
    for limit in (None, 5000):
        e = dataclasses.replace(eng, max_prefill_tokens=limit)
        sim = simulate_ranks(_it(e), e, work, 4, 1, max_running=1e9, burst_only=True)
        assert sim is not None
        last[limit] = float(np.max(sim.ttft_s))
    assert last[None] < last[5000]


def test_mixed_chunk_lets_the_first_prompts_decode_during_the_burst() -> None:
    # prefill_first (SGLang default): no decode runs until the burst's last prompt is in, so
    # every request of the burst finishes in the same iteration; --enable-mixed-chunk mixes the
    # running decodes into each prefill batch, so the burst's requests finish apart.
    eng = engine("sglang")
    work = Workload(input_len=4000, output_len=64)
    finish = {}
    for policy in ("prefill_first", "mixed"):
        e = dataclasses.replace(eng, prefill_policy=policy)
        sim = simulate_ranks(_it(e), e, work, 16, 1, max_running=1e9, burst_only=True)
        assert sim is not None
        finish[policy] = len({round(x, 9) for x in sim.e2e_s.tolist()})
    assert finish["prefill_first"] == 1 and finish["mixed"] > 1


def test_engine_options_reach_the_profile_and_are_sglang_only() -> None:
    kw = {"gpu": "h200-sxm", "input_len": 2000, "output_len": 200, "concurrency": 32}
    base = infer("llama3.1-8b", engine="sglang", **kw).to_dict()["options"][0]
    opts = {"mixed_chunk": True, "max_prefill_tokens": 3500}
    mixed = infer("llama3.1-8b", engine="sglang", engine_options=opts, **kw)
    out = mixed.to_dict()["options"][0]
    assert out["ttft_ms"] != pytest.approx(base["ttft_ms"])
    for bad_engine, name in (("vllm", "mixed_chunk"), ("tensorrt-llm", "max_prefill_tokens")):
        with pytest.raises(InputError, match="sglang"):
            infer("llama3.1-8b", engine=bad_engine, engine_options={name: 1}, **kw)
    with pytest.raises(InputError, match="max_prefill_tokens"):
        infer("llama3.1-8b", engine="sglang", engine_options={"max_prefill_tokens": 0}, **kw)


def test_mixed_decodes_that_spend_the_limit_still_let_one_prompt_start() -> None:
    # --enable-mixed-chunk: rem_input_tokens starts at max_prefill_tokens less the running
    # decodes, here 16 - 32 < 0. The scheduler still offers the queue's head to add_one_req,
    # which refuses only when can_run_list is not empty, so each prefill batch starts one
    # prompt, as with a limit (2000) that the second 1000-token prompt reaches; a limit the
    # decodes spent must not hold every prompt until the running requests finish.
    eng = dataclasses.replace(engine("sglang"), prefill_policy="mixed")
    work = Workload(input_len=1000, output_len=512)
    ttft = {}
    for limit in (16, 2000):
        e = dataclasses.replace(eng, max_prefill_tokens=limit)
        sim = simulate(_it(e), e, work, 32, max_running=1e9)
        assert sim is not None
        ttft[limit] = float(np.average(sim.ttft_s, weights=sim.weight))
    assert ttft[16] == pytest.approx(ttft[2000], rel=1e-9)
    assert ttft[16] < 0.1 * work.output_len * float(np.average(sim.tpot_s, weights=sim.weight))
