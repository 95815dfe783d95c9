"""Chunked prefill on the disaggregated prefill workers.

SGLang's prefill worker builds its batches with the aggregated scheduler's ``PrefillAdder``
(v0.5.9 ``disaggregation/prefill.py`` ``get_new_batch_prefill``; server_args.py
``_handle_pd_disaggregation`` leaves ``chunked_prefill_size`` on), which truncates a prompt
longer than ``rem_chunk_tokens`` and carries the rest into the next batch
(``managers/schedule_policy.py`` ``add_one_req`` / ``add_chunked_req``): a prompt longer than
the chunk runs as several iterations, each with its own fixed costs, as the aggregated model
already prices it (``steady_state._chunk_tokens``)."""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.planner.serving.disagg_closed_loop import PrefillStage, simulate
from gpuscale.planner.serving.steady_state import Workload, prefill_curve

WORK = Workload(input_len=8192.0, output_len=64.0)


def _prefill_it() -> IterationModel:
    eng = engine("sglang").for_device(catalog.gpu("h200-sxm"))
    return _iteration_model(
        catalog.model("llama3.1-8b"),
        catalog.cluster("h200-sxm", 1),
        Parallelism(),
        weight_format("bf16"),
        "bf16",
        load_profile(eng.cost_profile),
        eng,
    )


def test_prefill_curve_runs_a_long_prompt_as_budget_sized_chunks() -> None:
    """An 8192-token prompt under a 2048-token chunk spans four iterations of 2048 tokens:
    its TTFT at light load is the wait for the running iteration (half of one, and one more
    under the overlap scheduler) and its four chunk iterations, each with its fixed costs
    (the old curve priced one 8192-token iteration); without chunked prefill it stays one
    whole-prompt iteration."""
    it = _prefill_it()
    sglang = dataclasses.replace(engine("sglang"), max_prefill_tokens=None)
    chunked = dataclasses.replace(sglang, max_num_batched_tokens=2048, chunked_prefill=True)
    whole = dataclasses.replace(chunked, chunked_prefill=False)
    big = dataclasses.replace(chunked, max_num_batched_tokens=8192)
    x = np.array([1e-6])
    pc = prefill_curve(it, chunked, WORK, x)
    assert pc.chunks == 4.0
    zeros = np.zeros(1)
    half = np.full(1, WORK.input_len / 2.0)
    t_chunk = float(it.time_s(zeros, zeros, np.full(1, 2048.0), half)[0])
    t_whole = float(it.time_s(zeros, zeros, np.full(1, 8192.0), half)[0])
    assert t_chunk * 4.0 > t_whole  # the fixed costs are paid per chunk
    wait = 0.5 + (1.0 if chunked.overlap_scheduler else 0.0)
    overhead = chunked.request_overhead_ms * 1e-3
    assert np.isclose(float(pc.ttft_s[0]), (wait + 4.0) * t_chunk + overhead, rtol=1e-9)
    light_whole = float(prefill_curve(it, whole, WORK, x).ttft_s[0])
    assert np.isclose(light_whole, (wait + 1.0) * t_whole + overhead, rtol=1e-9)
    # A chunk as long as the prompt: one iteration, the same as without chunking.
    assert prefill_curve(it, big, WORK, x).chunks == 1.0
    assert float(prefill_curve(it, big, WORK, x).ttft_s[0]) == light_whole
    # Capacity: budget-sized iterations back to back, 4 per prompt.
    cap = prefill_curve(it, chunked, WORK, np.array([np.inf])).capacity
    assert np.isclose(cap, 2048.0 / (8192.0 * t_chunk), rtol=1e-6)


def _run(chunked: bool, lens: list[float], budget: float = 2048.0) -> list[float]:
    """The prompt tokens of each prefill iteration (``on_iteration``: every iteration, the
    repeated full-budget ones the simulation prices at once included)."""
    calls: list[float] = []
    stage = PrefillStage(
        workers=1, ranks=1, rank_tokens=budget, rank_prompts=64, iteration_s=lambda _: 0.1,
        chunked=chunked, on_iteration=lambda load: calls.append(max(load)),
    )  # fmt: skip
    simulate(
        concurrency=len(lens),
        input_lens=np.array(lens),
        output_lens=np.full(len(lens), 2.0),
        prefill=stage,
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    return calls


def test_closed_loop_prefill_ranks_chunk_a_long_prompt() -> None:
    # Without chunking the first prompt runs whole (5000 > 2048), the second waits.
    assert _run(False, [5000.0, 1000.0]) == [5000.0, 1000.0]
    # Chunked: 2048 + 2048, then the last 904 and the 1000-token prompt beside it (the carried
    # chunk goes first, the waiting prompt joins in what is left of the budget).
    assert _run(True, [5000.0, 1000.0]) == [2048.0, 2048.0, 1904.0]
    # A later prompt is chunked into what is left of the budget, its rest goes on next.
    assert _run(True, [1500.0, 1000.0]) == [2048.0, 452.0]


def test_closed_loop_prompt_ttft_waits_for_its_last_chunk() -> None:
    stage = PrefillStage(
        workers=1, ranks=1, rank_tokens=1000.0, rank_prompts=64, iteration_s=lambda _: 0.1,
        chunked=True,
    )  # fmt: skip
    sim = simulate(
        concurrency=1,
        input_lens=np.array([3500.0]),
        output_lens=np.array([2.0]),
        prefill=stage,
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    assert np.isclose(sim.prefill_s[0], 0.4)  # four iterations: 1000, 1000, 1000, 500


def test_disaggregated_prediction_chunks_the_prefill_workers_prompts() -> None:
    """One client, one 8192-token prompt at a time, no overlap scheduler (whose extra
    iteration before the first token leaves is one chunk's, not the whole prompt's): under a
    2048-token chunk the prefill worker runs four iterations, each with its fixed costs, where
    an 8192-token chunk runs one, so the TTFT rises; the old closed loop ran the first prompt
    whole whatever the chunk (equal)."""

    def ttft(chunk: int) -> float:
        out = infer(
            "llama3.1-8b", gpu="h200-sxm", engine="sglang", input_len=8192, output_len=16,
            concurrency=1, num_requests=4, prefill_workers=1, decode_workers=1,
            engine_options={"max_num_batched_tokens": chunk, "overlap_scheduler": False},
        )  # fmt: skip
        return float(out.to_dict()["options"][0]["ttft_ms"])

    # Each iteration's fixed costs (the engine's host overhead, every kernel's latency and
    # gap) are paid once more per chunk: at least the host overhead three times over.
    overhead_s = engine("sglang").iteration_overhead_us * 1e-6
    assert ttft(2048) > ttft(4096) > ttft(8192)
    assert ttft(2048) - ttft(8192) > 3 * overhead_s * 1e3


def test_a_prompt_past_the_prefill_limit_runs_whole_with_chunking_off() -> None:
    # Review (helper-148): the prompt-budget check, moved to the prefill workers, refused a
    # 2,000-token prompt under --max-prefill-tokens 1000 with chunking off, which SGLang starts
    # whole as a batch's first prompt (PrefillAdder.add_one_req); aggregated alike.
    kw = dict(gpu="h100-sxm", engine="sglang", input_len=2000, output_len=100, concurrency=8)
    off = {"prefill_chunked_prefill": False, "prefill_max_prefill_tokens": 1000}
    disagg = infer("llama3.1-8b", **kw, prefill_workers=1, decode_workers=1, engine_options=off)
    assert disagg.to_dict()["options"][0]["ttft_ms"] > 0.0
    agg_off = {"chunked_prefill": False, "max_num_batched_tokens": 1000}
    assert infer("llama3.1-8b", **kw, engine_options=agg_off).to_dict()["options"][0]["fits"]
