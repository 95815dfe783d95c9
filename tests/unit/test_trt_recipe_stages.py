"""The TensorRT-LLM recipes' context and generation server settings: read from a recipe's
``trtllm_config`` (``benchmarks/recipe_trt_stages.py``), kept per version in
``data/validation/serving/inferencex_disagg_trt_stages.csv`` and applied to a disaggregated
record as ``infer`` arguments (``inferencex_multinode.recipes_trt_stages``)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import load_records, read_record
from gpuscale.validation.inferencex_multinode import (
    TRT_STAGES_COLUMNS,
    TRT_STAGES_FILE,
    default_trt_stages,
    recipes_trt_stages,
)
from gpuscale.validation.inferencex_tables import load_tables
from tests.benchmark_scripts import load_benchmark

SERVING = DATA_DIR / "serving"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
load_benchmark(BENCHMARKS / "recipe_prefill_chunks.py", "recipe_prefill_chunks")
load_benchmark(BENCHMARKS / "recipe_frontends.py", "recipe_frontends")
stage_values = load_benchmark(BENCHMARKS / "recipe_trt_stages.py").stage_values

RECIPE = """
backend:
  type: trtllm
  trtllm_config:
    prefill:
      max_batch_size: 2
      max_num_tokens: 2048
      kv_cache_config:
        free_gpu_memory_fraction: 0.6
    decode:
      max_batch_size: 8
      kv_cache_config:
        dtype: fp8
"""


def test_a_recipe_gives_each_stage_its_own_settings() -> None:
    assert stage_values(RECIPE) == ("2", "2048", "0.6", "")
    # An SGLang recipe, or one without both stages, has none.
    assert stage_values("backend:\n  sglang_config:\n    prefill: {}\n") is None
    assert stage_values("backend:\n  trtllm_config:\n    decode: {}\n") is None


def _line(recipe: str, values: tuple[str, str, str, str], first: str, last: str) -> dict:
    keys = ("prefill_max_batch_size", "prefill_max_num_tokens")
    keys += ("prefill_kv_fraction", "decode_kv_fraction")
    return {
        "recipe": recipe,
        **dict(zip(keys, values, strict=True)),
        "first_day": first,
        "last_day": last,
    }


def test_the_settings_become_infer_arguments() -> None:
    table = [
        _line("recipes/trtllm/a.yaml", ("2", "2048", "0.6", "0.9"), "2026-01-01", "2026-03-01"),
        _line("recipes/trtllm/b.yaml", ("16", "16384", "", "0.8"), "2026-01-01", "2026-03-01"),
        _line("recipes/trtllm/c.yaml", ("16", "16384", "0.1", "0.8"), "2026-01-10", "2026-01-10"),
        _line("recipes/trtllm/c.yaml", ("16", "16384", "0.2", "0.8"), "2026-02-04", "2026-03-01"),
    ]
    kw, note = recipes_trt_stages(["recipes/trtllm/a.yaml"], "2026-02-10", table)
    assert kw == {
        "prefill_batch": 2,
        "engine_options": {
            "prefill_max_num_batched_tokens": 2048,
            "prefill_memory_fraction": 0.6,
            "memory_fraction": 0.9,
        },
    }
    assert "max_batch_size 2" in note
    # Not stated: the engine's default stays.
    kw, _ = recipes_trt_stages(["recipes/trtllm/b.yaml"], "2026-02-10", table)
    assert "prefill_memory_fraction" not in kw["engine_options"]
    # The version in force on the day; a day that does not decide, recipes that differ, or one
    # not on file: nothing.
    kw, _ = recipes_trt_stages(["recipes/trtllm/c.yaml"], "2026-02-10", table)
    assert kw["engine_options"]["prefill_memory_fraction"] == 0.2
    assert recipes_trt_stages(["recipes/trtllm/c.yaml"], "2026-02-04", table)[0] == {}
    kw, note = recipes_trt_stages(
        ["recipes/trtllm/a.yaml", "recipes/trtllm/b.yaml"], "2026-02-10", table
    )
    assert kw == {} and "differ" in note
    assert "not on file" in recipes_trt_stages(["recipes/trtllm/z.yaml"], "2026-02-10", table)[1]


def test_the_table_has_its_columns() -> None:
    with (SERVING / TRT_STAGES_FILE).open() as f:
        assert tuple(csv.DictReader(f).fieldnames or ()) == TRT_STAGES_COLUMNS
    assert all(ln["recipe"].startswith("recipes/trtllm/") for ln in default_trt_stages())


def test_tensorrt_llm_takes_the_prefill_workers_own_budget_and_fraction() -> None:
    def ttft(**options: float) -> tuple[float, float, float]:
        result = infer(
            "deepseek-r1",
            gpu="h200-sxm",
            engine="tensorrt-llm",
            input_len=1024,
            output_len=256,
            concurrency=64,
            prefill_workers=1,
            prefill_tp=8,
            prefill_ep=8,
            decode_workers=1,
            decode_tp=8,
            decode_ep=8,
            engine_options=options or None,
        )
        o = result.to_dict()["options"][0]
        return float(o["ttft_ms"]), float(o["ttft_ms_p50"]), float(o["ttft_ms_p99"])

    # 64 clients of 1k prompts on one TP8 context server: with a 64k budget the burst, and every
    # round after it, is one iteration, every first token at once (p50 = p99); with 2,048 tokens
    # (2 prompts an iteration) the first come sooner and the last later than with the default
    # 8,192 (8 prompts).
    default, small, large = (
        ttft(),
        ttft(prefill_max_num_batched_tokens=2048),
        ttft(prefill_max_num_batched_tokens=65536),
    )
    assert large[1] == pytest.approx(large[2])
    assert small[0] < default[0] < large[0]
    assert small[2] > default[2]
    assert ttft(prefill_memory_fraction=0.6)[0] > 0


def test_a_held_out_record_reads_its_context_servers() -> None:
    tables = load_tables(SERVING)
    rec = next(
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if r["hardware"] == "gb200"
        and r["framework"] == "dynamo-trt"
        and r["date"] == "2026-02-05"
        and r["spec_method"] == "none"
        and r["isl"] == "1024"
        and r["osl"] == "8192"
        and r["conc"] == "4"
    )
    row = read_record(rec, tables)
    # recipes/trtllm/gb200-fp8/1k8k/stp/ctx1_gen4_tep8_batch1_eplb0_mtp0_4.yaml: context
    # max_batch_size 16, max_num_tokens 16384, KV fraction 0.4; generation 0.9.
    assert row.kwargs["prefill_batch"] == 16
    opts = row.kwargs["engine_options"]
    assert opts["prefill_max_num_batched_tokens"] == 16384
    assert opts["prefill_memory_fraction"] == pytest.approx(0.4)
    assert opts["memory_fraction"] == pytest.approx(0.9)


def _trt_disagg(input_len: int, options: dict[str, int]) -> dict[str, float]:
    return infer(
        "deepseek-r1", gpu="b200", engine="tensorrt-llm", input_len=input_len, output_len=1024,
        prefill_workers=2, prefill_tp=4, prefill_ep=4, decode_workers=1, decode_tp=8,
        decode_ep=8, decode_attention_dp=8, concurrency=8, engine_options=options,
    ).to_dict()["options"][0]  # fmt: skip


def test_the_prompt_must_fit_the_context_servers_budget_not_the_generation_servers() -> None:
    # Only the context servers run prompts: their max_num_tokens must hold the whole prompt
    # (TensorRT-LLM does not chunk it), the generation servers' need not (fuzz, helper-146:
    # a 1-token context budget was accepted and a large one refused for the decode workers').
    with pytest.raises(InputError, match="prefill workers' max_num_batched_tokens 1 is below") as e:
        _trt_disagg(1024, {"prefill_max_num_batched_tokens": 1})
    # Both remedies work: the prefill workers' budget, or TensorRT-LLM's chunking for all.
    assert "prefill_max_num_batched_tokens=N) or turn chunking on (chunked_prefill=true)" in str(
        e.value
    )
    assert _trt_disagg(1024, {"prefill_max_num_batched_tokens": 1, "chunked_prefill": True})
    long = _trt_disagg(100_000, {"prefill_max_num_batched_tokens": 131_072})
    assert long["ttft_ms"] > 0.0
