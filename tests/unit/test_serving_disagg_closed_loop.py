"""planner/serving/disagg_closed_loop.py: a closed-loop client followed request by request
through a disaggregated deployment's prefill iterations and decode slots, and its use for
closed loops with varying lengths in ``predict_disaggregated``."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest

from gpuscale.api.serving import infer
from gpuscale.planner.serving.deployment import prefill_burst_s
from gpuscale.planner.serving.disagg_closed_loop import (
    GOLDEN,
    SILVER,
    ClosedLoopTTFT,
    PrefillStage,
    client_lengths,
    simulate,
)


def _stage(
    t: float,
    ranks: int = 1,
    cap: int = 1,
    budget: float = 1e9,
    calls: list[float] | None = None,
) -> PrefillStage:
    def iteration_s(tokens: float) -> float:
        if calls is not None:
            calls.append(tokens)
        return t

    return PrefillStage(
        workers=1, ranks=ranks, rank_tokens=budget, rank_prompts=cap, iteration_s=iteration_s
    )


def _fixed(n: int, length: float) -> np.ndarray:
    return np.full(n, length)


def test_one_client_never_waits() -> None:
    sim = simulate(
        concurrency=1,
        input_lens=_fixed(5, 100.0),
        output_lens=_fixed(5, 11.0),
        prefill=_stage(0.2),
        admission_s=0.03,
        decode_slots=np.inf,
        tpot_s=0.01,
    )
    assert sim.ttft_s == pytest.approx(np.full(5, 0.23))
    assert sim.slot_wait_s == pytest.approx(np.zeros(5))


def test_fixed_lengths_pay_the_start_burst_once() -> None:
    """Every request of one length: the sub-cohorts come back spaced by the prefill and find
    it free, so the mean is one prefill plus the burst averaged over the rounds, exactly the
    analytic ``prefill_burst_s`` (one prompt per iteration: (n - 1) / 2 iterations / rounds)."""
    t, conc, rounds = 0.25, 4, 5
    sim = simulate(
        concurrency=conc,
        input_lens=_fixed(conc * rounds, 100.0),
        output_lens=_fixed(conc * rounds, 101.0),
        prefill=_stage(t),
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.02,
    )
    burst = prefill_burst_s(conc, 1, 1.0 / t, rounds)
    assert sim.mean_ttft_s == pytest.approx(t + burst)
    assert sim.ttft_s[:conc] == pytest.approx([t, 2 * t, 3 * t, 4 * t])
    assert sim.ttft_s[conc:] == pytest.approx(np.full(conc * (rounds - 1), t))


def test_varying_lengths_rebunch_at_the_prefill() -> None:
    """Same mean lengths, same iteration time, same load: with lengths that vary the rounds
    come back as waves and queue again, so the mean TTFT exceeds the fixed-length one."""
    conc, n = 64, 320

    def run(cv: float) -> float:
        ins = client_lengths(1000.0, cv, n, GOLDEN)
        outs = client_lengths(200.0, cv, n, SILVER)
        return simulate(
            concurrency=conc,
            input_lens=ins,
            output_lens=outs,
            prefill=_stage(0.05, ranks=2, cap=2),
            admission_s=0.0,
            decode_slots=np.inf,
            tpot_s=0.005,
        ).mean_ttft_s

    # InferenceX's client: lengths uniform over [0.8 L, L], a coefficient of variation 0.0645
    # fixed lengths: one iteration plus the first round's 16 iterations of four, over 5 rounds
    assert run(0.0) == pytest.approx(0.05 + 0.05 * (16 - 1) / 2 / 5)
    assert run(0.0645) > 1.15 * run(0.0)


def test_decode_slots_hold_the_rest_back() -> None:
    """Two clients, one decode slot held 1 s per request, a prefill of no time: every request
    but the first waits one decode for the slot."""
    sim = simulate(
        concurrency=2,
        input_lens=_fixed(10, 10.0),
        output_lens=_fixed(10, 101.0),
        prefill=_stage(0.0),
        admission_s=0.0,
        decode_slots=1,
        tpot_s=0.01,
    )
    assert sim.ttft_s[0] == pytest.approx(0.0)
    assert sim.ttft_s[1:] == pytest.approx(np.full(9, 1.0))
    assert sim.slot_wait_s.mean() == pytest.approx(0.9)
    assert sim.ttft_s == pytest.approx(sim.prefill_s + sim.slot_wait_s)


def test_ranks_take_prompts_in_turn_up_to_budget_and_cap() -> None:
    """Two ranks, two prompts each, 100 tokens: 60-token prompts go to rank 0, rank 1, then
    the third would lift rank 0 to 120, so the iteration holds two; a prompt above the budget
    still runs (alone on its rank)."""
    calls: list[float] = []
    simulate(
        concurrency=4,
        input_lens=_fixed(4, 60.0),
        output_lens=_fixed(4, 2.0),
        prefill=_stage(0.1, ranks=2, cap=2, budget=100.0, calls=calls),
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    assert calls == [60.0, 60.0]
    calls.clear()
    simulate(
        concurrency=2,
        input_lens=np.array([150.0, 20.0]),
        output_lens=_fixed(2, 2.0),
        prefill=_stage(0.1, ranks=1, cap=4, budget=100.0, calls=calls),
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    assert calls == [150.0, 20.0]


def test_client_lengths_keep_the_mean_and_spread() -> None:
    x = client_lengths(921.5, 0.0645, 5000, GOLDEN)
    assert x.mean() == pytest.approx(921.5, rel=2e-3)
    assert x.std() / x.mean() == pytest.approx(0.0645, rel=0.02)
    assert client_lengths(921.5, 0.0645, 5000, GOLDEN) == pytest.approx(x)  # deterministic
    assert client_lengths(100.0, 0.0, 3, SILVER) == pytest.approx([100.0] * 3)


KW = {
    "gpu": "h200-sxm",
    "engine": "tensorrt-llm",
    "weights": "fp8",
    "input_len": 922,
    "output_len": 922,
    "concurrency": 576,
    "num_requests": 2880,
    "prefill_workers": 1,
    "prefill_tp": 8,
    "prefill_ep": 8,
    "prefill_attention_dp": 8,
    "decode_workers": 9,
    "decode_tp": 8,
    "decode_ep": 8,
    "decode_attention_dp": 1,
    "decode_batch": 256,
    "kv_dtype": "fp8",
}
PARTS = (
    r"prefill workers (\d+) ms, decode admission (\d+) ms \(the KV hand-off, [\d.]+ ms, "
    r"runs inside it\), client burst (\d+) ms, queue (\d+) ms"
)


def test_varying_lengths_are_followed_and_their_parts_add_up() -> None:
    out = infer("deepseek-r1", **KW, input_cv=0.0645, output_cv=0.0645).to_dict()["options"][0]
    notes = " ".join(out["notes"])
    assert "closed loop followed request by request" in notes
    assert "start-up burst" not in notes
    m = re.search(PARTS, notes)
    assert m is not None
    pre, admit, burst, queue = (float(g) for g in m.groups())
    assert burst == 0.0
    assert pre + admit + queue == pytest.approx(out["ttft_ms"], abs=2.0)
    assert out["ttft_ms_p99"] >= out["ttft_ms"]


def test_fixed_lengths_keep_the_analytic_reading() -> None:
    out = infer("deepseek-r1", **KW).to_dict()["options"][0]
    notes = " ".join(out["notes"])
    assert "closed loop followed" not in notes
    assert "start-up burst" in notes


def test_the_loaded_1k_row_waits_longer_than_its_one_time_burst() -> None:
    """H200 1k/1k at C = 576 (``c64_ctx1_gen9_tep8_batch256``): followed request by request
    the rounds queue again at the attention-DP context server, so the TTFT is above the
    steady state plus a one-time burst (the reading for fixed lengths)."""
    varying = infer("deepseek-r1", **KW, input_cv=0.0645, output_cv=0.0645).to_dict()
    fixed = infer("deepseek-r1", **KW).to_dict()
    assert varying["options"][0]["ttft_ms"] > 1.05 * fixed["options"][0]["ttft_ms"]
    # the decode side is the same reading either way
    assert varying["options"][0]["tpot_ms"] == pytest.approx(fixed["options"][0]["tpot_ms"])


def test_a_user_client_that_states_no_request_count_is_followed_too() -> None:
    """A user's varying-length closed loop names no request count (``num_requests=None``): the
    followed loop measures the default count (``deployment.measured_requests``), as when that
    count is stated, instead of failing on the missing one."""
    kw: dict[str, Any] = dict(
        gpu="h200-sxm",
        engine="tensorrt-llm",
        input_len=1024,
        output_len=1024,
        concurrency=64,
        input_cv=0.1,
        output_cv=0.1,
        prefill_workers=1,
        prefill_tp=8,
        decode_workers=1,
        decode_tp=8,
    )
    unstated = infer("deepseek-r1", **kw).to_dict()["options"][0]
    stated = infer("deepseek-r1", num_requests=1000, **kw).to_dict()["options"][0]
    assert unstated["ttft_ms"] == pytest.approx(stated["ttft_ms"])


def test_a_prefill_batch_cap_counts_prompts_not_mean_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``prefill_batch`` caps the prompts of a context iteration (TensorRT-LLM
    ``max_batch_size``); the token budget stays the engine's (``max_num_tokens``). The steady
    state reads the cap as ``prefill_batch x mean ISL`` tokens, a fluid reading; followed
    prompt by prompt, that budget refused the second of two prompts whenever the pair was
    above twice the mean (half the iterations), though the engine runs both."""
    import gpuscale.planner.serving.deployment as deployment

    stages: list[PrefillStage] = []
    real = deployment.simulate

    def spy(**kw: Any) -> ClosedLoopTTFT:
        stages.append(kw["prefill"])
        return real(**kw)

    monkeypatch.setattr(deployment, "simulate", spy)
    kw = {**KW, "prefill_attention_dp": 1, "prefill_ep": 1, "prefill_batch": 2}
    infer("deepseek-r1", **kw, input_cv=0.0645, output_cv=0.0645)
    (stage,) = stages
    assert stage.rank_prompts == 2
    # TensorRT-LLM's max_num_tokens default (8,192), not 2 x 922.
    assert stage.rank_tokens == 8192.0
    # Two prompts of 900-1,000 tokens fit it: every full iteration holds both.
    held: list[float] = []

    def iteration_s(tokens: float) -> float:
        held.append(tokens)
        return 0.1

    lens = client_lengths(922.0, 0.0645, 40, GOLDEN)
    simulate(
        concurrency=40,
        input_lens=lens,
        output_lens=_fixed(40, 2.0),
        prefill=dataclasses.replace(stage, iteration_s=iteration_s),
        admission_s=0.0,
        decode_slots=np.inf,
        tpot_s=0.0,
    )
    assert len(held) == 20
