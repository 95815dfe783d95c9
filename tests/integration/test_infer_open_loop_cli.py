"""`gpuscale infer --request-rate`: the open-loop wait through the real entry point."""

from __future__ import annotations

import json

import pytest


def _option(gpuscale, *args: str) -> dict:
    proc = gpuscale("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["options"][0]


def test_request_rate_waits_more_past_the_capacity_without_a_jump(gpuscale) -> None:
    cap = _option(gpuscale, "--request-rate", "100000", "--json")["requests_per_s"]
    below, above = (
        _option(gpuscale, "--request-rate", f"{f * cap:.6f}", "--json") for f in (0.99, 1.01)
    )
    assert not below["saturated"] and above["saturated"]
    assert 0.0 < below["queue_wait_ms"] < above["queue_wait_ms"] < 3.0 * below["queue_wait_ms"]
    assert above["requests_per_s"] == pytest.approx(cap, rel=1e-9)


def test_bad_request_rate_is_one_line(gpuscale) -> None:
    proc = gpuscale("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--request-rate", "0")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--request-rate" in proc.stderr


def test_bad_num_requests_is_one_line(gpuscale) -> None:
    for bad in ("0", "2000000"):
        proc = gpuscale(
            "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--request-rate", "2", "--num-requests", bad
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "--num-requests" in proc.stderr


def test_a_load_sweep_with_a_request_rate_is_refused_in_the_rule_s_words(gpuscale) -> None:
    # Fuzz (helper-146): a concurrency sweep beside --request-rate answered with the sweep
    # API's type check ("request_rate must be a list of numbers").
    for loads in ("8", "1,8"):
        proc = gpuscale(
            "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", loads,
            "--request-rate", "4",
        )  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [
            "gpuscale: give exactly one of --concurrency (closed loop) or --request-rate "
            "(open loop)"
        ]


def test_fewer_requests_than_clients_are_priced_as_in_flight(gpuscale) -> None:
    # Fuzz (helper-146): --num-requests 1 beside --concurrency 1000 was overridden silently.
    def run(concurrency: str) -> dict:
        proc = gpuscale(
            "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", concurrency,
            "--num-requests", "4", "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)["options"][0]

    wide, four = run("1000"), run("4")
    assert any("at most 4 requests are ever in flight" in n for n in wide["notes"])
    assert wide["ttft_ms"] == four["ttft_ms"] and wide["tpot_ms"] == four["tpot_ms"]


def test_a_request_rate_past_any_deployment_is_refused(gpuscale) -> None:
    # Fuzz (helper-146): 1e300 requests/s was accepted and answered as a saturated engine.
    for bad in ("1e300", "1000001"):
        proc = gpuscale("infer", "llama3.1-8b", "--gpu", "h100-sxm", "--request-rate", bad)
        assert proc.returncode == 2, proc.stderr
        assert "at most 1,000,000" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
