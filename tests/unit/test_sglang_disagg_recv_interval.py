"""SGLang ``--scheduler-recv-interval`` on disaggregated decode workers: the poll wait a new
request's prefill waits for, its place in the closed loop and the deployment, and the held-out
reader's recipes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale.api import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.planner.serving.disagg_closed_loop import PrefillStage, simulate
from gpuscale.planner.serving.steady_state import decode_poll_wait
from gpuscale.validation.inferencex_api import COLUMNS, read_record
from gpuscale.validation.inferencex_multinode import (
    RECIPE_RECV_INTERVAL,
    default_plain_recipes,
    entry_runs,
    multinode_recv_interval,
)

SGLANG = engine("sglang")


def test_busy_decode_worker_adds_half_the_window_less_the_iteration_in_flight() -> None:
    dec = np.array([0.02, 0.02, 0.02])
    n = np.array([50.0, 1.0, 0.0])
    assert np.all(decode_poll_wait(SGLANG, n, dec) == 0.0)  # interval 1: SGLang's default
    eng = dataclasses.replace(SGLANG, recv_interval=10)
    got = decode_poll_wait(eng, n, dec)
    # Always busy: (10 - 1) / 2 decode iterations; one request on average: busy 1 - e^-1 of
    # the time; idle: the empty loop turns poll at once.
    assert got == pytest.approx([4.5 * 0.02, (1.0 - np.exp(-1.0)) * 4.5 * 0.02, 0.0])


def _stage(t: float) -> PrefillStage:
    return PrefillStage(
        workers=1, ranks=1, rank_tokens=1e9, rank_prompts=8, iteration_s=lambda _: t
    )


def test_later_rounds_wait_for_the_poll_before_their_prefill() -> None:
    kw = dict(
        concurrency=2,
        input_lens=np.full(6, 100.0),
        output_lens=np.full(6, 11.0),
        prefill=_stage(0.2),
        admission_s=0.03,
        decode_slots=np.inf,
        tpot_s=0.01,
    )
    base = simulate(**kw)  # type: ignore[arg-type]
    polled = simulate(**kw, ready_after_s=0.05)  # type: ignore[arg-type]
    # The burst finds the decode workers idle; each later request starts its prefill later.
    assert polled.ttft_s[:2] == pytest.approx(base.ttft_s[:2])
    assert polled.ttft_s[2:] == pytest.approx(base.ttft_s[2:] + 0.05)


def _disagg(**opts: int) -> dict:
    return infer(
        "llama3.1-8b",
        gpu="h100-sxm",
        engine="sglang",
        input_len=900,
        output_len=900,
        input_cv=0.06,
        output_cv=0.06,
        concurrency=8,
        num_requests=80,
        prefill_workers=1,
        prefill_tp=1,
        decode_workers=1,
        decode_tp=1,
        engine_options=opts or None,
    ).to_dict()["options"][0]


def test_decode_workers_interval_lengthens_disaggregated_ttft() -> None:
    base, polled = _disagg(), _disagg(recv_interval=10)
    extra = polled["ttft_ms"] - base["ttft_ms"]
    # Eight requests decoding: nearly always busy, the later rounds wait ~4.5 decode steps.
    assert 3.0 * base["tpot_ms"] < extra < 5.0 * base["tpot_ms"]
    assert any("receive interval 10" in n for n in polled["notes"])
    assert not any("receive interval" in n for n in base["notes"])


def _record(**kw: str) -> dict[str, str]:
    rec = {
        "framework": "dynamo-sglang",
        "precision": "fp4",
        "isl": "1024",
        "osl": "1024",
        "conc": "8",
        "date": "2026-02-08",
        "spec_method": "none",
        "prefill_num_workers": "1",
        "prefill_tp": "4",
        "prefill_ep": "1",
        "prefill_dp_attention": "false",
        "decode_num_workers": "2",
        "decode_tp": "4",
        "decode_ep": "1",
        "decode_dp_attention": "false",
    }
    return {**rec, **kw}


def test_reader_applies_the_recipes_decode_interval() -> None:
    lines = list(default_plain_recipes())
    opts, note = multinode_recv_interval(_record(), "gb200", lines)
    assert opts == {"recv_interval": 10}
    assert "recipes/gb200-fp4/1k1k/low-latency.yaml" in note
    # GB300 FP8 low-latency: prefill 10, decode 1 ("save mem"): nothing to apply.
    gb300 = _record(precision="fp8", date="2026-02-09", decode_num_workers="4")
    assert multinode_recv_interval(gb300, "gb300", lines) == ({}, "")
    assert RECIPE_RECV_INTERVAL["recipes/gb300-fp8/1k1k/stp/low-latency.yaml"] == (10, 1)
    # A recipe that sets none (max-throughput, attention DP decode), and no matching entry.
    dep = _record(
        conc="2048",
        prefill_num_workers="4",
        prefill_ep="4",
        prefill_dp_attention="true",
        decode_num_workers="1",
        decode_tp="48",
        decode_ep="48",
        decode_dp_attention="true",
    )
    assert [ln["recipe"] for ln in lines if entry_runs(ln, dep, "gb200")] == [
        "recipes/gb200-fp4/1k1k/max-tpt.yaml"
    ]
    assert multinode_recv_interval(dep, "gb200", lines)[0] == {}
    assert multinode_recv_interval(_record(date="2026-01-01"), "gb200", lines) == ({}, "")


def test_reader_refuses_disagreeing_recipes() -> None:
    rec = _record()
    base = next(
        ln for ln in default_plain_recipes() if ln["recipe"].endswith("fp4/1k1k/low-latency.yaml")
    )
    other = {**base, "recipe": "recipes/gb200-fp4/1k1k/max-tpt.yaml"}
    opts, note = multinode_recv_interval(rec, "gb200", [base, other])
    assert opts == {} and note.startswith("no receive interval") and "1, 10" in note


def test_held_out_record_gets_its_recipes_decode_interval() -> None:
    rec = dict.fromkeys(COLUMNS, "")
    rec.update(
        _record(),
        page_offset="0",
        hardware="gb200",
        model="dsr1",
        disagg="true",
        is_multinode="true",
        num_prefill_gpu="4",
        num_decode_gpu="8",
        image="lmsysorg/sglang:v0.5.8-cu130",
        run_url="1/1",
    )
    rec.update({k: "0.1" for k in COLUMNS if k.startswith(("mean_", "median_", "p99_"))})
    row = read_record(rec)
    assert row.expressible, row.reason
    assert row.kwargs["engine_options"]["recv_interval"] == 10
    assert any("scheduler-recv-interval 10" in a for a in row.assumptions)
