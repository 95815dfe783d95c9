"""A request of one output token (a prefill-only load, a classifier or a reranker) and a prompt
many times the token budget: the steady state has no decode to parametrize its load by, and
the load curve's lightest point was past the budget already. TPOT read the iteration time
(1.96 s), and one client in flight read as 5,000 running."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.api import infer

BASE: dict[str, Any] = dict(gpu="h100-sxm", engine="vllm")


def _option(**kw: Any) -> dict[str, Any]:
    return infer("llama3.1-8b", **{**BASE, **kw}).to_dict()["options"][0]


@pytest.mark.parametrize("input_cv", [0.0, 0.2])
def test_one_output_token_has_no_tpot_and_no_decode(input_cv: float) -> None:
    o = _option(input_len=2048, output_len=1, concurrency=16, input_cv=input_cv)
    assert o["tpot_ms"] == 0.0
    assert o["tpot_ms_p50"] == o["tpot_ms_p99"] == 0.0
    assert o["e2e_s"] == pytest.approx(o["ttft_ms"] / 1e3)


def test_one_output_token_under_an_open_loop_is_its_prefill() -> None:
    """Far below the capacity a request finds the engine idle: its TTFT is its own prefill, a
    few iterations at most past the load of one request (the lightest load had 1,000 prompts'
    tokens an iteration)."""
    light = _option(input_len=8000, output_len=1, request_rate=0.01, num_requests=10)
    one = _option(input_len=8000, output_len=1, concurrency=1)
    assert light["tpot_ms"] == 0.0
    assert light["ttft_ms"] == pytest.approx(one["ttft_ms"], rel=0.05)
    assert light["running_requests_per_rank"] < 0.1


@pytest.mark.parametrize(("output_len", "input_cv"), [(1, 0.0), (2, 0.0), (2, 0.1), (1, 0.1)])
def test_one_client_is_one_request_running_under_a_tiny_budget(
    output_len: int, input_cv: float
) -> None:
    """A budget of one token: the prompt of 50,001 runs as 50,001 one-token iterations; one
    client keeps one request running and the engine not saturated, and TTFT is those
    iterations (was 13,517 s with 5,000 running, or saturated at one client). The running cap
    of one: vLLM refuses a budget below its cap (``SchedulerConfig``), and one client never
    has more than one request to run."""
    o = _option(
        input_len=50_001, output_len=output_len, concurrency=1, input_cv=input_cv,
        engine_options={"max_num_batched_tokens": 1, "max_num_seqs": 1},
    )  # fmt: skip
    assert o["running_requests_per_rank"] == pytest.approx(1.0, rel=1e-3)
    assert not o["saturated"]
    assert o["ttft_ms"] == pytest.approx(50_001 * o["iteration_ms"], rel=0.02)
    assert o["requests_per_s"] == pytest.approx(1e3 / (o["e2e_s"] * 1e3), rel=0.02)
