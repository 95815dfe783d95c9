"""The ``--kv-cache-dtype`` of InferenceX's single-node SGLang DeepSeek-R1 scripts
(``inferencex_mem_fractions.csv`` column ``kv_cache_dtype``, read with ``git show`` in
SemiAnalysisAI/InferenceX) reaches the held-out records as the API's ``kv_dtype``: B200/B300
``fp8_e4m3`` -> ``fp8``; H200's scripts pass none (``auto``: the engine's own rule, no keyword);
versions in force on one day that disagree leave the record not expressible."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import API_FILE, load_records, read_record
from gpuscale.validation.inferencex_memory import (
    MEM_FRACTIONS_FILE,
    load_fractions,
    stated_kv_cache,
)
from gpuscale.validation.inferencex_tables import InferenceXTables, load_tables
from gpuscale.validation.serving_launches import stated_kv_cache_dtype

SERVING = DATA_DIR / "serving"
FRACTIONS = load_fractions(SERVING / MEM_FRACTIONS_FILE)
TABLES = load_tables(SERVING)
RECORDS = load_records(SERVING / API_FILE)


def _record(hardware: str, precision: str, day: str, **kw: str) -> dict[str, str]:
    """The first aggregated SGLang record of the project's InferenceX export at ``hardware``,
    ``precision`` and ``day`` (and any other field given)."""
    want = {"hardware": hardware, "precision": precision, "date": day, **kw}
    return next(
        r
        for r in RECORDS
        if r["framework"] == "sglang"
        and r["disagg"] == "false"
        and all(r[k] == v for k, v in want.items())
    )


def _kv(**kw: Any) -> tuple[str | None, str, str]:
    at: dict[str, Any] = {"backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
    return stated_kv_cache(FRACTIONS, **{**at, **kw})


def test_the_scripts_kv_dtype_by_gpu_and_day() -> None:
    # dsr1_fp4_b300.sh at 9ebeafb4e: --kv-cache-dtype fp8_e4m3.
    value, note, refused = _kv(system="b300", precision="fp4", day="2026-04-17", tp=4)
    assert (value, refused) == ("fp8", "")
    assert "dsr1_fp4_b300.sh@9ebeafb4e" in note and "fp8_e4m3" in note
    # dsr1_fp8_h200.sh (every version): no --kv-cache-dtype.
    assert _kv(system="h200_sxm", precision="fp8", day="2026-03-25", tp=8)[0] == "auto"
    # dsr1_fp8_mi300x.sh: none at b0c4ed21b, fp8_e4m3 from 32772c579 (2026-01-23).
    assert _kv(system="mi300x", precision="fp8", day="2026-01-22", tp=8)[0] == "auto"
    assert _kv(system="mi300x", precision="fp8", day="2026-02-10", tp=8)[0] == "fp8"
    # No script on file for the day (before the first line): nothing, and no refusal.
    assert _kv(system="b300", precision="fp4", day="2025-10-01", tp=4) == (None, "", "")
    # Disaggregated recipe lines are not read: no agg line, nothing.
    assert stated_kv_cache(
        FRACTIONS,
        system="gb200",
        backend="sglang",
        day="2026-02-05",
        model="deepseek-ai/DeepSeek-R1",
        precision="fp8",
    ) == (None, "", "")


def test_a_b300_fp4_record_reads_fp8_kv() -> None:
    row = read_record(_record("b300", "fp4", "2026-04-17"), TABLES)
    assert row.expressible and row.kwargs["kv_dtype"] == "fp8"
    assert any("--kv-cache-dtype fp8_e4m3" in n for n in row.assumptions)
    # Without the table the record keeps the engine's rule (no keyword).
    assert "kv_dtype" not in read_record(_record("b300", "fp4", "2026-04-17")).kwargs


def test_an_h200_record_keeps_the_default() -> None:
    row = read_record(_record("h200", "fp8", "2026-03-25"), TABLES)
    assert row.expressible and "kv_dtype" not in row.kwargs
    assert not any("--kv-cache-dtype" in n for n in row.assumptions)


def test_a_reading_that_states_a_kv_dtype_or_a_disaggregated_one_is_left_alone() -> None:
    raw = {
        "backend": "sglang", "mode": "agg", "system": "b300", "precision": "fp4",
        "model_path": "deepseek-ai/DeepSeek-R1", "silicon_data_source": "x; measured=2026-04-17",
    }  # fmt: skip
    assert stated_kv_cache_dtype(raw, {"tp": 4}, FRACTIONS)[0] == {"kv_dtype": "fp8"}
    assert stated_kv_cache_dtype(raw, {"tp": 4, "kv_dtype": "bf16"}, FRACTIONS) == ({}, "", "")
    assert stated_kv_cache_dtype({**raw, "mode": "disagg"}, {"tp": 4}, FRACTIONS) == ({}, "", "")
    assert stated_kv_cache_dtype({**raw, "backend": "vllm"}, {"tp": 4}, FRACTIONS) == ({}, "", "")


def _two_versions() -> list[dict[str, str]]:
    """b.sh replaces a.sh on 2026-01-31: a.sh passes no flag, b.sh fp8_e4m3."""
    line = dict.fromkeys(FRACTIONS[0], "")
    line.update(
        system="b300", backend="sglang", model="deepseek-ai/DeepSeek-R1", precision="fp4",
        spec="none", mode="agg", stage="agg", from_day="2026-01-01", to_day="2026-01-31",
        mem_fraction_static="0.85", path="a.sh", commit="c1",
    )  # fmt: skip
    return [
        {**line, "kv_cache_dtype": "auto"},
        {**line, "kv_cache_dtype": "fp8_e4m3", "path": "b.sh", "from_day": "2026-01-31"},
    ]


def test_versions_that_disagree_on_a_day_refuse_the_record() -> None:
    table = _two_versions()
    at: dict[str, Any] = {"system": "b300", "backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
    assert stated_kv_cache(table, **at, precision="fp4", day="2026-01-15")[0] == "auto"
    value, _, refused = stated_kv_cache(table, **at, precision="fp4", day="2026-01-31")
    assert value is None
    assert refused.startswith("not expressible: ") and "a.sh@c1, b.sh@c1" in refused
    assert "(auto, fp8_e4m3)" in refused
    # The same table refuses the record of that day (the fractions agree: only the KV differs).
    rec = _record("b300", "fp4", "2026-04-17", decode_tp="4")
    row = read_record({**rec, "date": "2026-01-31"}, InferenceXTables(fractions=table))
    assert not row.expressible and "--kv-cache-dtype (auto, fp8_e4m3)" in row.reason


def test_a_value_the_model_does_not_express_is_refused() -> None:
    table = [{**_two_versions()[0], "kv_cache_dtype": "fp4_e2m1"}]
    at: dict[str, Any] = {"system": "b300", "backend": "sglang", "model": "deepseek-ai/DeepSeek-R1"}
    value, _, refused = stated_kv_cache(table, **at, precision="fp4", day="2026-01-15")
    assert value is None and "fp4_e2m1" in refused and "not modelled" in refused


@pytest.mark.parametrize("precision", ["fp4", "fp8"])
def test_fp8_kv_holds_twice_the_tokens_and_reads_faster(precision: str) -> None:
    # B300 FP4 (nvfp4 weights quantized from the 16-bit-KV checkpoint) and FP8: SGLang's auto
    # keeps bf16 KV (2 bytes), the scripts' fp8_e4m3 stores 1 byte per element.
    row = read_record(_record("b300", precision, "2026-04-17", spec_method="none"), TABLES)
    assert row.kwargs["kv_dtype"] == "fp8"
    fp8 = infer(row.model, **row.kwargs).prediction
    auto = infer(row.model, **{k: v for k, v in row.kwargs.items() if k != "kv_dtype"}).prediction
    assert fp8.kv_tokens_per_rank == pytest.approx(2 * auto.kv_tokens_per_rank, rel=1e-9)
    assert fp8.tpot_s < auto.tpot_s
