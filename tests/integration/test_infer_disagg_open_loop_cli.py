"""`gpuscale infer --request-rate` on disaggregated workers: the binding stage's finite-run
queue through the real entry point."""

from __future__ import annotations

import json

import pytest

DISAGG = (
    "--prefill-workers", "1", "--prefill-tp", "2", "--decode-workers", "1", "--decode-tp", "4",
    "--input", "8192", "--output", "256", "--weights", "fp8",
)  # fmt: skip


def _option(gpuscale, *args: str) -> dict:
    proc = gpuscale(
        "infer", "llama3.1-70b", "--gpu", "h200-sxm", "--engine", "tensorrt-llm", *DISAGG, *args
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["options"][0]


def test_prefill_workers_queue_below_and_past_the_capacity_without_a_jump(gpuscale) -> None:
    cap = _option(gpuscale, "--request-rate", "100000", "--json")["requests_per_s"]
    below, above = (
        _option(gpuscale, "--request-rate", f"{f * cap:.6f}", "--json") for f in (0.99, 1.01)
    )
    assert below["mode"] == "disaggregated"
    assert not below["saturated"] and above["saturated"]
    # One prompt per prefill iteration at 8192 tokens: one slot, a Poisson queue below the
    # capacity (before: none at 0.99 x, then 3.2 s at 1.01 x).
    assert 0.0 < below["queue_wait_ms"] < above["queue_wait_ms"] < 1.5 * below["queue_wait_ms"]
    assert any(n.startswith("open-loop queue at the prefill workers") for n in below["notes"])
    assert above["requests_per_s"] == pytest.approx(cap, rel=1e-9)
