"""SGLang's DeepEP all-to-all on NVL72 wide-EP decode: the engine options
(``moe_a2a_deepep``, ``decode_moe_a2a_deepep``), the disaggregated decode engine that carries
the decode-only one, the held-out records' reading of the GB200/GB300 Dynamo-SGLang recipes
(``inferencex_api.NVL72_SGLANG_DEEPEP``) and ``benchmarks/nvl72_wide_ep.py``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuscale.api.serving import _engine_options, infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import Pool, disaggregated_engines
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.validation.inferencex_api import read_record
from tests.benchmark_scripts import load_benchmark
from tests.unit.test_inferencex_api import _rec

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "nvl72_wide_ep.py"

# A GB300 Dynamo-SGLang FP4 record as the CSV holds it: 4 DEP4 prefill workers, one DEP48
# decode worker, 1k/1k at 2048 (the 2026-02-12 run of recipes/gb300-fp4/1k1k/max_tpt.yaml).
WIDE = {
    "hardware": "gb300",
    "framework": "dynamo-sglang",
    "precision": "fp4",
    "disagg": "true",
    "is_multinode": "true",
    "prefill_tp": "4",
    "prefill_ep": "4",
    "prefill_dp_attention": "true",
    "prefill_num_workers": "4",
    "decode_tp": "48",
    "decode_ep": "48",
    "decode_dp_attention": "true",
    "decode_num_workers": "1",
    "num_prefill_gpu": "16",
    "num_decode_gpu": "48",
    "conc": "2048",
    "image": "lmsysorg/sglang:v0.5.8.post1-cu130-runtime",
    "date": "2026-02-12",
}
DECODE = {
    "gpu": "gb200",
    "engine": "sglang",
    "weights": "nvfp4",
    "input_len": 1024,
    "output_len": 1024,
    "concurrency": 1024,
    "prefill_workers": 4,
    "prefill_tp": 4,
    "prefill_ep": 4,
    "prefill_attention_dp": 4,
    "decode_workers": 1,
    "decode_tp": 32,
    "decode_ep": 32,
    "decode_attention_dp": 32,
}


def _tpot(**options: bool) -> float:
    out = infer("deepseek-ai/DeepSeek-R1", engine_options=options or None, **DECODE)
    return float(out.to_dict()["options"][0]["tpot_ms"])


def _deepep(kwargs: dict[str, object]) -> dict[str, object]:
    """The DeepEP options of a reading (the recipes' other flags, e.g. the prefill workers'
    chunk, are read apart: test_recipe_prefill_chunks.py)."""
    opts = kwargs.get("engine_options") or {}
    assert isinstance(opts, dict)
    return {k: v for k, v in opts.items() if "deepep" in k}


def test_recipes_deepep_read_per_precision_and_decode_layout() -> None:
    fp4 = read_record(_rec(**WIDE))
    assert fp4.expressible
    assert _deepep(fp4.kwargs) == {"decode_moe_a2a_deepep": True}
    # Every recipe read stores the KV cache in FP8 (kv-cache-dtype fp8_e4m3).
    assert fp4.kwargs["kv_dtype"] == "fp8"
    # FP8 recipes run DeepEP on their DEP8 prefill workers too (deepep-mode normal).
    fp8 = read_record(_rec(**{**WIDE, "precision": "fp8", "date": "2026-02-09"}))
    assert _deepep(fp8.kwargs) == {"moe_a2a_deepep": True}
    # A TP decode worker has no attention-DP group to move tokens over: nothing is read.
    tp = read_record(
        _rec(
            **WIDE
            | {"decode_tp": "4", "decode_ep": "1", "decode_dp_attention": "false"}
            | {"num_decode_gpu": "4"}
        )
    )
    assert tp.expressible
    assert not _deepep(tp.kwargs) and tp.kwargs["kv_dtype"] == "fp8"
    # Outside the days whose recipes were read, and for other engines, nothing is read here; a
    # KV dtype there comes from the recipe stages' table, and says so.
    # (2026-03-01: its recipe's stages state fp8_e4m3, read from inferencex_disagg_sglang_stages.)
    expected = {"2026-02-11": None, "2026-03-01": "fp8", "b200": None}
    for change in ({"date": "2026-02-11"}, {"date": "2026-03-01"}, {"hardware": "b200"}):
        other = read_record(_rec(**{**WIDE, **change}))
        assert not _deepep(other.kwargs)
        assert not any("NVL72_SGLANG_DEEPEP" in n for n in other.assumptions)
        assert other.kwargs.get("kv_dtype") == expected[next(iter(change.values()))], change
        from_table = any("inferencex_disagg_sglang_stages.csv" in n for n in other.assumptions)
        assert from_table == ("kv_dtype" in other.kwargs)


def test_decode_only_deepep_reaches_the_decode_engine_alone() -> None:
    eng = dataclasses.replace(engine("sglang"), decode_moe_dp_communication="all_to_all")
    par = Parallelism(tp=32, ep=32, attention_dp=32)
    pool = Pool(workers=1, par=par)
    eng_p, eng_d = disaggregated_engines(
        eng, pool, pool, Workload(input_len=1024.0, output_len=1024.0)
    )
    assert eng_d.moe_dp_communication == "all_to_all"
    assert eng_p.moe_dp_communication == "gather_scatter"


def test_deepep_removes_the_gather_scatter_rings_of_a_wide_decode() -> None:
    default, a2a = _tpot(), _tpot(decode_moe_a2a_deepep=True)
    # The 32-rank gather/scatter rings cost about 15 ms a step (nvl72_wide_ep.py); the
    # all-to-all of the top-k copies a third of that.
    assert a2a < 0.8 * default
    assert _tpot(moe_a2a_deepep=True) == pytest.approx(a2a, rel=0.02)
    # Off: the engine's own gather/scatter, stated for the decode workers.
    off = _engine_options({"decode_moe_a2a_deepep": False}, "sglang")
    assert off == {"decode_moe_dp_communication": "gather_scatter"}


def test_deepep_options_refused_where_they_do_not_apply() -> None:
    kw = {"gpu": "gb200", "concurrency": 64, "tp": 8, "ep": 8, "attention_dp": 8}
    with pytest.raises(InputError, match="decode workers of disaggregated"):
        infer("deepseek-r1", engine="sglang", engine_options={"decode_moe_a2a_deepep": True}, **kw)
    with pytest.raises(InputError, match="sglang"):
        infer("deepseek-r1", engine="vllm", engine_options={"moe_a2a_deepep": True}, **kw)
    # The option prices the MoE exchange under attention DP only: on a dense model, or where
    # no pool it applies to runs attention DP, it would be ignored, so it is refused.
    on = {"moe_a2a_deepep": True}
    with pytest.raises(InputError, match="no experts"):
        infer("llama3.1-8b", engine="sglang", engine_options=on, gpu="h100-sxm", concurrency=8)
    with pytest.raises(InputError, match="--attention-dp > 1"):
        infer("deepseek-r1", engine="sglang", engine_options=on, **{**kw, "attention_dp": 1})
    no_dp = {**DECODE, "prefill_attention_dp": 1, "decode_attention_dp": 1}
    with pytest.raises(InputError, match="--prefill-attention-dp or --decode-attention-dp"):
        infer("deepseek-r1", engine_options=on, **no_dp)
    # Decode-only DeepEP with attention DP on the prefill workers alone.
    with pytest.raises(InputError, match="--decode-attention-dp > 1"):
        infer(
            "deepseek-r1", engine_options={"decode_moe_a2a_deepep": True},
            **{**DECODE, "decode_attention_dp": 1},
        )  # fmt: skip


def test_script_prints_the_step_both_ways() -> None:
    bench = load_benchmark(SCRIPT, "nvl72_wide_ep_benchmark")
    (line,) = bench.run(r"gb300.*1xtp48ep48dp_1024x1024_c2048", limit=1)
    assert line["deepep"] and line["wide"]
    step_a, step_d = line["step_deepep"], line["step_default"]
    # Only the MoE communication differs between the two readings of the step.
    assert step_a["experts"] == pytest.approx(step_d["experts"])
    assert step_a["communication"] < 0.5 * step_d["communication"]
    assert line["model_tpot_ms"] < line["default_tpot_ms"]
    for step in (step_a, step_d):
        parts = step["communication"] + step["experts"] + step["attention"] + step["rest"]
        assert parts == pytest.approx(step["total"])


def test_script_reads_every_record_with_the_launches_tables() -> None:
    # The script once read its records without the stated memory fractions and stopped on
    # SGLang's default-fraction refusal: every expressible NVL72 SGLang record must be priced.
    bench = load_benchmark(SCRIPT, "nvl72_wide_ep_benchmark")
    rows = bench.nvl72_rows()
    assert len(rows) >= 70
    lines = bench.run(limit=0)
    assert len(lines) == len(rows)
