"""SGLang's attention-DP share of the scheduler settings, and --max-prefill-tokens on the
disaggregated prefill workers.

SGLang 0.5.x divides ``chunked_prefill_size`` (default or stated) and a stated
``--max-running-requests`` by the DP size under ``--enable-dp-attention`` (server_args.py
``_handle_data_parallelism``; tp_worker.py / model_runner.py), and a prefill worker builds its
batches with the aggregated scheduler's ``PrefillAdder`` (disaggregation/prefill.py), whose
``--max-prefill-tokens`` rule the aggregated path already applied."""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import _engine_options, infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    _iteration_model,
    disaggregated_engines,
    engine_curve,
)
from gpuscale.planner.serving.disagg_closed_loop import PrefillStage, simulate
from gpuscale.planner.serving.steady_state import Workload, prefill_curve

B200 = catalog.gpu("b200")
WORK = Workload(input_len=8192.0, output_len=64.0)


def test_sglang_ranks_take_their_share_of_the_budget_and_a_stated_cap() -> None:
    eng = engine("sglang").for_device(B200)
    assert eng.max_num_batched_tokens == 16384  # the >= 160 GiB tier
    rank = eng.per_attention_rank(8)
    # chunked_prefill_size // dp_size; the default running cap is each rank's own pool.
    assert (rank.max_num_batched_tokens, rank.max_num_seqs) == (2048, eng.max_num_seqs)
    # Divided once: the rank's profile splits nothing more.
    assert rank.per_attention_rank(8) == rank
    assert eng.per_attention_rank(1) == eng
    stated = dataclasses.replace(eng, **_engine_options({"max_num_seqs": 256}, "sglang"))
    assert stated.per_attention_rank(8).max_num_seqs == 32  # --max-running-requests 256 // 8
    for other in ("vllm", "tensorrt-llm"):
        e = engine(other).for_device(B200)
        assert e.per_attention_rank(8) == e


def test_sglang_pools_and_engines_run_the_rank_share() -> None:
    eng = engine("sglang").for_device(B200)
    prefill = Pool(workers=1, par=Parallelism(tp=8, ep=8, attention_dp=8))
    decode = Pool(workers=1, par=Parallelism(tp=8, ep=8, attention_dp=4), max_batch=64)
    eng_p, eng_d = disaggregated_engines(eng, prefill, decode, WORK)
    assert eng_p.max_num_batched_tokens == 2048
    assert (eng_d.max_num_batched_tokens, eng_d.max_num_seqs) == (4096, 64)
    # Aggregated: each rank's load curve and simulation read the rank's budget, while the
    # memory fraction keeps the engine's (SGLang reserves for the undivided chunk).
    model = catalog.model("deepseek-r1")
    par = Parallelism(tp=8, ep=8, attention_dp=8)
    built = engine_curve(
        model, catalog.cluster("b200", 8), par, 1, weight_format("fp8"), "fp8",
        load_profile(eng.cost_profile), eng, Workload(input_len=1024.0, output_len=64.0),
        Client(concurrency=8),
    )  # fmt: skip
    assert built.eng.max_num_batched_tokens == 2048


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


def test_prefill_curve_batches_whole_prompts_under_max_prefill_tokens() -> None:
    """A 65536-token chunk with --max-prefill-tokens 16384 and 8192-token prompts: the adder
    takes the first prompt and refuses the second (8192 reaches the 8192 left), so a prefill
    batch holds one prompt, as with an 8192-token budget."""
    it = _prefill_it()
    sglang = engine("sglang")
    base = dataclasses.replace(sglang, max_num_batched_tokens=65536)
    limited = dataclasses.replace(base, max_prefill_tokens=16384)
    one = dataclasses.replace(sglang, max_num_batched_tokens=8192, max_prefill_tokens=None)
    unlimited = dataclasses.replace(base, max_prefill_tokens=None)
    x = np.array([np.inf])
    cap = {
        name: prefill_curve(it, e, WORK, x).capacity
        for name, e in (("limited", limited), ("one", one), ("unlimited", unlimited))
    }
    assert cap["limited"] == cap["one"]
    assert cap["unlimited"] > cap["limited"]


def test_closed_loop_prefill_ranks_stop_below_max_prefill_tokens() -> None:
    calls: list[float] = []

    def iteration_s(tokens: float) -> float:
        calls.append(tokens)
        return 0.1

    stage = PrefillStage(
        workers=1, ranks=1, rank_tokens=65536.0, rank_prompts=64, iteration_s=iteration_s,
        prompt_limit=16384.0,
    )  # fmt: skip
    simulate(
        concurrency=4,
        input_lens=np.full(4, 5000.0),
        output_lens=np.full(4, 2.0),
        prefill=stage,
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    # 5000 + 5000 + 5000 = 15000 < 16384 starts three; the fourth would reach 20000.
    assert calls == [15000.0, 5000.0]


def test_disaggregated_closed_loop_passes_the_engine_limit() -> None:
    """The prediction's closed loop reads the engine's --max-prefill-tokens: at 4096 each
    prefill batch of the 16-prompt start burst holds one 2048-token prompt (the second reaches
    the 2048 left) instead of seven, so the first prompts' tokens leave sooner and the mean TTFT
    falls (a batch's time grows with its tokens; the old closed loop ignored the limit: equal)."""

    def ttft(limit: int) -> float:
        out = infer(
            "llama3.1-8b", gpu="h200-sxm", engine="sglang", input_len=2048, output_len=64,
            concurrency=16, num_requests=16, prefill_workers=1, decode_workers=1,
            engine_options={"max_prefill_tokens": limit},
        )  # fmt: skip
        return float(out.to_dict()["options"][0]["ttft_ms"])

    assert ttft(4096) < 0.9 * ttft(16384)
