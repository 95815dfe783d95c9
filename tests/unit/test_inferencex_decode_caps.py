"""Decode caps of InferenceX's plain multi-node TensorRT-LLM recipes on B200/B300/GB200/GB300
(``gpuscale.validation.inferencex_decode_caps``), read into the held-out records."""

from __future__ import annotations

import csv
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import load_records, read_record, record_id
from gpuscale.validation.inferencex_decode_caps import (
    DECODE_CAPS_FILE,
    RECIPE_NAME,
    decode_cap,
    default_decode_caps,
)

SERVING = DATA_DIR / "serving"
GB300_2253 = "dsr1_gb300_dynamo-trt_fp8_none_disagg_2xtp4ep4dp-1xtp16ep16dp_1024x1024_c2253_"


@functools.cache
def _records() -> list[dict[str, str]]:
    return load_records(SERVING / "inferencex_api_dsr1.csv")


def _record(prefix: str) -> dict[str, str]:
    (rec,) = [r for r in _records() if record_id(r).startswith(prefix)]
    return rec


def test_every_line_agrees_with_its_recipe_name() -> None:
    """Workers, decode GPUs and cap as the recipe's name states them (``ctx{P}_gen{D}_{kind}{N}_
    batch{B}``); the decode attention-DP label may differ only before InferenceX #919."""
    with (SERVING / DECODE_CAPS_FILE).open() as f:
        lines = list(csv.DictReader(f))
    assert len(lines) > 100
    relabelled = 0
    for line in lines:
        if not line["decode_max_batch"]:
            assert not RECIPE_NAME.search(line["recipe"])
            continue
        m = RECIPE_NAME.search(line["recipe"])
        assert m, line["recipe"]
        p, d, kind, n, b = m.groups()
        assert (p, d, n, b) == (
            line["prefill_workers"],
            line["decode_workers"],
            line["decode_tp"],
            line["decode_max_batch"],
        )
        assert line["framework"] == "dynamo-trt"
        assert line["system"] in ("b200", "b300", "gb200", "gb300")
        assert line["from_day"] <= line["to_day"]
        if (kind in ("dep", "dp")) != (line["decode_dp_attn"] == "true"):
            relabelled += 1
            assert line["to_day"] <= "2026-03-23"
    assert relabelled == 2


def test_a_record_past_its_decode_slots_gets_the_cap() -> None:
    """GB300 FP8 1k/1k at 2,253 clients ran ``ctx2_gen1_dep16_batch128_eplb0_mtp0_2253``: 16
    attention-DP ranks x 128 = 2,048 slots (srt-slurm recipe: decode ``max_batch_size: 128``)."""
    rec = _record(GB300_2253)
    cap, notes = decode_cap(rec, default_decode_caps())
    assert cap == {"decode_batch": 128}
    assert "ctx2_gen1_dep16_batch128_eplb0_mtp0_2253.yaml" in notes[0]
    row = read_record(rec)
    assert row.expressible and row.kwargs["decode_batch"] == 128


def test_no_cap_outside_the_entry_days_for_mtp_or_on_disagreement() -> None:
    rec = _record(GB300_2253)
    caps = default_decode_caps()
    assert decode_cap({**rec, "date": "2025-11-01"}, caps) == ({}, [])
    assert decode_cap({**rec, "spec_method": "mtp"}, caps) == ({}, [])
    hits = [dict(line) for line in caps if decode_cap(rec, [line])[0]]
    assert hits
    other = {**hits[0], "decode_max_batch": "64"}
    assert decode_cap(rec, [*hits, other]) == ({}, [])
    unnamed = {**hits[0], "decode_max_batch": ""}
    assert decode_cap(rec, [unnamed]) == ({}, [])


def test_relabelled_decode_attention_dp_follows_the_recipe() -> None:
    """GB200 FP4 8k/1k ``ctx1_gen4_tep8_batch16`` was labelled decode ``dp-attn: true`` until
    InferenceX #919; its recipe runs attention TP: 4 workers x 16 = 64 slots, not 512."""
    recs = [
        r
        for r in _records()
        if r["hardware"] == "gb200"
        and r["framework"] == "dynamo-trt"
        and r["spec_method"] == "none"
        and (r["isl"], r["conc"], r["decode_num_workers"], r["decode_dp_attention"])
        == ("8192", "76", "4", "true")
    ]
    assert recs
    for rec in recs:
        cap, notes = decode_cap(rec, default_decode_caps())
        assert cap == {"decode_batch": 16, "decode_attention_dp": 1}, rec["date"]
        assert "#919" in notes[1]


@settings(max_examples=5, deadline=None)
@given(ttft=st.floats(0.01, 100.0), tpot=st.floats(0.001, 1.0))
def test_the_cap_never_reads_the_measured_latency(ttft: float, tpot: float) -> None:
    rec = _record(GB300_2253)
    moved = {
        **rec,
        "mean_ttft": str(ttft),
        "median_ttft": str(ttft),
        "p99_ttft": str(10 * ttft),
        "mean_tpot": str(tpot),
        "median_tpot": str(tpot),
    }
    assert read_record(moved).kwargs == read_record(rec).kwargs


@pytest.mark.parametrize("prefix", [GB300_2253])
def test_clients_past_the_slots_wait_for_one(prefix: str) -> None:
    """With the cap the clients past the 2,048 slots queue after their prefill: the median TTFT
    rises from the prefill alone to seconds (measured 2.54 s median, 3.61 s mean)."""
    row = read_record(_record(prefix))
    kw = dict(row.kwargs)
    capped = infer(row.model, **kw).to_dict()["options"][0]
    kw.pop("decode_batch")
    free = infer(row.model, **kw).to_dict()["options"][0]
    assert free["ttft_ms_p50"] < 500.0
    assert capped["ttft_ms_p50"] > 2.0 * free["ttft_ms_p50"]
    assert capped["ttft_ms"] > free["ttft_ms"]
