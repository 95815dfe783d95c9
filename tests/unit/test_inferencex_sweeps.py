"""gpuscale.validation.inferencex_sweeps: aggregated InferenceX rows whose run swept MTP are read
as MTP deployments."""

from __future__ import annotations

import csv

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_sweeps import SWEEPS_FILE, load_sweeps, mtp_max_num_tokens
from gpuscale.validation.serving_rows import NOT_EXPRESSIBLE, STATED, load, read_rows

SERVING = DATA_DIR / "serving"
ROWS = SERVING / "aiconfigurator_silicon_hopper.csv"
SWEEPS = load_sweeps(SERVING / SWEEPS_FILE)


def _raw(**kw: str) -> dict[str, str]:
    with ROWS.open() as f:
        fields = next(csv.reader(f))
    r = dict.fromkeys(fields, "")
    r.update(
        id="2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep8_0_1",
        silicon_data_source=(
            "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency=4; "
            "measured=2026-01-14T22:26:21Z; wip=False"
        ),
        backend="trtllm",
        backend_version="1.1.0rc2.post2",
        model_path="deepseek-ai/DeepSeek-R1",
        system="h200_sxm",
        precision="fp8",
        mode="agg",
        isl="1024",
        osl="1024",
        gemm_quant_mode="fp8",
        moe_quant_mode="fp8",
        batch_size="4",
        tp_size="8",
        pp_size="1",
        attention_dp_size="1",
        moe_tp_size="1",
        moe_ep_size="8",
        silicon_ttft_ms="494.0",
        silicon_tpot_ms="8.58",
    )
    r.update(kw)
    return r


def test_the_mtp_sweep_of_392_is_read_as_mtp() -> None:
    (row,) = read_rows([_raw()], sweeps=SWEEPS)
    assert row.kind == STATED and row.expressible
    # dsr1_fp8_h200_trt_mtp_slurm.sh: MTP=3 without attention DP, and its token budget
    # ((3 + 1) x 4 + 1843 + 127) // 64 x 64
    assert (row.kwargs["speculative"], row.kwargs["draft_tokens"]) == ("mtp", 3)
    assert row.kwargs["engine_options"]["max_num_batched_tokens"] == 1984
    assert (row.kwargs["tp"], row.kwargs["ep"], row.kwargs["concurrency"]) == (8, 8, 4)
    assert any("bf3456727" in a for a in row.assumptions)


def test_mtp_budget_by_hand() -> None:
    # attention DP: MTP=1, MAX_BATCH_SIZE = CONC / TP = 32, MAX_ISL = 1843 at 1k
    assert mtp_max_num_tokens(1024, 256, 8, True) == (2 * 32 + 1843 + 127) // 64 * 64
    assert mtp_max_num_tokens(8192, 4, 8, False) == (4 * 4 + 14746 + 127) // 64 * 64


def test_without_the_sweeps_the_same_row_was_read_as_a_plain_run() -> None:
    # what the loader did before: the MTP run priced as a non-speculative engine
    (row,) = read_rows([_raw()])
    assert row.kind == STATED


def test_the_evals_only_sweep_of_587_ran_one_plain_and_one_mtp_entry() -> None:
    # mark_eval_entries keeps 1k/8k at the highest concurrency per TP extreme and spec-decoding:
    # plain TP8 EP8 at 64 (the row is read as it ran), MTP TP8 EP8 attention DP at 256 (MTP 1)
    src = "source_file=2026-03-25.csv; silicon_concurrency=64; measured=2026-01-28T06:18:44Z"
    plain = _raw(osl="8192", batch_size="64", silicon_data_source=src)
    mtp = _raw(
        osl="8192",
        batch_size="256",
        tp_size="1",
        attention_dp_size="8",
        silicon_data_source=src.replace("=64;", "=256;"),
    )
    a, b = read_rows([plain, mtp], sweeps=SWEEPS)
    assert a.kind == STATED and "speculative" not in a.kwargs
    assert b.kind == STATED and (b.kwargs["speculative"], b.kwargs["draft_tokens"]) == ("mtp", 1)
    assert any("e28c038f8" in n for n in b.assumptions)


def test_a_run_that_swept_both_at_the_rows_shape_leaves_it_unknown() -> None:
    both = [dict(e, spec=spec) for e in SWEEPS[:1] for spec in ("none", "mtp")]
    (row,) = read_rows([_raw()], sweeps=both)
    assert row.kind == NOT_EXPRESSIBLE and "swept both" in row.reason
    assert "dsr1-fp8-h200-trt-mtp" in row.reason


def test_other_days_models_and_sources_are_untouched() -> None:
    before_mtp = _raw(silicon_data_source="source_file=2026-04-06.csv; measured=2025-11-02")
    other_model = _raw(model_path="openai/gpt-oss-120b")
    dump = _raw(silicon_data_source="db-dump/2026-04-27; measured=2026-01-14T00:00:00.000Z")
    rows = read_rows([before_mtp, other_model, dump], sweeps=SWEEPS)
    assert [r.kind for r in rows] == [STATED] * 3
    assert not any("speculative" in r.kwargs for r in rows)


def test_a_row_the_days_run_did_not_sweep_is_unknown() -> None:
    # #392 measured only MTP entries for H200 TensorRT-LLM DeepSeek-R1 (up to 256 in flight): a
    # row of that run at 512 matches none of them, so what it ran is not known; it is read
    # neither as a plain run nor as MTP.
    beyond = _raw(
        batch_size="512",
        silicon_data_source="source_file=2026-03-25.csv; "
        "silicon_concurrency=512; measured=2026-01-14T22:26:21Z",
    )
    (row,) = read_rows([beyond], sweeps=SWEEPS)
    assert row.kind == NOT_EXPRESSIBLE and "swept no entry" in row.reason
    assert "bf3456727" in row.reason and row.guess["concurrency"] == 512


def test_two_sweeps_of_one_day_are_both_named() -> None:
    # measured= gives the day only: a second MTP sweep of 2026-01-14 (hypothetical) is named
    # beside #392 instead of failing the loader.
    second = [dict(SWEEPS[0], commit="0000000aa", pr="999")]
    (row,) = read_rows([_raw()], sweeps=SWEEPS + second)
    assert row.kind == STATED and row.kwargs["speculative"] == "mtp"
    notes = " ".join(row.assumptions)
    assert "bf3456727" in notes and "0000000aa" in notes


def test_public_rows_of_the_mtp_runs() -> None:
    rows = [r for r in load(ROWS) if r.mode == "agg" and "speculative" in r.kwargs]
    assert len(rows) == 42 and all(r.raw["backend"] == "trtllm" for r in rows)
    assert all(r.kind == STATED for r in rows)
    # MTP 3 without attention DP, MTP 1 with it (the script's rule)
    assert all(r.kwargs["draft_tokens"] == (1 if r.kwargs["attention_dp"] > 1 else 3) for r in rows)
    days = {r.raw["silicon_data_source"].split("measured=")[1][:10] for r in rows}
    assert days == {"2026-01-14", "2026-01-28"}
    # the 1k/8k C = 64 run of 2026-01-28 is the plain entry (TPOT 32.2 ms, the model 33.1)
    assert not any(
        r.concurrency == 64 and "2026-01-28" in r.raw["silicon_data_source"] for r in rows
    )
    # the sweep of #392 is every H200 TensorRT-LLM DeepSeek-R1 row measured that day
    with ROWS.open() as f:
        that_day = [
            r["id"]
            for r in csv.DictReader(f)
            if r["backend"] == "trtllm"
            and r["mode"] == "agg"
            and "measured=2026-01-14" in r["silicon_data_source"]
            and r["silicon_data_source"].startswith("source_file=")
        ]
    assert set(that_day) <= {r.id for r in rows}
    # their TPOT is what speculation gives: at 1k/1k C=4 the MTP run decodes 8.58 ms per
    # token, the same deployment's non-speculative run (config 181, 2025-12-15) 13.82
    c4 = [
        r for r in rows if r.concurrency == 4 and r.raw["osl"] == "1024" and r.raw["isl"] == "1024"
    ]
    assert {round(r.tpot_ms, 2) for r in c4} == {8.58}


def test_scripts_table_lines_are_sourced_and_one_count_per_day() -> None:
    from gpuscale.validation.inferencex_sweeps import SCRIPTS_FILE, load_scripts

    lines = load_scripts(SERVING / SCRIPTS_FILE)
    assert lines
    for s in lines:
        assert s["script"].startswith("benchmarks/") and s["script"].endswith(".sh")
        assert len(s["commit"]) >= 9 and int(s["commit"], 16) >= 0
        assert s["from_day"] <= s["to_day"] and s["attention_dp"] in ("true", "false")
        assert int(s["draft_tokens"]) >= 1
    # Versions of one script overlap on their boundary day only, where the reader refuses a
    # record if their counts differ (ATOM FP8 on 2026-04-01: 1 and 3).
    for a in lines:
        for b in lines:
            same = ("system", "backend", "model", "precision", "attention_dp")
            overlap = a["from_day"] <= b["to_day"] and b["from_day"] <= a["to_day"]
            if a is not b and all(a[k] == b[k] for k in same) and overlap:
                assert a["to_day"] == b["from_day"] or b["to_day"] == a["from_day"], (a, b)


def test_script_draft_tokens_by_day_and_attention_dp() -> None:
    from gpuscale.validation.inferencex_sweeps import (
        SCRIPTS_FILE,
        load_scripts,
        script_draft_tokens,
    )

    lines = load_scripts(SERVING / SCRIPTS_FILE)
    r = {
        "system": "b200",
        "backend": "trtllm",
        "model_path": "deepseek-ai/DeepSeek-R1",
        "precision": "fp8",
    }
    kw = {"tp": 8, "ep": 8, "attention_dp": 1, "concurrency": 64}
    assert script_draft_tokens(r, "2026-01-14", kw, lines)[0]["draft_tokens"] == 3
    assert script_draft_tokens(r, "2026-01-14", {**kw, "attention_dp": 8}, lines)[0] == {
        "speculative": "mtp",
        "draft_tokens": 1,
    }
    assert script_draft_tokens(r, "2026-01-13", kw, lines) == ({}, "", "")
    assert script_draft_tokens({**r, "system": "h200_sxm"}, "2026-01-14", kw, lines) == ({}, "", "")
