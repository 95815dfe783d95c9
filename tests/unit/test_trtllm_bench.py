"""The reading of TensorRT-LLM's published maximum-throughput runs
(gpuscale.validation.trtllm_bench)."""

from __future__ import annotations

import csv

import pytest

from gpuscale import catalog
from gpuscale.validation.error_summary import error_summary
from gpuscale.validation.trtllm_bench import (
    LAUNCHES,
    OVERVIEW_GRAPH_SIZES,
    ROWS_CSV,
    engine_settings,
    infer_arguments,
    read_rows,
)


def test_the_heuristic_reproduces_trtllm_bench_by_hand() -> None:
    # Llama 3.1 8B FP8 on one H100 (79.6 GiB), 1000/1000 tokens, KV share 0.95: 7.48 GiB of
    # weights, 64 KiB of FP8 KV a token, (79.6 - 7.48) x 0.95 / (6.1e-5 x 2000) = 561 requests
    # -> 640 (steps of 128); 1,123 tokens -> 2,048 (the floor).
    spec = catalog.model("llama3.1-8b")
    s = engine_settings(spec, 79.6, 1, 1, 1000, 1000, "fp8", 1.0, 0.95)
    assert s is not None and (s.max_batch_size, s.max_num_tokens) == (640, 2048)
    # Short requests hit the 4,096 cap, and the budget follows the lengths' ratio.
    short = engine_settings(spec, 79.6, 1, 1, 128, 128, "fp8", 1.0, 0.95)
    assert short is not None and (short.max_batch_size, short.max_num_tokens) == (4096, 8192)
    # Without chunked prefill the budget holds a whole prompt plus the cap.
    long = engine_settings(spec, 79.6, 1, 1, 20000, 2000, "fp8", 1.0, 0.95)
    assert long is not None and long.max_num_tokens >= 20000 + long.max_batch_size
    # Pipeline stages split the cap; nothing fits when the weights fill the GPUs.
    assert engine_settings(catalog.model("llama3.1-405b"), 79.6, 1, 1, 128, 128, "fp8", 1.0,
                           0.95) is None  # fmt: skip


def test_every_cell_is_read_or_says_why() -> None:
    rows = read_rows()
    with ROWS_CSV.open(newline="", encoding="utf-8") as f:
        raw = list(csv.DictReader(f))
    assert len(rows) == len(raw) > 4000
    read = [r for r in rows if not r.not_read()]
    assert len(read) > 2500
    assert {r.version for r in read} >= {"0.12.0", "0.17", "0.21 (hint)", "1.0 (hint)"}
    for r in rows:
        if r.not_read():
            continue
        args = infer_arguments(r)
        if args is None:
            continue
        assert args["concurrency"] == args["num_requests"] == r.num_requests
        sizes = args["engine_options"].get("cuda_graph_batch_sizes", ())
        assert sizes in ((), OVERVIEW_GRAPH_SIZES)
        assert (LAUNCHES[r.version].graph_sizes != ()) == bool(sizes)
    # A version that reports per GPU is read as the deployment's total.
    per_gpu = [(r, x) for r, x in zip(rows, raw, strict=True) if "per GPU" in x["metric"]]
    multi = [(r, x) for r, x in per_gpu if r.tp * r.pp > 1]
    assert multi
    for r, x in multi:
        assert r.measured == pytest.approx(float(x["value"]) * r.tp * r.pp)
    # DEPn: tensor parallel n with n-way expert and attention data parallelism.
    dep = [r for r in rows if r.parallel.startswith("DEP")]
    assert dep and all(r.ep == r.tp == r.attention_dp for r in dep)


def test_rows_it_cannot_read_name_the_reason() -> None:
    reasons = {r.not_read() for r in read_rows() if r.not_read()}
    assert any("not in the catalog" in x for x in reasons)
    assert any("CUDA graphs unintentionally off" in x for x in reasons)
    assert any("gptManagerBenchmark" in x for x in reasons)


def test_error_summary() -> None:
    s = error_summary([0.1, -0.3, 0.25])
    assert s.n == 3
    assert s.mape == pytest.approx(0.65 / 3)
    assert s.median_abs == pytest.approx(0.25)
    assert s.median_bias == pytest.approx(0.1)
    assert s.within_20 == pytest.approx(1 / 3)
    assert error_summary([]).n == 0


def test_chunked_prompts_keep_the_heuristics_budget() -> None:
    # gptManagerBenchmark --enable_chunked_context: no whole prompt need fit in one iteration,
    # so the engine keeps the heuristic's budget instead of raising it to prompt plus cap.
    spec = catalog.model("llama3.1-8b")
    whole = engine_settings(spec, 95.58, 1, 1, 20000, 2000, "fp8", 1.0, 0.95)
    chunked = engine_settings(spec, 95.58, 1, 1, 20000, 2000, "fp8", 1.0, 0.95,
                              chunked_prefill=True)  # fmt: skip
    assert whole is not None and chunked is not None
    assert chunked.max_batch_size == whole.max_batch_size
    assert chunked.max_num_tokens < 20000 <= whole.max_num_tokens


def test_gh200_cells_read_as_the_96gb_superchip_and_its_launch() -> None:
    rows = [r for r in read_rows() if r.gpu_name.startswith("GH200")]
    assert rows and all(r.gpu == "gh200" for r in rows)
    # One GPU a superchip: the tables do not say what joined the TP2/TP4 GH200s.
    multi = [r for r in rows if r.tp * r.pp > 1]
    assert multi and all(r.not_read() for r in multi)
    assert sum("joined is not stated" in r.not_read() for r in multi) > 50
    # 0.15 and 0.17 ran GH200 through gptManagerBenchmark with chunked context at 0.95.
    legacy = [r for r in rows if r.version in ("0.15.0", "0.17") and not r.not_read()]
    assert legacy
    for r in legacy:
        args = infer_arguments(r)
        assert args is not None and args["gpu"] == "gh200"
        assert args["engine_options"]["chunked_prefill"] is True
        assert args["engine_options"]["memory_fraction"] == 0.95
    # The same versions' other GPUs ran trtllm-bench, chunked prefill off.
    h100 = next(r for r in read_rows() if r.version == "0.17" and r.gpu == "h100-sxm"
                and not r.not_read())  # fmt: skip
    args = infer_arguments(h100)
    assert args is not None and args["engine_options"]["chunked_prefill"] is False


def test_mixtral_8x22b_is_its_published_size() -> None:
    from gpuscale.costmodel.params import total_params

    spec = catalog.model("mistralai/Mixtral-8x22B-Instruct-v0.1")
    assert spec.num_experts == 8 and spec.experts_per_token == 2
    assert total_params(spec) / 1e9 == pytest.approx(141, rel=0.01)  # Mistral: 141B total
    assert any(r.model == "mixtral-8x22b" and not r.not_read() for r in read_rows())


def test_llama4_cells_past_one_attention_chunk_are_not_read() -> None:
    rows = [r for r in read_rows() if r.model in ("llama4-scout", "llama4-maverick")]
    assert rows
    for r in rows:
        past = r.input_len + r.output_len > 8192
        reason = r.not_read()
        assert ("attention chunks, which are not priced" in reason) == (past and not reason.
                startswith(("GPU", "the version", "model")))  # fmt: skip
    assert any(not r.not_read() for r in rows)
