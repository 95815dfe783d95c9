"""SGLang's own running-request cap under speculative decoding: an EAGLE/MTP launch that states
no ``--max-running-requests`` runs with 48 (``ServerArgs._handle_speculative_decoding``, every
0.5.x release read; ``serving_engines.yaml``)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.errors import InputError

R1 = "deepseek-ai/DeepSeek-R1"
LOAD = {
    "gpu": "h200-sxm", "engine": "sglang", "weights": "fp8_block", "tp": 8,
    "input_len": 1024, "output_len": 256, "speculative": "mtp", "draft_tokens": 2,
}  # fmt: skip
CAP_NOTE = "running requests capped at 48"


def _option(**kw):  # type: ignore[no-untyped-def]
    return infer(R1, **{**LOAD, **kw}).to_dict()["options"][0]


def test_profile_takes_the_cap_only_where_the_launch_states_none() -> None:
    sglang = engine("sglang")
    capped = sglang.for_speculation()
    assert (capped.max_num_seqs, capped.stated_running_cap) == (48, True)
    # A stated cap stands, and an engine without the rule is left alone.
    stated = dataclasses.replace(sglang, max_num_seqs=512, stated_running_cap=True)
    assert stated.for_speculation() is stated
    for name in ("vllm", "tensorrt-llm"):
        assert engine(name).for_speculation() is engine(name)


def test_the_cap_splits_over_attention_dp_ranks_as_a_stated_one() -> None:
    # SGLang writes 48 into max_running_requests, which each of the DP ranks divides.
    rank = engine("sglang").for_speculation().per_attention_rank(8)
    assert rank.max_num_seqs == 6


def test_an_uncapped_mtp_launch_queues_above_48_requests() -> None:
    o = _option(concurrency=128)
    assert o["running_requests_per_rank"] <= 48.0
    assert o["saturated"], "128 requests in flight against 48 slots queue"
    assert any(CAP_NOTE in n for n in o["notes"])
    # The launch's own cap lifts it: more requests run, the queue is gone, no note.
    stated = _option(concurrency=128, engine_options={"max_num_seqs": 256})
    assert stated["running_requests_per_rank"] > 100.0
    assert stated["ttft_ms"] < 0.5 * o["ttft_ms"]
    assert not any(CAP_NOTE in n for n in stated["notes"])


def test_no_cap_without_speculation_or_below_it() -> None:
    plain = _option(concurrency=128, speculative="none", draft_tokens=None)
    assert plain["running_requests_per_rank"] > 100.0
    assert not any(CAP_NOTE in n for n in plain["notes"])
    # Below the cap the client never waits for a slot.
    low = _option(concurrency=16)
    assert not low["saturated"]


def test_disaggregated_decode_workers_take_it_unless_their_cap_is_stated() -> None:
    kw = {k: v for k, v in LOAD.items() if k != "tp"}
    pools = {"prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1, "decode_tp": 8}
    o = infer(R1, **kw, **pools, concurrency=128).to_dict()["options"][0]
    assert o["decode_batch"] == 48 and o["saturated"]
    assert any("capped at 48 per decode worker" in n for n in o["notes"])
    # Attention-DP ranks each take their share of it.
    dp = {**pools, "decode_ep": 8, "decode_attention_dp": 8}
    assert infer(R1, **kw, **dp, concurrency=128).to_dict()["options"][0]["decode_batch"] == 6
    # A stated decode cap stands, without the note.
    stated = infer(R1, **kw, **pools, concurrency=128, decode_batch=128).to_dict()["options"][0]
    assert stated["decode_batch"] == 128
    assert stated["ttft_ms"] < 0.5 * o["ttft_ms"]
    assert not any(CAP_NOTE in n for n in stated["notes"])


def test_the_note_names_each_ranks_share() -> None:
    o = _option(concurrency=64, ep=8, attention_dp=8)
    assert o["running_requests_per_rank"] <= 6.0
    assert any("48 per engine (6 per attention rank, 48 in all)" in n for n in o["notes"])
    # 48 over 32 decode ranks: one each, 32 in all.
    kw = {k: v for k, v in LOAD.items() if k != "tp"}
    pools = {"prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1}
    dp32 = {"decode_tp": 32, "decode_ep": 32, "decode_attention_dp": 32, "gpu": "b200"}
    d = infer(R1, **{**kw, **pools, **dp32}, concurrency=64).to_dict()["options"][0]
    assert d["decode_batch"] == 1
    assert any("(1 per attention rank, 32 in all)" in n for n in d["notes"])


@pytest.mark.parametrize("where", ["aggregated", "decode"])
def test_more_attention_dp_ranks_than_the_cap_is_refused(where: str) -> None:
    # SGLang asserts each rank's share of max_running_requests is positive (tp_worker.py).
    kw = {k: v for k, v in LOAD.items() if k != "tp"}
    big = {"ep": 64, "attention_dp": 64, "tp": 64} if where == "aggregated" else {
        "prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1,
        "decode_tp": 64, "decode_ep": 64, "decode_attention_dp": 64,
    }  # fmt: skip
    with pytest.raises(InputError, match="leaves 0 per rank"):
        infer(R1, **{**kw, **big, "gpu": "b200"}, concurrency=64)
    # The launch's own cap is accepted (with its memory fraction: SGLang's default rule leaves
    # 64 DP ranks no room for KV, a refusal of its own).
    fraction = {"memory_fraction": 0.85}
    stated = (
        {"engine_options": {"max_num_seqs": 512, **fraction}}
        if where == "aggregated"
        else {"decode_batch": 8, "engine_options": fraction}
    )
    o = infer(R1, **{**kw, **big, **stated, "gpu": "b200"}, concurrency=64).to_dict()
    assert o["options"][0]["ttft_ms"] > 0
