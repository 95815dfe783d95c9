"""SGLang ``--scheduler-recv-interval``: the poll wait of a new request, the prompts one poll
brings in, the held-out reader's launch flags, and the engine option."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.errors import InputError
from gpuscale.planner.serving.steady_state import recv_batch, recv_wait
from gpuscale.validation.inferencex_sglang_launch import blackwell_sglang_launch

SGLANG = engine("sglang")


def test_interval_one_is_the_engine_default_and_adds_nothing() -> None:
    assert SGLANG.recv_interval == 1
    t = np.array([0.01, 0.02])
    assert np.all(recv_wait(SGLANG, t, t * 3.0, t) == 0.0)
    assert np.all(recv_batch(SGLANG, np.array([1.0, 100.0]), 100.0) == 1.0)


def test_decode_only_engine_waits_half_the_window_less_the_iteration_in_flight() -> None:
    eng = dataclasses.replace(SGLANG, recv_interval=30)
    dec = np.array([0.02])
    # No prompt-carrying iterations (the mean is the decode-only time): every arrival lands in
    # a decode window and waits (30 - 1) / 2 decode iterations more.
    wait = recv_wait(eng, dec, np.array([0.2]), dec)
    assert wait[0] == pytest.approx(14.5 * 0.02)
    # Half the time in prompt iterations: the wait scales with the decode share of time.
    mean = np.array([0.11])  # half the iterations at 0.2 s, half at 0.02 s
    share = 0.5 * 0.02 / 0.11
    assert recv_wait(eng, mean, np.array([0.2]), dec)[0] == pytest.approx(share * 14.5 * 0.02)
    # Prompts that cost nothing (all cached): the engine only decodes, every arrival waits.
    assert recv_wait(eng, dec, dec, dec)[0] == pytest.approx(14.5 * 0.02)


def test_one_poll_brings_the_window_arrivals_given_at_least_one() -> None:
    eng = dataclasses.replace(SGLANG, recv_interval=10)
    # n / decode_steps arrivals per iteration, 10 iterations per window.
    m = np.array([0.01, 1.0, 20.0])
    got = recv_batch(eng, m * 100.0 / 10.0, 100.0)
    assert got == pytest.approx(m / (1.0 - np.exp(-m)))
    assert got[0] == pytest.approx(1.0, abs=0.01)


def _rec(**kw: str) -> dict[str, str]:
    base = {
        "hardware": "b200",
        "framework": "sglang",
        "disagg": "false",
        "model": "dsr1",
        "precision": "fp4",
        "spec_method": "none",
        "decode_tp": "4",
        "conc": "4",
        "date": "2026-03-25",
    }
    return {**base, **kw}


def test_launch_flags_follow_the_scripts_concurrency_rule() -> None:
    assert blackwell_sglang_launch(_rec())["recv_interval"] == 10
    assert blackwell_sglang_launch(_rec(conc="16"))["recv_interval"] == 30
    fp8_tp4 = blackwell_sglang_launch(_rec(precision="fp8", conc="32"))
    assert fp8_tp4 == {
        "recv_interval": 10,
        "max_num_batched_tokens": 8192,
        "max_prefill_tokens": 8192,
        "max_num_seqs": 32,
        "flashinfer_fp8_gemm": True,
    }
    mtp = blackwell_sglang_launch(_rec(precision="fp8", spec_method="mtp", decode_tp="8"))
    assert (mtp["max_num_batched_tokens"], mtp["max_num_seqs"]) == (16384, 512)
    assert mtp["overlap_scheduler"] is False  # SGLANG_ENABLE_SPEC_V2 set but not exported
    assert "overlap_scheduler" not in blackwell_sglang_launch(_rec(precision="fp8"))
    assert "memory_fraction" not in mtp  # not read here
    # Other systems, engines, modes, and days before the scripts carried the flag: nothing.
    assert blackwell_sglang_launch(_rec(hardware="h200")) == {}
    assert blackwell_sglang_launch(_rec(framework="trt")) == {}
    assert blackwell_sglang_launch(_rec(disagg="true")) == {}
    assert blackwell_sglang_launch(_rec(hardware="b300", date="2026-04-01")) == {}


def test_engine_option_lengthens_ttft_and_is_sglang_only() -> None:
    kw = dict(
        gpu="h100-sxm",
        engine="sglang",
        input_len=900,
        output_len=900,
        input_cv=0.06,
        output_cv=0.06,
        concurrency=4,
        num_requests=40,
    )
    base = infer("llama3.1-8b", **kw).to_dict()["options"][0]
    slow = infer("llama3.1-8b", engine_options={"recv_interval": 30}, **kw)
    polled = slow.to_dict()["options"][0]
    # Light load: nearly every arrival waits ~14.5 decode iterations more.
    extra = polled["ttft_ms"] - base["ttft_ms"]
    assert 10.0 * base["tpot_ms"] < extra < 16.0 * base["tpot_ms"]
    with pytest.raises(InputError, match="recv_interval"):
        infer("llama3.1-8b", **{**kw, "engine": "vllm"}, engine_options={"recv_interval": 30})


def test_fixed_lengths_simulation_waits_for_the_poll_in_phase() -> None:
    """A fixed-length cohort moves in step with the poll grid, anchored at its own prefill: it
    completes after OSL - 1 decode iterations and waits for the next multiple of the interval."""

    def extra(osl: int) -> float:
        kw = dict(gpu="h100-sxm", engine="sglang", input_len=900, output_len=osl, concurrency=4)
        base = infer("llama3.1-8b", **kw).to_dict()["options"][0]
        polled = infer("llama3.1-8b", engine_options={"recv_interval": 10}, **kw)
        return float(
            (polled.to_dict()["options"][0]["ttft_ms"] - base["ttft_ms"]) / base["tpot_ms"]
        )

    assert extra(201) == pytest.approx(0.0, abs=0.05)  # 200 decode iterations: on a poll
    assert 4.5 < extra(205) < 6.5  # 204: six more to the poll at 210
