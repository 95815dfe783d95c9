"""The number this project lives by: error against published, measured training runs.

On the original 101 rows (published_runs.csv) with the shipped profiles: overall MAPE <= 10%,
every source <= 15% and better than the constant-40%-MFU guess, plus pinned rows so that a
regression in one regime fails here. On all 175 rows: the row mapping of the later file, the
fitted-value registry and its refit, leave-one-source-out (no leak; regression bounds at the
current LOSO figures), LOSO bands and their coverage, and the layout ranking.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from gpuscale.catalog import gpus, validation_bands
from gpuscale.costmodel.profile import load_profile, profile_names
from gpuscale.costmodel.uncertainty import band_for, parallelism_mix
from gpuscale.validation import bands, fitted, loso, ranking
from gpuscale.validation.fitted import FITTED
from gpuscale.validation.published_runs import (
    POWER_CAPPED_H100,
    RUN_FILES,
    Case,
    cases,
    evaluate,
    load_all,
    load_rows,
    predict,
    source_of,
    summarize,
    to_case,
)
from tests.conftest import validation_data

PINNED = {
    # row id: tolerance on tokens/s per GPU
    "narayanan21-t1-10": 0.10,  # 1T, TP8 x PP64 over 3072 A100, fp16, full recompute
    "korthikanti22-175B-selective-sp": 0.10,
    "megatron-readme-h100-177B": 0.10,  # Megatron-Core on H100, TP8 x PP6
    "nemo2407-llama2-7b-8gpu": 0.10,  # FP8 on one DGX H100
    "llmfoundry-a100-40gb-7b-64gpu": 0.10,  # FSDP, 8x200G RoCE
    "narayanan21-t2-01": 0.05,  # DeepSpeed ZeRO-3, 384 GPUs (+2.0%)
    # DeepSpeed ZeRO-3, 530B on 2240 GPUs: +15.4% from the 2021 mechanism alone (nothing
    # fitted; +29.5% before the trace offset's re-gathers and the post-step persistent gather)
    "narayanan21-t2-06": 0.17,
    "bloom176b-step": 0.05,
}


@pytest.fixture(scope="module")
def results(validation_dir: Path):
    return evaluate(load_rows(validation_dir / "published_runs.csv"))


@pytest.fixture(scope="module")
def validation_dir() -> Path:
    return validation_data()


def test_overall_and_per_source_targets(results) -> None:
    summary = summarize(results)
    assert summary["overall"]["rows"] >= 95
    assert summary["overall"]["mape"] <= 0.10
    for source, s in summary["per_source"].items():
        assert s["mape"] <= 0.15, f"{source}: MAPE {s['mape']:.1%}"
        assert s["mape"] < s["baseline_mape"], f"{source} does not beat 40% MFU"


@pytest.mark.parametrize("row_id", sorted(PINNED))
def test_pinned_rows(results, row_id: str) -> None:
    row = next(r for r in results if r.id == row_id)
    assert row.predicted is not None, row.skip_reason
    assert abs(row.error) <= PINNED[row_id], f"{row_id}: {row.error:+.1%}"


def test_every_skip_says_why(results) -> None:
    for r in results:
        if r.predicted is None:
            assert r.skip_reason


def test_both_files_map_every_row_or_say_why(validation_dir: Path) -> None:
    rows = load_all(validation_dir)
    assert len(rows) == sum(len(load_rows(validation_dir / f)) for f in RUN_FILES)
    more = load_rows(validation_dir / "published_runs_more.csv")
    assert len(more) == 74
    results = evaluate(rows)
    assert [r.id for r in results] == [row["id"] for row in rows]  # none dropped silently
    new = [r for r in results if r.id in {row["id"] for row in more}]
    assert all(r.predicted is not None for r in new), [r.skip_reason for r in new]
    assert {r.source for r in new} == {"llmfoundry-h100", "megascale", "torchtitan-paper"}


def test_source_keys_are_stable() -> None:
    assert source_of("llmfoundry-a100-40gb-7b-64gpu") == "llmfoundry"
    assert source_of("llmfoundry-h100-80gb-7b-64gpu") == "llmfoundry-h100"
    assert source_of("torchtitan-a100-1") == "torchtitan"
    assert source_of("torchtitan-paper-t1-1") == "torchtitan-paper"
    assert source_of("megascale-t2-megatron-lm-256") == "megascale"
    assert source_of("narayanan21-t1-01") == "narayanan21"


def test_megascale_mfu_uses_its_own_flop_definition(validation_dir: Path) -> None:
    """MFU -> tokens/s with 6N + 12*L*h*s agrees with the paper's Table 2 throughput column."""
    checked = 0
    for row in load_rows(validation_dir / "published_runs_more.csv"):
        m = re.search(r"throughput ([\d.]+)k tokens/s", row["notes"])
        if not row["id"].startswith("megascale-t2") or m is None:
            continue
        reported = float(m.group(1)) * 1e3 / int(row["n_gpus"])
        converted = to_case(row).measured_tokens_per_s_per_gpu
        assert abs(converted / reported - 1) < 0.02, (row["id"], converted, reported)
        checked += 1
    assert checked == 16


def test_rows_not_expressible_say_so(validation_dir: Path) -> None:
    rows = {r["id"]: r for r in load_rows(validation_dir / "published_runs_more.csv")}
    power_capped = to_case(rows["torchtitan-paper-t1-1"])
    if POWER_CAPPED_H100 in gpus():
        assert power_capped.cluster.device.id == POWER_CAPPED_H100
    else:
        assert any("500 W" in lim for lim in power_capped.limitations)
    assert any(
        "MegaScale's own system" in lim
        for lim in to_case(rows["megascale-t2-megascale-256"]).limitations
    )
    assert not to_case(rows["megascale-t2-megatron-lm-256"]).limitations
    # Composer's DEFAULT mixed precision reduces gradients in fp32 (FSDP1 casts them first): a
    # stated config, not a knob.
    assert to_case(rows["llmfoundry-h100-80gb-13b-64gpu"]).overrides == {
        "constants": {"grad_reduce_bytes": 4.0, "zero3_reduce_copy_passes": 1.5}
    }
    # MegaScale's Megatron-LM baseline (commit 285068c8) has no DP/PP overlap and overlaps one
    # of four TP all-reduce equivalents; MegaScale's own rows keep the Megatron-Core profile.
    baseline_overlap = {"dp": 0.0, "zero": 0.0, "pp": 0.0, "tp": 0.25}
    for row_id in ("megascale-t2-megatron-lm-256", "megascale-fig9-megatron-lm-2240"):
        # ... and its one hidden TP collective is in the backward pass, none in the forward.
        assert to_case(rows[row_id]).overrides == {
            "overlap": baseline_overlap,
            "constants": {"tp_overlap_exposed_in_forward": 0.0},
        }
    assert to_case(rows["megascale-t2-megascale-256"]).overrides == {}


def test_llmfoundry_large_scale_flash_rows_run_flash_attention_2(validation_dir: Path) -> None:
    """llm-foundry's sweep.py (5e85bd62d) ran 1b/3b/7b/70b with attn_impl 'flash' (FA2 2.4.2)
    and 13b/30b with 'triton': only the former are priced with the llm-foundry-flash profile,
    and only in the large-scale table (no per-row attention override)."""
    rows = load_rows(validation_dir / "published_runs_more.csv")
    flash = {r["id"] for r in rows if to_case(r).framework == "llm-foundry-flash"}
    expected = {
        f"llmfoundry-h100-80gb-{size}-{n}gpu-ls"
        for size in ("1b", "3b", "7b", "70b")
        for n in (128, 256, 512)
    }
    assert flash == expected
    for r in rows:
        case = to_case(r)
        if case.source == "llmfoundry-h100":
            assert "attention_efficiency" not in case.overrides
            assert "attention_backward_relative_efficiency" not in case.overrides.get(
                "constants", {}
            )
    assert "llm-foundry-flash" in profile_names()  # a --framework choice like any profile
    profile = load_profile("llm-foundry-flash")
    assert profile.attention_efficiency["hopper"] == 319.0 / 989.5
    generic = load_profile("generic")
    key = "attention_backward_relative_efficiency"
    assert profile.const(key) == generic.const(key)


# --- fitted values and leave-one-source-out ---------------------------------------------------

# The registry machinery is exercised with a stand-in entry on the ZeRO-3 rows (no value there
# is fitted any more: the deepspeed-2021 profile derives each term from DeepSpeed's code).
ZERO3 = fitted.FittedValue(
    profile="deepspeed-2021",
    section="constants",
    key="zero3_host_us_per_rank",
    lower=0.0,
    upper=30.0,
    step=0.5,
    prior=7.0,
    informs=lambda c: c.framework == "deepspeed-2021" and c.plan.zero == 3,
    how="stand-in for the tests",
)


@pytest.fixture(scope="module")
def all_cases(validation_dir: Path) -> list[Case]:
    mapped, _ = cases(load_all(validation_dir))
    return mapped


def _zero3_rows(all_cases: list[Case]) -> list[Case]:
    rows = [c for c in all_cases if ZERO3.informs(c)]
    assert len(rows) == 6  # Narayanan et al. 2021 Table 2, DeepSpeed ZeRO-3
    return rows


def _measured_as(rows: list[Case], value: float) -> list[Case]:
    """The rows with their measured values replaced by the model's prediction at ``value``."""
    profiles = fitted.apply({ZERO3.name: value}, {"deepspeed-2021"}, (ZERO3,))
    return [
        dataclasses.replace(c, measured_tokens_per_s_per_gpu=predict(c, profiles[c.framework]))
        for c in rows
    ]


def test_registry_names_the_declared_fit() -> None:
    names = [fv.name for fv in FITTED]
    # Replaced by the mechanism (deepspeed-2021.yaml): no fitted ZeRO-3 efficiency remains.
    assert not any("zero3" in name for name in names)
    for fv in FITTED:
        assert fv.lower <= fv.shipped() <= fv.upper, fv.name
        assert fv.lower <= fv.prior <= fv.upper, fv.name


def test_zero3_rows_use_the_2021_mechanism(all_cases: list[Case]) -> None:
    """The ZeRO-3 rows run DeepSpeed's 2021 collectives, every term from its code, none fitted."""
    rows = _zero3_rows(all_cases)
    assert {c.framework for c in rows} == {"deepspeed-2021"}
    ds = load_profile("deepspeed-2021")
    assert ds.const("zero3_gathers_per_layer") == 4.0  # one per Megatron weight matrix
    assert ds.const("zero3_reduce_scatters_per_layer") == 12.0  # one per tensor with a gradient
    assert ds.overlap_of("zero") == 0.0  # torch.cuda.synchronize() before every gather
    assert "zero3_bandwidth_efficiency" not in ds.constants


def test_refit_recovers_a_known_value(all_cases: list[Case]) -> None:
    synthetic = _measured_as(_zero3_rows(all_cases), 12.0)
    value, rows = fitted.refit(ZERO3, synthetic, registry=(ZERO3,))
    assert rows == 6
    assert value == pytest.approx(12.0, abs=ZERO3.step / 2)


def test_refit_without_informing_rows_is_the_prior(all_cases: list[Case]) -> None:
    others = [c for c in all_cases if not ZERO3.informs(c)][:5]
    assert fitted.refit(ZERO3, others, registry=(ZERO3,)) == (ZERO3.prior, 0)


def test_profiles_are_passed_not_patched(validation_dir: Path) -> None:
    before = load_profile("deepspeed-2021").const("zero3_host_us_per_rank")
    rows = [r for r in load_rows(validation_dir / "published_runs.csv") if r["id"] in PINNED]
    slow = fitted.apply({ZERO3.name: 30.0}, {"deepspeed", "deepspeed-2021"}, (ZERO3,))
    base = {r.id: r.predicted for r in evaluate(rows)}
    moved = {r.id: r.predicted for r in evaluate(rows, profiles=slow)}
    assert moved["narayanan21-t2-01"] < base["narayanan21-t2-01"]  # the ZeRO-3 row moves
    assert moved["bloom176b-step"] == base["bloom176b-step"]  # DeepSpeed ZeRO-1: no gathers
    assert moved["nemo2407-llama2-7b-8gpu"] == base["nemo2407-llama2-7b-8gpu"]
    assert load_profile("deepspeed-2021").const("zero3_host_us_per_rank") == before


def test_loso_does_not_leak_the_held_out_source(all_cases: list[Case]) -> None:
    """Two synthetic sources share the ZeRO-3 rows; changing what one of them measured must not
    move its own LOSO predictions (it would if its rows reached its refit), but moves in-sample."""
    rows = _measured_as(_zero3_rows(all_cases), 12.0)
    a = [dataclasses.replace(c, source="a") for c in rows[:3]]
    b = [dataclasses.replace(c, source="b") for c in rows[3:]]
    base = loso.run_cases([*a, *b], (ZERO3,))
    a_moved = [
        dataclasses.replace(c, measured_tokens_per_s_per_gpu=c.measured_tokens_per_s_per_gpu * 0.5)
        for c in a
    ]
    moved = loso.run_cases([*a_moved, *b], (ZERO3,))

    def preds(report: loso.LosoReport, which: str, source: str) -> list[float | None]:
        return [r.predicted for r in getattr(report, which) if r.source == source]

    assert preds(moved, "loso", "a") == preds(base, "loso", "a")
    assert preds(moved, "in_sample", "a") != preds(base, "in_sample", "a")
    fold_a = {f.source: f.values for f in moved.folds}["a"]
    assert fold_a[ZERO3.name] == (pytest.approx(12.0, abs=ZERO3.step / 2), 3)


@pytest.fixture(scope="module")
def report(validation_dir: Path) -> loso.LosoReport:
    return loso.run(load_all(validation_dir))


# Regression bounds: the LOSO figures after the merge of the physics branch (2026-12-01) plus a
# margin of about half a point. The targets (LOSO <= 10% overall, <= 15% per source) are
# not met yet; docs/benchmarks.md says where. bloom176b went from 0.2% to 8.9% with the physics
# merge, and that is not a regression: BLOOM splits 70 layers over 12 stages with the embedding
# and head counted as layers, and the old model matched only by accident (6 layers *and* the head
# on every stage); with the real uneven split the middle ranks set the pace
# (docs/investigations/training-throughput.md, "Physics for the regimes of issue 9").
# megascale (14.0% -> 14.1%) and llmfoundry-h100 (15.5% -> 15.8%) got slightly worse.
# narayanan21 went from 40.8% to 6.7% (= in-sample) and overall from 14.9% to 10.6% when the
# fitted ZeRO-3 efficiency gave way to DeepSpeed 2021's collectives (deepspeed-2021.yaml).
# PyTorch's ring attention (costmodel/ring_attention.py) took torchtitan-paper from 22.9% to
# 16.2%, torchtitan from 6.3% to 5.1% and overall from 10.6% to 9.8%.
# The last fitted value, llm-foundry's element-wise pass count, gave way to the MPT block's passes
# counted from llm-foundry's code and its Triton flash attention priced from the FlashAttention-2
# paper (llm-foundry.yaml): llmfoundry 5.0% -> 4.4%, llmfoundry-h100 15.8% -> 17.6% (it was
# predicted with a count refitted on the A100 rows; the H100 gap left is in docs/benchmarks.md).
# FSDP SHARD_GRAD_OP's per-unit collectives (ring latency once per block, generic.yaml
# zero2_unit_collectives): llmfoundry-h100 17.6% -> 16.9%. MegaScale's Megatron-LM baseline
# priced with the overlap its commit has (285068c8, 2023-01: no DP/PP overlap, 1/4 of the TP
# traffic async): megascale 14.1% -> 11.1%, overall 10.7% -> 10.3%.
# The Triton attention's Hopper rate read on FA2's causal curve (319 of 989.5 at 4k, not the
# non-causal 370; llm-foundry.yaml): llmfoundry-h100 16.9% -> 14.4%, overall 9.5% -> 9.1%;
# Composer's DecoupledAdamW counted (96 bytes per parameter): llmfoundry-h100 14.1%, overall 9.0%.
# The 12 large-scale rows that ran FlashAttention-2 (sweep.py) priced at FA2's rates, not the
# Triton kernel's: llmfoundry-h100 14.1% -> 17.7%, overall 9.0% -> 9.7% (the honest figure).
# Jean Zay as the BLOOM run saw it (CUDA_LAUNCH_BLOCKING=1's host time, NCCL's measured ring
# collectives over Omni-Path): bloom176b 8.9% -> 1.7%.
# FSDP2's unsharded fp32 gradient accumulation under pipeline parallelism (one HBM pass per
# micro-batch, costmodel/grad_accumulation.py): torchtitan-paper 15.5% -> 15.1%. PyTorch's ring
# attention collectives wait for the attention kernel beside them (no launch order without
# CUDA_DEVICE_MAX_CONNECTIONS=1, NCCL CTAs never share an SM; torchtitan.yaml): 15.1% -> 12.1%,
# overall 9.4% -> 9.1%.
# Hopper's persistent matmuls lose half their progress beside data-parallel collectives
# (pytorch#143988) and llm-foundry's flash path copies tokens out of and back into the padded
# batch (flash-attn bert_padding): llmfoundry-h100 17.7% -> 11.1%, overall 9.1% -> 7.8%.
LOSO_BOUNDS = {
    # torch.compile's fusion and torchao's float8 casts (costmodel/fusion.py) speed up every
    # compiled torchtitan-paper row, most of which the model already had too fast: 7.7% -> 7.9%;
    # Transformer Engine's backward casts the output gradient once (tokens x n, fused
    # cast-transpose), not the input twice (2 x tokens x k): -> 8.0%; torchtitan's eager block
    # counted kernel by kernel (59.7 hidden-width passes, was 28) and Inductor's with rotary's
    # complex multiply left to ATen: -> 7.9%; DeepSpeed 2021's re-gather (below): -> 7.8%.
    "overall": 0.08,
    # DeepSpeed 2021's trace offset (all four weights re-gathered for the recompute) and its
    # post-step gather of the persistent tensors (deepspeed-2021.yaml): 6.5% -> 5.3%.
    "narayanan21": 0.055,
    # Megatron-LM's default attention dropout runs as its own kernel beside the unfused softmax
    # (costmodel/compute.py): every row slower by 2-4%, on rows the model already had too slow;
    # and the full-recompute baseline rows run without sequence parallelism, as Table 5 states
    # (read with it before, which hid 1.4 points).
    "korthikanti22": 0.07,
    # Hopper's persistent matmuls slowed by overlapped data-parallel collectives (pytorch#143988)
    # add time to Megatron's overlapped gradient reduction on its under-predicted H100 rows;
    # --tp-comm-overlap counted from Transformer Engine's defaults (15/16 of the TP traffic
    # under a GEMM, megatron.yaml) took it from 10.0% to 8.0%.
    "megatron": 0.085,
    # ... nemo2407 3.7% -> 4.9%: its FP8 rows, already over-predicted, 0.4-2.3 points faster.
    "nemo2407": 0.05,
    "torchtitan": 0.035,
    "llmfoundry": 0.05,
    "bloom176b": 0.025,
    "megascale": 0.11,
    # ... torchtitan-paper 12.1% -> 12.8%: the Float8 rows of Table 1-2 go from -13% to -4%,
    # the compiled bf16 ones from -1%/+1% to +5.5%/+7%, the eager ones from +5.9%/+16% to
    # -3%/+6%, and the compiled Float8 rows of Tables 3-6 (4D, CP to 262k), already too fast,
    # 1-6 points faster still.
    "torchtitan-paper": 0.13,
    "llmfoundry-h100": 0.12,
}


def test_loso_regression_bounds(report: loso.LosoReport) -> None:
    summary = summarize(report.loso)
    assert summary["overall"]["rows"] == 175
    assert summary["overall"]["mape"] <= LOSO_BOUNDS["overall"]
    assert set(summary["per_source"]) == set(LOSO_BOUNDS) - {"overall"}
    for source, s in summary["per_source"].items():
        assert s["mape"] <= LOSO_BOUNDS[source], f"{source}: LOSO {s['mape']:.1%}"


def test_bands_come_from_loso_and_fall_back_to_parents(report: loso.LosoReport) -> None:
    document = bands.bands(report.loso)
    regimes = document["regimes"]
    assert all(r["rows"] >= bands.MIN_ROWS_PER_REGIME for k, r in regimes.items() if k != "overall")
    mapped, _ = cases(load_all(validation_data()))
    # A regime below the row minimum gets its parent's (wider population) band.
    sparse = next(
        c
        for c, r in zip(mapped, report.loso, strict=True)
        if r.regime not in regimes and f"{r.gpu_generation}/{r.mix}" in regimes
    )
    band = band_for(sparse.model, sparse.cluster, sparse.plan, sparse.framework, document)
    parent = f"{sparse.cluster.pace_device.generation}/{parallelism_mix(sparse.plan)}"
    assert band.relative == regimes[parent]["p80_abs_error"]
    cover = bands.coverage(mapped, report.loso, document)
    assert cover["overall"]["rows"] == 175
    # 80th-percentile bands over the same residuals cover about 80% of the rows.
    assert 0.7 <= cover["overall"]["coverage"] <= 0.9
    held = bands.coverage_held_out(mapped, report.loso)
    assert set(held["per_source"]) == set(cover["per_source"])


def test_shipped_bands_are_loso_bands() -> None:
    shipped = validation_bands()
    assert "leave-one-source-out" in shipped["source"]
    assert all(
        r["rows"] >= bands.MIN_ROWS_PER_REGIME
        for k, r in shipped["regimes"].items()
        if k != "overall"
    )


# --- layout ranking ---------------------------------------------------------------------------


def test_spearman_matches_its_definition() -> None:
    assert ranking.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ranking.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # ties share their average rank: ranks (0.5, 0.5, 2) against (0, 1, 2)
    assert ranking.spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(
        np.corrcoef([0.5, 0.5, 2], [0, 1, 2])[0, 1]
    )


def test_ranking_regret_and_optimism_on_the_sweep(validation_dir: Path) -> None:
    rows = load_rows(validation_dir / "layout_sweeps.csv")
    mapped, skipped = cases(rows)
    assert not skipped and len(mapped) == 30
    results = evaluate(rows)
    groups = {g.key: g for g in ranking.rank(mapped, results)}
    assert sum(g.layouts for g in groups.values()) == 30  # every measured layout ranked once
    big = max(groups.values(), key=lambda g: g.layouts)
    assert big.layouts == 17
    measured = {r.id: r.measured for r in results}
    # regret is the throughput lost by the pick against the best measured layout
    assert big.regret == pytest.approx(1 - measured[big.pick] / measured[big.best])
    # synthetic check: a model that predicts the measured values exactly has no regret
    exact = [dataclasses.replace(r, predicted=r.measured) for r in results]
    for g in ranking.rank(mapped, exact):
        assert g.regret == 0.0 and g.worst_optimism == 0.0
        assert g.layouts < 3 or g.spearman == pytest.approx(1.0)


def test_ranking_regression_bounds(validation_dir: Path) -> None:
    """The figures of docs/benchmarks.md 'Ranking layouts' (2026-12-01) plus a margin."""
    rows = load_all(validation_dir) + load_rows(validation_dir / "layout_sweeps.csv")
    mapped, _ = cases(rows)
    groups = ranking.rank(mapped, evaluate(rows))
    multi = [g for g in groups if g.layouts >= 3]
    assert max(g.regret for g in groups) <= 0.03
    assert np.median([g.spearman for g in multi]) >= 0.85
    # bad layouts no more optimistic than the rest, and not overcorrected into pessimism
    assert abs(np.median([g.worst_optimism for g in multi])) <= 0.05


def test_a_refitted_value_reaches_the_profiles_built_on_it() -> None:
    on_megatron = dataclasses.replace(
        ZERO3, profile="megatron", key="elementwise_hidden_passes", prior=16.0
    )
    profiles = fitted.apply(
        {on_megatron.name: 31.0},
        {"megatron", "nemo", "megatron-lm-2021", "generic", "torchtitan"},
        (on_megatron,),
    )
    for name in ("megatron", "nemo", "megatron-lm-2021"):  # nemo and the 2021 stack inherit it
        assert profiles[name].const("elementwise_hidden_passes") == 31.0, name
    for name in ("generic", "torchtitan"):
        assert profiles[name].const("elementwise_hidden_passes") != 31.0, name
