"""gpuscale.validation.serving_rows: what deployment each measured serving row is read as."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_clients import client_lengths, client_requests, uniform_lengths
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes
from gpuscale.validation.serving_rows import NOT_EXPRESSIBLE, RECIPE, STATED, TWIN, load, read_rows

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"

FIELDS = [
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "prefill_batch_size",
    "prefill_num_workers",
    "prefill_tp_size",
    "prefill_pp_size",
    "prefill_attention_dp_size",
    "prefill_moe_tp_size",
    "prefill_moe_ep_size",
    "decode_batch_size",
    "decode_num_workers",
    "decode_tp_size",
    "decode_pp_size",
    "decode_attention_dp_size",
    "decode_moe_tp_size",
    "decode_moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]


def _row(**kw: str) -> dict[str, str]:
    r = dict.fromkeys(FIELDS, "")
    r.update(
        id="r",
        silicon_data_source="x=1",
        backend="trtllm",
        model_path="deepseek-ai/DeepSeek-R1",
        system="h200_sxm",
        mode="disagg",
        isl="1024",
        osl="1024",
        gemm_quant_mode="fp8",
        prefill_tp_size="8",
        prefill_moe_ep_size="8",
        decode_tp_size="8",
        decode_moe_ep_size="8",
        silicon_ttft_ms="1000.0",
        silicon_tpot_ms="20.0",
    )
    r.update(kw)
    return r


def _named(**kw: str) -> dict[str, str]:
    return _row(
        id="named",
        prefill_num_workers="2",
        prefill_batch_size="1",
        decode_num_workers="3",
        decode_tp_size="1",
        decode_attention_dp_size="8",
        decode_batch_size="4",
        **kw,
    )


def test_named_row_keeps_its_workers_and_drops_the_prefill_batch() -> None:
    (row,) = read_rows([_named(silicon_data_source="silicon_concurrency=96")])
    assert row.kind == STATED and row.expressible
    assert row.concurrency == 96
    kw = row.kwargs
    assert (kw["prefill_workers"], kw["prefill_tp"], kw["prefill_ep"]) == (2, 8, 8)
    # decode: tp 1 x attention-DP 8 = 8 GPUs per worker, 4 running requests per rank
    assert (kw["decode_workers"], kw["decode_tp"], kw["decode_attention_dp"]) == (3, 8, 8)
    # AIConfigurator's batch sizes are its modelling inputs (prefill 1; decode = concurrency /
    # (workers x attention-DP)), not engine caps
    assert "prefill_batch" not in kw and "decode_batch" not in kw


def test_row_without_concurrency_is_not_expressible_and_guessed_as_aiconfigurator_reads_it() -> (
    None
):
    (row,) = read_rows([_named()])
    assert row.kind == NOT_EXPRESSIBLE and row.kwargs == {}
    assert "concurrency not stated" in row.reason
    # the comparison reading: decode batch 4 x 3 decode workers x 8 attention-DP ranks
    assert row.guess["concurrency"] == 4 * 3 * 8
    assert row.guess["decode_workers"] == 3 and row.guess["prefill_workers"] == 2


def test_twin_takes_the_named_rows_deployment() -> None:
    named = _named(silicon_data_source="silicon_concurrency=96")
    twin = _row(id="twin", silicon_data_source="silicon_concurrency=96")
    rows = {r.id: r for r in read_rows([twin, named])}
    assert rows["twin"].kind == TWIN
    assert rows["twin"].kwargs["decode_workers"] == 3
    assert rows["twin"].kwargs["decode_attention_dp"] == 8
    assert any("named" in a for a in rows["twin"].assumptions)


@pytest.mark.parametrize(
    "change",
    [
        {"silicon_ttft_ms": "1000.5"},  # a different measurement
        {"silicon_data_source": "silicon_concurrency=48"},  # another load point
        {"isl": "8192"},
        {"backend": "sglang"},
    ],
)
def test_row_without_workers_or_identical_twin_is_not_expressible(change: dict[str, str]) -> None:
    named = _named(silicon_data_source="silicon_concurrency=96")
    lone = _row(id="lone", **{"silicon_data_source": "silicon_concurrency=96", **change})
    rows = {r.id: r for r in read_rows([lone, named])}
    assert rows["lone"].kind == NOT_EXPRESSIBLE and not rows["lone"].expressible
    assert rows["lone"].kwargs == {}
    assert "worker counts not stated" in rows["lone"].reason
    # compared, apart, as one worker of each kind
    assert rows["lone"].guess["prefill_workers"] == rows["lone"].guess["decode_workers"] == 1


def test_aggregated_rows_are_stated() -> None:
    agg = _row(mode="agg", batch_size="16", tp_size="8", moe_tp_size="1", moe_ep_size="8")
    (row,) = read_rows([agg])
    assert row.kind == STATED and row.concurrency == 16
    assert (row.kwargs["tp"], row.kwargs["ep"], row.kwargs["pp"]) == (8, 8, 1)
    assert "decode_workers" not in row.kwargs


def test_public_rows_classes() -> None:
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    disagg = [r for r in rows if r.mode == "disagg"]
    # aggregated rows are stated but for the 9 InferenceX gpt-oss H100 vLLM rows recorded at
    # the client's cap of 512 (client_cap_only), 3 TPs x 3 length pairs
    refused = [r for r in rows if r.mode == "agg" and r.kind != STATED]
    assert all(r.kind == NOT_EXPRESSIBLE and r.guess for r in refused)
    capped = [r for r in refused if "client's cap" in r.reason]
    # the H200 TensorRT-LLM DeepSeek-R1 runs of InferenceX's MTP sweeps are read as MTP
    # deployments (tests/unit/test_inferencex_sweeps.py), not refused
    assert not [r for r in refused if r not in capped]
    assert len(capped) == 9
    assert {(r.raw["backend"], r.raw["system"], r.concurrency) for r in capped} == {
        ("vllm", "h100_sxm", 512)
    }
    assert {(r.raw["isl"], r.raw["osl"]) for r in capped} == {
        ("1024", "1024"),
        ("1024", "8192"),
        ("8192", "1024"),
    }
    kinds = {k: sum(r.kind == k for r in disagg) for k in (STATED, TWIN, RECIPE, NOT_EXPRESSIBLE)}
    # 43 rows name their workers, 7 of them without a client concurrency; every twin is one
    # of the rows that leave the workers empty
    assert sum(bool(r.raw["prefill_num_workers"]) for r in disagg) == 43
    assert kinds[STATED] == 36
    assert all(r.guess for r in disagg if r.kind == NOT_EXPRESSIBLE)
    assert kinds[TWIN] > 0 and kinds[RECIPE] > 0 and sum(kinds.values()) == len(disagg)
    for r in disagg:
        if r.kind in (TWIN, RECIPE):
            assert not r.raw["prefill_num_workers"]


def _agg(**kw: str) -> dict[str, str]:
    return _row(
        mode="agg",
        prefill_tp_size="",
        prefill_moe_ep_size="",
        decode_tp_size="",
        decode_moe_ep_size="",
        **kw,
    )


def test_concurrency_is_the_clients_not_the_per_rank_batch() -> None:
    # TRT-LLM TP8 with attention DP 8: batch_size 32 per rank, the client ran 256
    # (AIConfigurator: concurrency = batch_size x attention_dp_size).
    stated = _agg(
        silicon_data_source="silicon_concurrency=256",
        batch_size="32",
        tp_size="1",
        attention_dp_size="8",
        moe_tp_size="1",
        moe_ep_size="8",
    )
    unstated = {**stated, "id": "u", "silicon_data_source": "x=1"}
    a, b = read_rows([stated, unstated])
    assert a.concurrency == 256 and b.concurrency == 32 * 8
    assert (a.kwargs["tp"], a.kwargs["attention_dp"], a.kwargs["ep"]) == (8, 8, 8)


@pytest.mark.parametrize(
    ("fields", "launch", "expect"),
    [
        # 2026-04-06 export of `--tp 8 --ep 8` with attention DP: tp 1, attention DP 64, moe 8 x 8
        (("1", "64", "8", "8"), "_tp8_ep8_", (8, 8, 8)),
        # the same export without attention DP: tp_size 64 = TP x EP
        (("64", "1", "8", "8"), "_tp8_ep8_", (8, 1, 8)),
        # vLLM `--tp 4` with expert parallelism: tp 4, attention DP 4, moe 1 x 16
        (("4", "4", "1", "16"), "_tp4_ep4_", (4, 1, 4)),
        # a row whose fields already give the launch's GPUs is read as recorded
        (("1", "8", "1", "8"), "_tp8_ep8_", (8, 8, 8)),
        (("8", "1", "1", "8"), "_tp8_ep8_", (8, 1, 8)),
    ],
)
def test_launch_flags_undo_the_tp_times_ep_gpu_count(
    fields: tuple[str, str, str, str], launch: str, expect: tuple[int, int, int]
) -> None:
    tp, dp, mtp, mep = fields
    r = _agg(
        id=f"m_agg_1024x1024_c64{launch}1",
        silicon_data_source="silicon_concurrency=64",
        batch_size="1",
        tp_size=tp,
        attention_dp_size=dp,
        moe_tp_size=mtp,
        moe_ep_size=mep,
    )
    (row,) = read_rows([r])
    assert (row.kwargs["tp"], row.kwargs["attention_dp"], row.kwargs["ep"]) == expect
    assert row.concurrency == 64


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([1, 2, 4, 8]), st.sampled_from([2, 4, 8]), st.booleans(), st.integers(1, 64))
def test_exported_tp_times_ep_reads_back_to_the_launch(
    gpus: int, ep: int, attention_dp: bool, per_rank: int
) -> None:
    # Property: whatever the launch, the TP x EP export reads back as `gpus` GPUs, the client's
    # concurrency, and attention DP over all GPUs exactly when the export says attention DP.
    wide = gpus * ep
    tp, dp = ("1", str(wide)) if attention_dp else (str(wide), "1")
    conc = per_rank * (wide if attention_dp else 1)
    r = _agg(
        id=f"m_agg_1x1_c{conc}_tp{gpus}_ep{ep}_7",
        silicon_data_source=f"silicon_concurrency={conc}",
        batch_size=str(per_rank),
        tp_size=tp,
        attention_dp_size=dp,
        moe_tp_size=str(gpus),
        moe_ep_size=str(ep),
    )
    (row,) = read_rows([r])
    assert row.kwargs["tp"] == gpus and row.kwargs["ep"] == ep
    assert row.kwargs["attention_dp"] == (gpus if attention_dp else 1)
    assert row.concurrency == conc


def test_public_twin_exports_read_as_one_deployment() -> None:
    # The 2026-04-06 and 2026-03-25 InferenceX exports hold the same aggregated measurements
    # (identical TTFT and TPOT) with different field conventions; both must read the same.
    rows = [
        r
        for r in load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
        if r.mode == "agg"
    ]
    by_meas: dict[tuple[str, str], list] = {}
    for r in rows:
        by_meas.setdefault((r.raw["silicon_ttft_ms"], r.raw["silicon_tpot_ms"]), []).append(r)
    pairs = [
        g for g in by_meas.values() if len(g) == 2 and g[0].raw["tp_size"] != g[1].raw["tp_size"]
    ]
    assert len(pairs) >= 20
    for a, b in pairs:
        assert a.concurrency == b.concurrency
        keys = ("tp", "attention_dp", "ep", "pp")
        # (the rows of InferenceX's MTP sweeps are read as MTP runs in both exports)
        assert a.kind == b.kind
        assert a.kwargs.get("draft_tokens") == b.kwargs.get("draft_tokens")
        assert {k: (a.kwargs or a.guess)[k] for k in keys} == {
            k: (b.kwargs or b.guess)[k] for k in keys
        }


def test_uniform_lengths_by_hand() -> None:
    # integers 8, 9, 10: mean 9, variance (1 + 0 + 1) / 3 = 2/3
    mean, cv = uniform_lengths(10, 0.8)
    assert mean == 9 and cv == pytest.approx((2 / 3) ** 0.5 / 9)
    mean, cv = uniform_lengths(1024, 0.8)  # 819 ... 1024
    assert mean == 921.5 and cv == pytest.approx(((206**2 - 1) / 12) ** 0.5 / 921.5)
    assert uniform_lengths(1024, 1.0) == (1024, 0.0)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 20000), st.floats(0.0, 1.0))
def test_uniform_lengths_match_the_drawn_integers(length: int, ratio: float) -> None:
    low = int(length * ratio)
    values = list(range(low, length + 1))
    mean, cv = uniform_lengths(length, ratio)
    assert mean == pytest.approx(sum(values) / len(values))
    var = sum((v - mean) ** 2 for v in values) / len(values)
    assert cv == pytest.approx(var**0.5 / mean, abs=1e-12)


def test_client_lengths_by_source() -> None:
    infx = _agg(
        silicon_data_source="source_file=2026-04-06.csv; silicon_concurrency=4",
        batch_size="4",
        tp_size="8",
        isl="1024",
        osl="8192",
    )
    aic = {**infx, "id": "a", "silicon_data_source": "db-dump/2026-04-27; config_id=1"}
    disagg = {**infx, "id": "d", "mode": "disagg"}
    gap = {**disagg, "silicon_data_source": "source_file=/x/aic-auto-gap-analysis/q.csv"}
    gap_agg = {**gap, "mode": "agg"}
    assert client_lengths(gap) == {"input_len": 1024, "output_len": 8192}
    assert client_lengths(gap_agg) == {"input_len": 1024, "output_len": 8192}
    # AIConfigurator's dump of InferenceX's aggregated runs: InferenceX's client.
    assert client_lengths(aic) == client_lengths(infx)
    assert client_requests(aic, 36) == {"num_requests": 10 * 36}
    # Disaggregated InferenceX runs (exports and AIConfigurator's dump of them) ran sa-bench:
    # the same [0.8 L, L] lengths, 5 rounds of C prompts.
    for d in (disagg, {**disagg, "silicon_data_source": aic["silicon_data_source"]}):
        assert client_lengths(d) == client_lengths(infx)
        assert client_requests(d, 36) == {"num_requests": 5 * 36}
    assert client_requests(infx, 36) == {"num_requests": 10 * 36}
    # GB200 Dynamo-TensorRT-LLM before srt-slurm: Dynamo's bench.sh, MULTI_ROUND 8; MI355X
    # MoRI-SGLang: its launchers' bench.sh, 10 x C (serving_clients.disagg_client_rounds).
    dyn = {**disagg, "system": "gb200", "backend": "trtllm"}
    day = "source_file=2026-04-06.csv; silicon_concurrency=36; measured={}"
    assert client_requests({**dyn, "silicon_data_source": day.format("2025-12-19")}, 36) == {
        "num_requests": 8 * 36
    }
    assert client_requests({**dyn, "silicon_data_source": day.format("2026-01-31")}, 36) == {
        "num_requests": 5 * 36
    }
    mori = {**disagg, "system": "mi355x", "backend": "sglang"}
    assert client_requests(mori, 36) == {"num_requests": 10 * 36}
    got = client_lengths(infx)
    assert (got["input_len"], got["output_len"]) == (round(921.5), round((6553 + 8192) / 2))
    assert 0.06 < got["input_cv"] < 0.07 and 0.06 < got["output_cv"] < 0.07
    (row,) = read_rows([infx])
    assert row.kwargs["input_cv"] == got["input_cv"]


def test_decode_cap_from_the_recipe_the_run_used() -> None:
    # InferenceX's H100 TensorRT-LLM runs at concurrency 9 use ctx1_gen3_tep16_batch2: three
    # decode workers of max_batch_size 2, so three requests wait for a decode slot.
    rows = {r.id: r for r in load(ROWS)}
    stated = rows["dsr1_h100_trtllm_fp8_disagg_1024x1024_c9_cfg494"]
    assert stated.kwargs["decode_workers"] == 3 and stated.kwargs["decode_batch"] == 2
    assert any("ctx1_gen3_tep16_batch2" in a for a in stated.assumptions)
    twin = rows["2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c9_tp16_0_ep16_0_855"]
    assert twin.kind == TWIN and twin.kwargs["decode_batch"] == 2
    # H200 recipe c64_ctx1_gen9_tep8_batch256: concurrency 576 = 64 per decode worker, cap 256
    big = rows["dsr1_h200_trtllm_fp8_disagg_1024x1024_c576_cfg303"]
    assert big.kwargs["decode_batch"] == 256
    # ... whose prefill runs enable_attention_dp: true; config 303 (workflow run 288) carries
    # the label InferenceX corrected in #919, config 590 (run 333) the corrected one: both
    # now read as the same deployment, as their near-identical measurements say.
    assert big.raw["prefill_attention_dp_size"] == "1"
    assert big.kwargs["prefill_attention_dp"] == 8
    same = rows["dsr1_h200_trtllm_fp8_disagg_1024x1024_c576_cfg590"]
    strip = ("num_requests",)
    assert {k: v for k, v in big.kwargs.items() if k not in strip} == {
        k: v for k, v in same.kwargs.items() if k not in strip
    }
    # SGLang rows have no TensorRT-LLM recipe: no cap
    sg = rows["dsr1_h200_sglang_fp8_disagg_8192x1024_c64_cfg434"]
    assert "decode_batch" not in sg.kwargs


def test_recipe_names_state_their_deployment() -> None:
    recipes = load_recipes(ROWS.parent / RECIPES_FILE)
    trt = [e for e in recipes if e["backend"] == "trtllm"]
    assert trt and all(e["spec"] in ("none", "mtp") for e in recipes)
    for e in trt:
        m = re.search(r"ctx(\d+)_gen(\d+)_(tep|dep)(\d+)_batch(\d+)", e["recipe"])
        assert m is not None
        # workers, decode TEP/DEP and decode batch as the recipe's name states them
        assert (int(m[1]), int(m[2]), int(m[5])) == (
            int(e["prefill_workers"]),
            int(e["decode_workers"]),
            int(e["decode_max_batch"]),
        )
        assert (m[3] == "dep") == (int(e["decode_attention_dp"]) > 1)
        assert ("mtp0" in e["recipe"]) == (e["spec"] == "none")


def test_rows_without_workers_read_from_the_inferencex_configuration() -> None:
    rows = {r.id: r for r in load(ROWS)}
    # H100 concurrency 1845 at 1k/1k: one entry, ctx1_gen3_dep16_batch32 (non-speculative)
    (one,) = [
        r
        for r in rows.values()
        if r.id.startswith("2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c1845_")
    ]
    assert one.kind == RECIPE
    kw = one.kwargs
    assert (kw["prefill_workers"], kw["decode_workers"], kw["decode_attention_dp"]) == (1, 3, 16)
    assert kw["decode_batch"] == 32 and kw["prefill_attention_dp"] == 16
    # H100 SGLang ran when the configuration held only MTP recipes, the TEP 1p2d/1p1d and the
    # DEP 1p1d one, with the same prefill labels: refused where both run the concurrency, read
    # as the TEP recipe (EAGLE, 2 draft steps in its file) at 128, which only it runs
    sg = [r for r in rows.values() if r.id.startswith("2026_03_25_deepseek_r1_h100_sxm_sglang")]
    assert sg and all(
        r.kind == NOT_EXPRESSIBLE and "-max-dep-mtp.yaml" in r.reason
        for r in sg
        if r.concurrency != 128
    )
    assert all(r.kwargs["draft_tokens"] == 2 for r in sg if r.concurrency == 128)
    # A TensorRT-LLM row whose only entry is one MTP recipe is read as that recipe, MTP with the
    # draft count its name states (ctx1_gen3_tep16_batch32_eplb0_mtp3 at H100 1k/1k C = 117)
    (mtp,) = [
        r
        for r in rows.values()
        if r.id.startswith("2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c117_")
    ]
    assert mtp.kind == RECIPE and mtp.kwargs["speculative"] == "mtp"
    assert mtp.kwargs["draft_tokens"] == 3 and mtp.kwargs["decode_batch"] == 32
    # Where STP and MTP entries share a concurrency the export cannot say which ran
    amb = [r for r in rows.values() if "deployments of InferenceX" in r.reason]
    assert amb and all(not r.expressible for r in amb)
    # never read from the measured latency: a row's class does not change with its TTFT/TPOT
    raw = [dict(r.raw) for r in rows.values()]
    for r in raw:
        if r["id"] == one.id:
            r["silicon_ttft_ms"], r["silicon_tpot_ms"] = "1.0", "1.0"
    again = {r.id: r for r in read_rows(raw, load_recipes(ROWS.parent / RECIPES_FILE))}
    assert again[one.id].kind == RECIPE and again[one.id].kwargs == kw


def _capped(**kw: str) -> dict[str, str]:
    return _agg(
        id="capped",
        backend="vllm",
        model_path="openai/gpt-oss-120b",
        system="h100_sxm",
        tp_size="4",
        gemm_quant_mode="nvfp4",
        silicon_data_source=(
            "source_file=2026-04-06.csv; model=GPT-OSS-120B; silicon_concurrency=512; "
            "measured=2025-12-08T00:00:00.000Z; image=vllm/vllm-openai:v0.11.2"
        ),
        **kw,
    )


def test_client_cap_is_not_the_engines_load() -> None:
    # InferenceX's gptoss_fp4_h100_docker.sh passed --max-concurrency 512 to the client while
    # the engine ran --max-num-seqs=$CONC (4-64), until 4e135fd3f of 2025-12-08
    (row,) = read_rows([_capped()])
    assert row.kind == NOT_EXPRESSIBLE and not row.expressible and row.kwargs == {}
    assert "client's cap" in row.reason and "max-num-seqs" in row.reason
    # compared, apart, as recorded
    assert row.guess["concurrency"] == 512 and row.guess["tp"] == 4
    assert row.guess["engine"] == "vllm" and row.guess["gpu"] == "h100-sxm"


@pytest.mark.parametrize(
    "change",
    [
        # the same run after the fix: the label is the sweep's own concurrency
        {
            "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=512; "
            "measured=2026-03-27T00:00:00.000Z"
        },
        # before the cap was hard-coded (d22bf9ca9, 2025-11-21)
        {
            "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=512; "
            "measured=2025-11-02T00:00:00.000Z"
        },
        # a sweep concurrency in the window (the slurm runner's client ran at $CONC)
        {
            "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=64; "
            "measured=2025-12-05T00:00:00.000Z"
        },
        {"backend": "sglang"},  # another script
        {"system": "h200_sxm"},  # the H200 runners ran the slurm script (--max-concurrency $CONC)
        {"model_path": "deepseek-ai/DeepSeek-R1"},
    ],
)
def test_other_runs_keep_their_recorded_concurrency(change: dict[str, str]) -> None:
    (row,) = read_rows([{**_capped(), **change}])
    assert row.kind == STATED and row.expressible and row.kwargs["concurrency"] == row.concurrency


def test_distinct_counts_a_measurement_repeated_in_later_exports_once() -> None:
    from gpuscale.validation import DATA_DIR
    from gpuscale.validation.serving_rows import ServingRow, load
    from gpuscale.validation.serving_runs import (
        PROVENANCE,
        deployment_key,
        distinct,
        distinct_columns,
        same_measurement,
    )

    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    # 134 repeats to the last digit, 30 rounded copies (test_rounded_copies_in_the_public_rows)
    once = distinct_columns(rows)
    assert len(rows) == 1884 and len(once) == 1720
    # 120 more record a kept run's deployment and TTFT/TPOT in other words (V3 label for R1,
    # tp_size written as TP x EP, export twins of database rows, last-bit floats).
    runs = distinct(rows)
    assert len(runs) == 1600
    # No two kept runs of one deployment record the same measurement (pairs compared within
    # each deployment: the same check as over all pairs, without its ~10^6 key builds).
    by_deployment: dict[str, list[ServingRow]] = {}
    for r in runs:
        if r.expressible:
            by_deployment.setdefault(deployment_key(r), []).append(r)
    for group in by_deployment.values():
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                assert not same_measurement(a, b)
    # The best attested record stands for its run: no twin whose database row is also there.
    kept_stated = {deployment_key(r) for r in runs if r.kind == "stated"}
    assert not any(r.kind == "twin" and deployment_key(r) in kept_stated for r in runs)
    # What is dropped repeats a kept row in every column but its provenance, or is a rounded
    # copy of a kept row; a row that differs in any measured column is kept.
    kept = {tuple(sorted((k, v) for k, v in r.raw.items() if k not in PROVENANCE)) for r in once}
    assert len(kept) == len(once)
    kept_ids = {r.id for r in once}
    for r in rows:
        if r.copy_of:
            assert r.copy_of in kept_ids and r.id not in kept_ids
            continue
        assert tuple(sorted((k, v) for k, v in r.raw.items() if k not in PROVENANCE)) in kept
    first = once[0]
    ttft = float(first.raw["silicon_ttft_ms"]) + 1
    changed = dataclasses.replace(
        first, ttft_ms=ttft, raw={**first.raw, "silicon_ttft_ms": str(ttft)}
    )
    assert len(distinct([first, changed])) == 2
    # ``first`` is AIConfigurator's db-dump copy: another dump copy of it goes in file order,
    # a publication of it stands in its place whatever the order.
    assert first.raw["silicon_data_source"].startswith("db-dump/")
    again = dataclasses.replace(
        first, raw={**first.raw, "id": "copy", "silicon_data_source": "db-dump/x"}
    )
    assert distinct([first, again]) == [first] and distinct([again, first]) == [again]
    published = dataclasses.replace(
        first, raw={**first.raw, "id": "copy", "silicon_data_source": "source_file=x.csv"}
    )
    assert distinct([first, published]) == [published] == distinct([published, first])


def _export(**kw: str) -> dict[str, str]:
    """An InferenceX export row of an aggregated vLLM run (the client's random lengths)."""
    fields = {
        "id": "export",
        "silicon_data_source": "source_file=2026-04-06.csv; silicon_concurrency=16; "
        "measured=2026-03-27T00:00:00.000Z; image=vllm/vllm-openai:v0.16.0",
        "backend": "vllm",
        "backend_version": "0.16.0",
        "model_path": "moonshotai/Kimi-K2.5",
        "gemm_quant_mode": "int4_wo",
        "tp_size": "8",
        "moe_ep_size": "1",
        "silicon_ttft_ms": "195.68241234567",
        "silicon_tpot_ms": "16.44481234567",
    }
    return _agg(**{**fields, **kw})


def _gap_copy(**kw: str) -> dict[str, str]:
    """The same run as a gap-analysis file writes it: 0.01 ms, no date, no image."""
    base = {
        "id": "gap",
        "silicon_data_source": "source_file=kimi-k2.5-gap-analysis.csv; silicon_concurrency=16",
        "silicon_ttft_ms": "195.68",
        "silicon_tpot_ms": "16.44",
    }
    return {**_export(), **base, **kw}


def test_rounded_copy_is_read_as_its_original_and_counted_once() -> None:
    from gpuscale.validation.serving_runs import distinct

    export, copy = read_rows([_export(), _gap_copy()])
    # Read as fixed lengths before: the copy's source names no client.
    assert client_lengths(_gap_copy()) == {"input_len": 1024, "output_len": 1024}
    assert copy.copy_of == "export" and export.copy_of == ""
    assert copy.kwargs == export.kwargs and "input_cv" in copy.kwargs
    assert copy.kwargs["num_requests"] == 160  # InferenceX's 10 x C prompts
    assert copy.ttft_ms == 195.68 and copy.raw["id"] == "gap"
    assert any("fewer digits" in note for note in copy.assumptions)
    assert distinct([export, copy]) == [export]
    # Alone, the copy is the only record of the run: it counts.
    assert distinct([copy]) == [copy]


@pytest.mark.parametrize(
    "change",
    [
        {"silicon_ttft_ms": "195.69"},  # not the original rounded
        {"silicon_tpot_ms": "16.45"},
        {"isl": "8192"},
        {"silicon_data_source": "source_file=kimi-k2.5-gap-analysis.csv; silicon_concurrency=8"},
        {"backend_version": "0.18.0"},
        {"silicon_ttft_ms": "195.6824123456700"},  # more digits than the export: not a copy
    ],
)
def test_a_row_that_does_not_round_to_the_original_is_its_own_run(change: dict[str, str]) -> None:
    _, row = read_rows([_export(), _gap_copy(**change)])
    assert row.copy_of == ""


def test_a_copy_of_two_different_runs_is_not_read_as_either() -> None:
    other = _export(id="export2", silicon_ttft_ms="195.6781234")  # also rounds to 195.68
    rows = read_rows([_export(), other, _gap_copy()])
    assert rows[2].copy_of == ""
    # The same run exported twice (a float's last bit apart) is one original: the first.
    twice = _export(id="export2", silicon_ttft_ms="195.68241234567003")
    assert read_rows([_export(), twice, _gap_copy()])[2].copy_of == "export"


def test_rounded_copies_in_the_public_rows() -> None:
    rows = load(ROWS)
    by_id = {r.id: r for r in rows}
    copies = [r for r in rows if r.copy_of]
    sources = {r.raw["silicon_data_source"].split(";")[0] for r in copies}
    assert sources == {
        "source_file=kimi-k2.5-gap-analysis.csv",
        "source_file=qwen3.5-397b-gap-analysis.csv",
    }
    assert len(copies) == 30
    for r in copies:
        original = by_id[r.copy_of]
        assert original.raw["silicon_data_source"].startswith("source_file=2026-0")
        assert r.kwargs == original.kwargs and "input_cv" in r.kwargs
        for k in ("silicon_ttft_ms", "silicon_tpot_ms"):
            assert round(float(original.raw[k]), 2) == pytest.approx(float(r.raw[k]), abs=1e-9)


def _minimax_h200(day: str, tp: str) -> dict[str, str]:
    return _agg(
        id=f"minimax_{day}",
        silicon_data_source=f"source_file=2026-04-06.csv; silicon_concurrency=16; measured={day}",
        backend="vllm",
        backend_version="0.18.0" if day >= "2026-03-27" else "0.16.0",
        model_path="MiniMaxAI/MiniMax-M2.5",
        tp_size=tp,
        moe_ep_size="1",
    )


def test_minimax_h200_launch_splits_the_experts_from_the_ep_commit_on() -> None:
    # minimaxm2.5_fp8_h200.sh passes --enable-expert-parallel when [ "$EP_SIZE" -ge 1 ] on main
    # from 5e2c705d3 (#869, merged 2026-03-13; its branch commits are dated 2026-03-05), and the
    # sweep's default ep is 1: the TP8 runs of 2026-03-27 ran EP8.
    (late,) = read_rows([_minimax_h200("2026-03-27T00:00:00Z", "8")])
    assert late.kwargs["tp"] == 8 and late.kwargs["ep"] == 8
    assert late.kwargs["engine_options"] == {"memory_fraction": 0.95}
    # The first script (2026-03-01) had no expert-parallel flag.
    (early,) = read_rows([_minimax_h200("2026-03-01T00:00:00Z", "4")])
    assert early.kwargs["tp"] == 4 and early.kwargs["ep"] == 1
    assert early.kwargs["engine_options"] == {"memory_fraction": 0.95}
    # A main-branch run between the PR branch's commits (2026-03-05) and its merge ran the
    # script of 64c20b6b5 (2026-03-11), still without the flag.
    (between,) = read_rows([_minimax_h200("2026-03-10T00:00:00Z", "8")])
    assert between.kwargs["tp"] == 8 and between.kwargs["ep"] == 1
    (merged,) = read_rows([_minimax_h200("2026-03-13T19:13:00Z", "8")])
    assert merged.kwargs["ep"] == 8


def test_public_minimax_rows_read_with_the_expert_split_they_ran() -> None:
    rows = [r for r in load(ROWS) if r.raw["model_path"] == "MiniMaxAI/MiniMax-M2.5"]
    seen = {
        (r.raw["system"], r.raw["backend_version"], r.kwargs["tp"], r.kwargs["ep"]) for r in rows
    }
    # H200 v0.18 TP8 (2026-03-27/28): EP8; H200 v0.16 TP4 (2026-03-01): TP only; H100 EP4 as
    # recorded (its script's condition is -gt 1 and its sweep names ep 4).
    assert seen == {
        ("h200_sxm", "0.18.0", 8, 8),
        ("h200_sxm", "0.16.0", 4, 1),
        ("h100_sxm", "0.18.0", 4, 4),
    }


@pytest.mark.parametrize(
    ("fields", "expect"),
    [
        # AIConfigurator's db-dump of InferenceX config 181 (`--tp 8 --ep 8`, one H200 node):
        # tp_size 64 = moe 8 x 8, no launch flags in the id
        (("64", "1", "8", "8"), (8, 1, 8)),
        (("1", "64", "8", "8"), (8, 8, 8)),
        # the dump's rows written with the GPUs already (moe 1 x 8) are read as recorded
        (("8", "1", "1", "8"), (8, 1, 8)),
        (("8", "1", "8", "1"), (8, 1, 1)),
        # expert TP 2 x EP 4 on the node's 8 GPUs is a possible writing of 8 GPUs, not TP x EP
        # (which would put 8 x 4 = 32 GPUs in a one-node engine): read as recorded
        (("8", "1", "2", "4"), (8, 1, 4)),
        (("4", "2", "2", "4"), (8, 2, 4)),
    ],
)
def test_db_dump_tp_times_ep_reads_back_to_one_node(
    fields: tuple[str, str, str, str], expect: tuple[int, int, int]
) -> None:
    tp, dp, mtp, mep = fields
    r = _agg(
        id="dsr1_h200_trtllm_fp8_agg_1024x1024_c64_cfg181",
        silicon_data_source="db-dump/2026-04-27; config_id=181; silicon_concurrency=64; "
        "measured=2025-12-15T00:00:00.000Z",
        batch_size="64",
        tp_size=tp,
        attention_dp_size=dp,
        moe_tp_size=mtp,
        moe_ep_size=mep,
    )
    (row,) = read_rows([r])
    assert (row.kwargs["tp"], row.kwargs["attention_dp"], row.kwargs["ep"]) == expect
    # the same fields from another source are the GPUs as written
    other = {**r, "silicon_data_source": "silicon_concurrency=64"}
    (plain,) = read_rows([other])
    assert plain.kwargs["tp"] == int(tp) * int(dp)


@pytest.mark.parametrize(
    ("model", "day", "tp", "ep"),
    [
        # InferenceX's scripts before #145 (2025-11-03) launched --ep_size=$TP
        ("deepseek-ai/DeepSeek-R1", "2025-11-02", "8", 8),
        ("openai/gpt-oss-120b", "2025-11-02", "4", 4),
        ("openai/gpt-oss-120b", "2025-11-02", "1", 1),
        # from #145 the configuration entry's ep is the launch's, as the row writes it
        ("deepseek-ai/DeepSeek-R1", "2025-12-15", "8", 1),
        ("openai/gpt-oss-120b", "2026-01-28", "8", 1),
        # other models of the same exports are untouched
        ("meta-llama/Llama-3.1-70B", "2025-10-29", "8", 1),
    ],
)
def test_inferencex_trt_runs_before_the_config_ep_ran_ep_over_all_gpus(
    model: str, day: str, tp: str, ep: int
) -> None:
    r = _agg(
        id="m_agg_1024x1024_c4_1",
        silicon_data_source=f"source_file=2026-04-06.csv; silicon_concurrency=4; "
        f"measured={day}T00:00:00.000Z",
        model_path=model,
        batch_size="4",
        tp_size=tp,
        attention_dp_size="1",
        moe_tp_size=tp,
        moe_ep_size="1",
    )
    (row,) = read_rows([r])
    assert row.kwargs["tp"] == int(tp) and row.kwargs["ep"] == ep


@pytest.mark.parametrize(
    ("isl", "osl", "conc", "dp"),
    [
        # dsr1_fp8_h200_trt_slurm.sh at e06929c70: DP_ATTENTION above 32 at 8k/1k ...
        ("8192", "1024", "64", 8),
        ("8192", "1024", "32", 1),
        # ... and above 64 at 1k prompts
        ("1024", "1024", "64", 1),
        ("1024", "8192", "128", 8),
    ],
)
def test_inferencex_dsr1_trt_runs_before_the_config_chose_attention_dp_by_script(
    isl: str, osl: str, conc: str, dp: int
) -> None:
    r = _agg(
        id="dsr1_agg_1",
        silicon_data_source=f"source_file=2026-04-06.csv; silicon_concurrency={conc}; "
        "measured=2025-11-02T00:00:00.000Z",
        isl=isl,
        osl=osl,
        batch_size=conc,
        tp_size="8",
        attention_dp_size="1",
        moe_tp_size="8",
        moe_ep_size="1",
    )
    (row,) = read_rows([r])
    assert (row.kwargs["tp"], row.kwargs["ep"], row.kwargs["attention_dp"]) == (8, 8, dp)
    assert ("adp_balance_timeout_iters" in row.kwargs) == (dp > 1)


_FIELD_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
_FIELD_VALUE = st.text(
    alphabet=st.characters(blacklist_characters=";", blacklist_categories=("Z", "C")),
    max_size=20,
)


@given(st.dictionaries(_FIELD_KEY, _FIELD_VALUE, max_size=6), st.dates())
def test_source_fields_read_back_what_was_written(fields: dict[str, str], day: object) -> None:
    from gpuscale.validation.serving_fields import measured_day, source_fields

    stamp = f"{day}T07:59:49.000Z"
    fields = {k: v for k, v in fields.items() if k != "measured"}
    written = "; ".join(f"{k}={v}" for k, v in {**fields, "measured": stamp}.items())
    r = {"silicon_data_source": written}
    assert source_fields(r) == {**fields, "measured": stamp}
    assert measured_day(r) == str(day)
    assert measured_day({"silicon_data_source": "db-dump/2026-04-27; config_id=1"}) == ""
