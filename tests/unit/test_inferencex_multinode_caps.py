"""gpuscale.validation.inferencex_multinode.multinode_decode_cap: the decode cap per attention
rank of a held-out non-MTP disaggregated record, read from the multi-node entry of InferenceX's
configuration it ran (inferencex_disagg_plain_recipes.csv)."""

from __future__ import annotations

import re

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    ROW_SYSTEMS,
    load_records,
    read_record,
    record_id,
)
from gpuscale.validation.inferencex_multinode import (
    PLAIN_RECIPES_FILE,
    load_multinode_recipes,
    multinode_decode_cap,
)
from gpuscale.validation.inferencex_tables import InferenceXTables
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes

SERVING = DATA_DIR / "serving"
LINES = load_multinode_recipes(SERVING / PLAIN_RECIPES_FILE)
RECIPES = load_recipes(SERVING / RECIPES_FILE)
RECORDS = {record_id(r): r for r in load_records(SERVING / "inferencex_api_dsr1.csv")}

B300_TEP8_BATCH1 = (
    "dsr1_b300_dynamo-trt_fp4_none_disagg_1xtp2ep2dp-4xtp8ep8_1024x1024_c6_run21446488308/1"
)
"""B300 FP4 1k/1k at concurrency 6 on 2026-01-28: one TP2 attention-DP prefill worker, four TEP8
decode workers, the entry launching ``ctx1_gen4_tep8_batch1_eplb0_mtp0.yaml`` (decode
``max_batch_size: 1``): 4 slots for 6 requests."""
B200_SGLANG_DEP8 = (
    "dsr1_b200_dynamo-sglang_fp4_none_disagg_1xtp4ep4dp-1xtp8ep8dp_1024x1024_c512_run21888944497/1"
)
"""B200 FP4 Dynamo-SGLang 1k/1k at 512: ``max-tpt-dep4-1p-dep8-1d.yaml``, decode
``max-running-requests: 1024`` over ``dp-size: 8`` = 128 per attention rank."""
B300_FP8_C12 = (
    "dsr1_b300_dynamo-trt_fp8_none_disagg_1xtp4ep1dp-8xtp8ep1_1024x1024_c12_run21788616563/1"
)
"""Its recipe ``ctx1_gen8_tp8_batch64_eplb0_mtp0_12.yaml`` set ``max_batch_size: 64`` (srt-slurm
75f6e32, 2026-01-27) and later 1 (5063eb4): the versions disagree."""


def _cap(rec: dict[str, str], lines: list[dict[str, str]] = LINES) -> tuple:
    return multinode_decode_cap(rec, ROW_SYSTEMS.get(rec["hardware"], rec["hardware"]), lines)


def _line(rec: dict[str, str]) -> dict[str, str]:
    (hit,) = [ln for ln in LINES if _cap(rec, [ln])[0]]
    return hit


def test_a_record_reads_its_recipes_decode_cap() -> None:
    rec = RECORDS[B300_TEP8_BATCH1]
    kw, notes = _cap(rec)
    assert kw == {"decode_batch": 1}
    assert "ctx1_gen4_tep8_batch1_eplb0_mtp0.yaml@" in notes[0]
    row = read_record(rec, InferenceXTables(recipes=RECIPES, plain_recipes=LINES))
    assert row.expressible and row.kwargs["decode_batch"] == 1
    assert row.kwargs["concurrency"] > 1 * row.kwargs["decode_workers"]  # the cap binds
    assert (
        read_record(rec, InferenceXTables(recipes=RECIPES)).kwargs == row.kwargs
    )  # the project's table by default


def test_sglang_cap_is_per_attention_rank() -> None:
    rec = RECORDS[B200_SGLANG_DEP8]
    kw, notes = _cap(rec)
    assert kw == {"decode_batch": 128}
    assert "max-tpt-dep4-1p-dep8-1d.yaml" in notes[0]
    # Only this table reads SGLang recipes: without it the record has no cap.
    plain = read_record(rec, InferenceXTables(recipes=RECIPES, plain_recipes=[]))
    assert plain.expressible and "decode_batch" not in plain.kwargs
    assert read_record(rec, InferenceXTables(recipes=RECIPES)).kwargs["decode_batch"] == 128


def test_disagreeing_entries_give_no_cap_and_say_so() -> None:
    rec = RECORDS[B300_TEP8_BATCH1]
    hit = _line(rec)
    other = {**hit, "decode_max_batch": "64", "recipe": "other.yaml"}
    kw, notes = _cap(rec, [hit, other])
    assert kw == {} and "different caps (1, 64" in notes[0]
    row = read_record(rec, InferenceXTables(recipes=RECIPES, plain_recipes=[hit, other]))
    assert row.expressible and "decode_batch" not in row.kwargs
    assert any("different caps" in a for a in row.assumptions)
    # The table's own case: two versions of one recipe file with different caps (the name's
    # cap, inferencex_decode_caps, is one of them).
    kw, notes = _cap(RECORDS[B300_FP8_C12])
    assert kw == {} and "different caps (1, 64" in notes[0]
    assert (
        "decode_batch"
        not in read_record(RECORDS[B300_FP8_C12], InferenceXTables(recipes=RECIPES)).kwargs
    )


def test_unread_cap_or_no_match() -> None:
    rec = RECORDS[B300_TEP8_BATCH1]
    hit = _line(rec)
    kw, notes = _cap(rec, [{**hit, "decode_max_batch": "", "cap_source": "launcher not read"}])
    assert kw == {} and "not on file (launcher not read)" in notes[0]
    # Another day, concurrency or decode worker count, or an MTP record: no entry, no note.
    for change in (
        {"date": "2025-01-01"},
        {"conc": "7"},
        {"decode_num_workers": "5"},
        {"spec_method": "mtp"},
    ):
        assert _cap({**rec, **change}, [hit]) == ({}, [])


def test_table_lines_are_consistent() -> None:
    for ln in LINES:
        assert ln["from_day"] <= ln["to_day"]
        if ln["decode_max_batch"]:
            assert int(ln["decode_max_batch"]) >= 1
            assert re.match(r"[\w.-]+/[\w.-]+@[0-9a-f]{12} ", ln["cap_source"]), ln
            assert ln["run_concurrencies"]
        else:
            assert ln["cap_source"]


def test_agrees_with_the_hopper_recipes_table_where_both_read() -> None:
    """The H100/H200 records the recipes table caps (read from one configuration commit and the
    recipe names) get the same cap from this table (every entry version, the recipes' files)."""
    n = 0
    for rec in RECORDS.values():
        if rec["disagg"] != "true" or rec["spec_method"] != "none":
            continue
        if rec["hardware"] not in ("h100", "h200"):
            continue
        old = read_record(rec, InferenceXTables(recipes=RECIPES))
        if not old.expressible or "decode_batch" not in old.kwargs:
            continue
        assert _cap(rec)[0] == {"decode_batch": old.kwargs["decode_batch"]}, rec
        n += 1
    assert n >= 40
