"""Each engine rank sees its share of an open-loop run, and more clients never buy less
throughput (the feasible loads of the steady state are a prefix of its grid)."""

from __future__ import annotations

import itertools

import pytest

from gpuscale.api.serving import infer

LLAMA = {"gpu": "h100-sxm", "engine": "vllm", "input_len": 1024, "output_len": 256}


def test_open_loop_replicas_queue_on_their_share_of_the_requests() -> None:
    two = infer("llama3.1-8b", replicas=2, request_rate=44.0, num_requests=1000, **LLAMA)
    one = infer("llama3.1-8b", replicas=1, request_rate=22.0, num_requests=500, **LLAMA)
    q2 = two.to_dict()["options"][0]["queue_wait_ms"]
    q1 = one.to_dict()["options"][0]["queue_wait_ms"]
    assert q1 > 0.0
    assert q2 == q1
    # and the whole run on one replica would queue longer (more arrivals build it up)
    whole = infer("llama3.1-8b", replicas=1, request_rate=22.0, num_requests=1000, **LLAMA)
    assert whole.to_dict()["options"][0]["queue_wait_ms"] > q1


def test_throughput_never_falls_as_clients_are_added() -> None:
    # x(n) of this deployment rises, falls past its peak and rises again further out: the
    # capacity is the first peak, where the operating point is read.
    kw = {
        "gpu": "h200-sxm",
        "tp": 1,
        "engine": "sglang",
        "input_len": 128,
        "output_len": 4096,
        "input_cv": 0.3,
        "output_cv": 0.3,
        "kv_dtype": "fp8",
    }
    rates, running = [], []
    for c in (700, 800, 900, 1000, 1200):
        o = infer("openai/gpt-oss-120b", concurrency=c, **kw).to_dict()["options"][0]
        rates.append(o["requests_per_s"])
        running.append(o["running_requests_per_rank"])
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(rates))
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(running))


def test_a_run_of_all_requests_at_once_lasts_until_its_last_response() -> None:
    # trtllm-bench throughput submits every request at once: the run ends with the last of
    # them, so its rate is the requests over that makespan, not in-flight over mean latency
    # (Little's law would count the queued half of the run twice).
    kw = {**LLAMA, "engine": "tensorrt-llm", "input_len": 500, "output_len": 2000, "tp": 1}
    n = 3000
    o = infer("llama3.1-8b", concurrency=n, num_requests=n, **kw).to_dict()["options"][0]
    assert o["saturated"]
    little = n / o["e2e_s"]
    assert o["requests_per_s"] < 0.7 * little
    # The engine runs full until the queue empties, so the rate is close to its capacity: what
    # the same engine sustains with the queue kept full (twenty rounds of its running cap).
    cap = round(o["running_requests_per_rank"])
    held = infer("llama3.1-8b", concurrency=cap, num_requests=20 * cap, **kw).to_dict()
    assert o["requests_per_s"] == pytest.approx(held["options"][0]["requests_per_s"], rel=0.15)
