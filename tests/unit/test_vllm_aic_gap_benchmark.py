"""benchmarks/vllm_aic_gap.py: the diagnosis of the vLLM 0.12.0 gap-analysis rows. The prompt
floor follows Little's law and the FP8 GEMM rate, the term split adds up to the model's
iteration, and the client-reuse shares follow aiperf's dataset sampling."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vllm_aic_gap.py"


@cache
def _load() -> ModuleType:
    return load_benchmark(SCRIPT, "vllm_aic_gap_benchmark")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _load()


@pytest.fixture(scope="module")
def rows(bench: ModuleType) -> list:
    return bench.vllm_gap_rows()


def _row(rows: list, model: str, tp: str, isl: str, osl: str) -> object:
    (row,) = [
        r
        for r in rows
        if model in r.raw["model_path"]
        and (r.raw["tp_size"], r.raw["isl"], r.raw["osl"]) == (tp, isl, osl)
    ]
    return row


def test_rows_are_the_vllm_012_gap_campaign(rows: list) -> None:
    models = {r.raw["model_path"] for r in rows}
    assert models == {
        "Qwen/Qwen3-32B",
        "Qwen/Qwen3-235B-A22B-FP8",
        "nvidia/Llama-3.1-8B-Instruct-FP8",
    }
    assert sum("Llama-3.1-8B" in r.raw["model_path"] for r in rows) == 21


def test_request_rate_is_littles_law(bench: ModuleType) -> None:
    # 10 clients, each request 100 ms to the first token then 9 x 10 ms: 10 / 0.19 s.
    assert bench.requests_per_s(10, 100.0, 10.0, 10) == pytest.approx(10 / 0.19)


def test_llama_fp8_prompts_exceed_the_gemm_rate(bench: ModuleType, rows: list) -> None:
    """TP1, 2000/100, C = 64: 59 requests/s of 2,000-token prompts at 2 x 6.98 GFLOP per token
    is 1.64 PFLOP/s, 83% of the H200's dense FP8 peak and above the cost profile's best FP8
    GEMM rate; its measured TPOT leaves ~1.3 ms per interleaved prompt above the model's decode
    step, against 21 ms of GEMMs at that rate."""
    row = _row(rows, "Llama-3.1-8B", "1", "2000", "100")
    it = bench.iteration_for(row)
    share = bench.prompt_share(row, it)
    assert share.requests_per_s == pytest.approx(58.9, abs=0.1)
    assert 0.80 < share.of_peak < 0.86
    assert share.of_best > 1.0
    split = bench.term_split(row, it)
    assert split.prompt_budget_ms(float(row.raw["silicon_tpot_ms"])) < 0.1 * share.floor_ms


def test_term_split_adds_up_to_the_iteration(bench: ModuleType, rows: list) -> None:
    row = _row(rows, "Llama-3.1-8B", "8", "8000", "100")
    it = bench.iteration_for(row)
    split = bench.term_split(row, it)
    n = np.array([40.0])
    mixed = it.time_s(n, np.array([8050.0]), np.array([8000.0]), np.array([4000.0]))[0] * 1e3
    assert split.decode_ms + split.prompt_ms == pytest.approx(mixed)
    # The host terms are the engine profile's: 0.4 ms + 6 us x 40 running.
    assert split.host_ms == pytest.approx(0.4 + 0.006 * 40)
    # The predicted TPOT is the interleaved prompts, not the host: 39 prompts per 99 tokens.
    assert split.prompts_per_token == pytest.approx(39 / 99)
    assert split.prompts_per_token * split.prompt_ms > 3 * split.decode_ms


def test_qwen3_32b_16bit_rows_fit_the_gemm_rate(bench: ModuleType, rows: list) -> None:
    """The other campaign's full-prefill TPOT agrees (docs): its prompt floor stays below the
    profile's best rate on every row."""
    for row in rows:
        if row.raw["model_path"] == "Qwen/Qwen3-32B" and not row.raw["gemm_quant_mode"]:
            assert bench.prompt_share(row, bench.iteration_for(row)).of_best < 1.0


def test_repeat_share_shuffle_is_exact(bench: ModuleType) -> None:
    # C = 8: requests 16..175 measured; 100..175 repeat a prompt: 76 of 160.
    assert bench.aiperf_repeat_share(8, "shuffle") == pytest.approx(76 / 160)
    # C = 64: warm-up alone sends 128 > 100 prompts, every measured request repeats.
    assert bench.aiperf_repeat_share(64, "shuffle") == 1.0
    with pytest.raises(ValueError):
        bench.aiperf_repeat_share(8, "sequential")
    # The eval runner of the rows' date: 12*C entries for 2*C warm-up + 10*C measured, no repeat.
    assert bench.aiperf_repeat_share(8, "shuffle", 96, rounds=10) == 0.0


def test_the_rows_client_is_the_eval_runner(bench: ModuleType, rows: list) -> None:
    assert {bench.client_of(row) == (10.0, 12 * row.concurrency) for row in rows} == {True}


@given(st.integers(min_value=1, max_value=512))
def test_repeat_share_random_is_a_probability_rising_with_load(c: int) -> None:
    bench = _load()
    a = bench.aiperf_repeat_share(c, "random")
    b = bench.aiperf_repeat_share(c + 1, "random")
    assert 0.0 <= a <= b <= 1.0
