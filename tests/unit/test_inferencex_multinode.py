"""gpuscale.validation.inferencex_multinode: the MTP draft count of a held-out disaggregated
record, read from the multi-node entry of InferenceX's configuration it ran."""

from __future__ import annotations

import re

import pytest

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    COLUMNS,
    MTP_UNKNOWN,
    ROW_SYSTEMS,
    load_records,
    read_record,
)
from gpuscale.validation.inferencex_multinode import (
    MTP_RECIPES_FILE,
    load_multinode_recipes,
    multinode_draft_tokens,
)
from gpuscale.validation.inferencex_tables import InferenceXTables
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes

SERVING = DATA_DIR / "serving"
LINES = load_multinode_recipes(SERVING / MTP_RECIPES_FILE)
RECIPES = load_recipes(SERVING / RECIPES_FILE)


def _record(**kw: str) -> dict[str, str]:
    """B200 Dynamo-TensorRT-LLM FP8 MTP 1k/1k at 1024 on 2026-03-23: one prefill worker TP8 EP8
    attention DP, four decode workers DEP8 (the entry of
    ``ctx1_gen4_dep8_batch256_eplb0_mtp3_1024.yaml``)."""
    rec = {
        "page_offset": "0",
        "hardware": "b200",
        "framework": "dynamo-trt",
        "model": "dsr1",
        "precision": "fp8",
        "spec_method": "mtp",
        "disagg": "true",
        "is_multinode": "true",
        "prefill_tp": "8",
        "prefill_ep": "8",
        "prefill_dp_attention": "true",
        "prefill_num_workers": "1",
        "decode_tp": "8",
        "decode_ep": "8",
        "decode_dp_attention": "true",
        "decode_num_workers": "4",
        "num_prefill_gpu": "8",
        "num_decode_gpu": "32",
        "isl": "1024",
        "osl": "1024",
        "conc": "1024",
        "image": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2",
        "date": "2026-03-23",
        "run_url": "1/1",
        "mean_ttft": "1.0",
        "median_ttft": "0.9",
        "p99_ttft": "2.0",
        "mean_tpot": "0.02",
        "median_tpot": "0.02",
        "p99_tpot": "0.03",
        "mean_itl": "0.02",
        "median_itl": "0.02",
        "mean_e2el": "20.0",
        "median_e2el": "20.0",
        "tput_per_gpu": "1000",
        "output_tput_per_gpu": "",
        "input_tput_per_gpu": "",
    }
    rec.update(kw)
    assert list(rec) == COLUMNS
    return rec


def _drafts(rec: dict[str, str], lines: list[dict[str, str]] = LINES) -> tuple:
    system = ROW_SYSTEMS.get(rec["hardware"], rec["hardware"])
    return multinode_draft_tokens(rec, system, lines)


def test_a_record_reads_its_recipes_draft_count() -> None:
    kw, note, why = _drafts(_record())
    # ...and its decode cap: max_batch_size 256 per attention rank.
    assert not why and kw == {"speculative": "mtp", "draft_tokens": 3, "decode_batch": 256}
    assert "ctx1_gen4_dep8_batch256_eplb0_mtp3_1024.yaml@d3f037578" in note
    row = read_record(_record(), InferenceXTables(recipes=RECIPES, mtp_recipes=LINES))
    assert row.expressible, row.reason
    assert (row.kwargs["speculative"], row.kwargs["draft_tokens"]) == ("mtp", 3)
    assert (row.kwargs["decode_workers"], row.kwargs["decode_attention_dp"]) == (4, 8)
    # Without the table the record keeps the general reason.
    assert read_record(_record(), InferenceXTables(recipes=RECIPES)).reason == MTP_UNKNOWN


@pytest.mark.parametrize(
    ("change", "drafts"),
    [
        # SGLang recipes: speculative-num-steps (EAGLE chain, top-k 1, steps + 1 draft tokens).
        (
            {
                "framework": "dynamo-sglang",
                "decode_num_workers": "2",
                "num_decode_gpu": "16",
                "conc": "512",
                "date": "2026-03-18",
            },
            1,  # recipes/b200-fp8/1k1k/mtp/max-tpt-dep8-1p2d.yaml: 1 step
        ),
        # MoRI-SGLang after 2026-02-19: InferenceX's amd_utils/server.sh turns the entry's
        # DECODE_MTP_SIZE into --speculative-num-steps.
        (
            {
                "hardware": "mi355x",
                "framework": "mori-sglang",
                "isl": "8192",
                "prefill_ep": "1",
                "prefill_dp_attention": "false",
                "decode_ep": "1",
                "decode_dp_attention": "false",
                "decode_num_workers": "2",
                "num_decode_gpu": "16",
                "conc": "64",
                "date": "2026-03-03",
            },
            2,
        ),
    ],
)
def test_sglang_and_mori_entries(change: dict[str, str], drafts: int) -> None:
    kw, _, why = _drafts(_record(**change))
    assert not why and kw["draft_tokens"] == drafts


@pytest.mark.parametrize(
    "change",
    [
        # The srt-slurm recipe's benchmark section runs 5 where the entry's conc-list says 8
        # (trtllm/b300-fp8/8k1k/mtp/ctx1_gen4_tp8_batch1_eplb0_mtp3_8.yaml).
        {
            "hardware": "b300",
            "isl": "8192",
            "prefill_tp": "4",
            "prefill_ep": "1",
            "num_prefill_gpu": "4",
            "decode_ep": "1",
            "decode_dp_attention": "false",
            "conc": "5",
            "date": "2026-02-12",
        },
        # GB200 2025-12, Dynamo's bench.sh: conc-list 18 x 3 decode workers.
        {
            "hardware": "gb200",
            "precision": "fp4",
            "isl": "8192",
            "prefill_tp": "4",
            "prefill_ep": "4",
            "prefill_dp_attention": "false",
            "num_prefill_gpu": "4",
            "decode_num_workers": "3",
            "decode_dp_attention": "false",
            "num_decode_gpu": "24",
            "conc": "54",
            "date": "2025-12-19",
        },
    ],
)
def test_concurrency_the_launched_benchmark_runs(change: dict[str, str]) -> None:
    rec = _record(**change)
    kw, note, why = _drafts(rec)
    assert not why and kw["draft_tokens"] == 3, why
    line = next(
        ln
        for ln in LINES
        if f"{ln['recipe']}@{ln['config_commit']}" in note
        and (ln["isl"], ln["decode_workers"]) == (rec["isl"], rec["decode_num_workers"])
    )
    assert rec["conc"] not in line["concurrencies"].split()
    assert rec["conc"] in line["run_concurrencies"].split()


def test_no_entry_on_the_records_day_or_shape_gives_a_reason() -> None:
    for change in ({"date": "2026-01-05"}, {"conc": "1000"}, {"decode_num_workers": "3"}):
        kw, _, why = _drafts(_record(**change))
        assert not kw and "no MTP entry" in why and "\n" not in why
    # A GPU/framework/precision the table has no line for: the caller's general reason.
    assert _drafts(_record(hardware="mi300x")) == ({}, "", "")


def test_disagreeing_entries_leave_the_record_not_expressible() -> None:
    (hit,) = [ln for ln in LINES if "ctx1_gen4_dep8_batch256_eplb0_mtp3_1024" in ln["recipe"]]
    other = {**hit, "draft_tokens": "1", "recipe": "recipes/other.yaml"}
    kw, _, why = _drafts(_record(), [hit, other])
    assert not kw and "different draft counts (1, 3)" in why
    row = read_record(_record(), InferenceXTables(recipes=RECIPES, mtp_recipes=[hit, other]))
    assert not row.expressible and row.reason == why


def test_an_entry_whose_recipe_was_not_read_gives_its_reason() -> None:
    # MI355X MoRI-SGLang before 2026-02-19: the launch script cloned an sglang_disagg commit
    # that is not in the public snapshot read, so DECODE_MTP_SIZE's meaning is not on file.
    rec = _record(
        hardware="mi355x",
        framework="mori-sglang",
        prefill_ep="8",
        prefill_dp_attention="false",
        decode_ep="8",
        decode_dp_attention="false",
        decode_num_workers="2",
        num_decode_gpu="16",
        conc="32",
        date="2026-02-06",
    )
    kw, _, why = _drafts(rec)
    assert not kw and "draft count of the matching entry not read" in why


def test_table_lines_are_consistent() -> None:
    assert LINES
    for ln in LINES:
        assert ln["from_day"] <= ln["to_day"] and ln["concurrencies"].split()
        assert ln["draft_source"], ln
        hit = re.search(r"_mtp(\d+)", ln["recipe"])
        if hit and ln["draft_tokens"]:
            # TensorRT-LLM recipe names state num_nextn_predict_layers; the files agree.
            assert int(hit.group(1)) == int(ln["draft_tokens"]), ln


def test_agrees_with_the_hopper_recipes_table_where_both_read() -> None:
    # H100/H200 records the older table expresses: the entry table gives the same count.
    records = [
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if r["disagg"] == "true" and r["spec_method"] == "mtp" and r["hardware"] in ROW_SYSTEMS
    ]
    compared = 0
    for rec in records:
        old = read_record(rec, InferenceXTables(recipes=RECIPES))
        kw, _, _ = _drafts(rec)
        if old.expressible and kw:
            compared += 1
            assert old.kwargs["draft_tokens"] == kw["draft_tokens"], rec
    assert compared >= 40
