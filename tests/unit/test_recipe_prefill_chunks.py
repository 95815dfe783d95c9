"""The prefill workers' own chunk, prompt limit and running cap: the ``prefill_*`` engine
options (``api.serving.STAGE_OPTIONS``, ``deployment.prefill_worker_engine`` /
``prefill_rank_engine``) and ``prefill_batch``, the srt-slurm recipes' prefill-stage
``chunked-prefill-size``, ``max-prefill-tokens``, ``mem-fraction-static`` and
``max-running-requests`` (``data/validation/serving/inferencex_disagg_prefill_chunks.csv``,
``benchmarks/recipe_prefill_chunks.py``) and their reading for the held-out records
(``inferencex_multinode.multinode_prefill_chunk``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import (
    Pool,
    disaggregated_engines,
    prefill_rank_engine,
    prefill_worker_engine,
)
from gpuscale.planner.serving.steady_state import Workload
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import load_records, read_record
from gpuscale.validation.inferencex_multinode import (
    MTP_RECIPES_FILE,
    PLAIN_RECIPES_FILE,
    PREFILL_CHUNKS_FILE,
    load_multinode_recipes,
    multinode_prefill_chunk,
    recipe_prefill_values,
    recipes_prefill_chunk,
)
from gpuscale.validation.serving_rows import load
from tests.benchmark_scripts import load_benchmark

SERVING = DATA_DIR / "serving"
CHUNKS = load_multinode_recipes(SERVING / PREFILL_CHUNKS_FILE)
PLAIN = load_multinode_recipes(SERVING / PLAIN_RECIPES_FILE)
MTP = load_multinode_recipes(SERVING / MTP_RECIPES_FILE)
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "recipe_prefill_chunks.py"
B200_STP = "recipes/b200-fp4/1k1k/stp/low-latency-dep4-1p-tep8-5d.yaml"
B200_RECORD = (
    "dsr1_b200_dynamo-sglang_fp8_none_disagg_1xtp8ep8-4xtp8ep8_8192x1024_c64_run21776201394/1"
)
"""A B200 Dynamo-SGLang FP8 8k/1k record of 2026-02-07 (one TP8 prefill worker, four TP8
decode workers) whose recipe's prefill stage states (32768, 32768)."""
H200_RECORD = "dsr1_h200_dynamo-sglang_fp8_none_disagg_1xtp8ep8dp-6xtp8ep8dp_1024x1024_c128"
"""An H200 Dynamo-SGLang 1k/1k record of 2026-02-07 that the plain entry (recipe
``h200/1k1k/bs256-1p6d-dep.yaml``) and the MTP entry of the same deployment
(``bs256-1p6d-dep-mtp.yaml``) both match by the entry rule."""


def _record(prefix: str) -> dict[str, str]:
    (rec,) = [
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if read_record(r).id.startswith(prefix)
    ][:1]
    return rec


def test_table_reads_the_b200_stp_recipe_as_32768() -> None:
    assert recipe_prefill_values(B200_STP, "2026-03-10", CHUNKS) == (
        ("32768", "32768", "0.85", "512"),
        "",
    )
    # Every SGLang recipe path the multi-node tables name is on file, the two aggregated H200
    # files without a prefill stage.
    script = load_benchmark(SCRIPT, "recipe_prefill_chunks")
    assert {ln["recipe"] for ln in CHUNKS} == set(script.sglang_recipes(SERVING))
    assert sorted(ln["recipe"] for ln in CHUNKS if ln["prefill_stage"] == "no") == [
        "recipes/h200/1k1k/bs128-agg-tp.yaml",
        "recipes/h200/8k1k/bs128-agg-tp.yaml",
    ]


def test_b200_record_reads_its_recipes_prefill_chunk() -> None:
    row = read_record(_record(B200_RECORD))
    assert row.expressible
    opts = row.kwargs["engine_options"]
    assert opts["prefill_max_num_batched_tokens"] == 32768
    assert opts["prefill_max_prefill_tokens"] == 32768
    assert opts["prefill_memory_fraction"] == 0.85
    # --max-running-requests 512 on a TP8 prefill worker without attention DP: 512 prompts.
    assert row.kwargs["prefill_batch"] == 512
    assert any("prefill --chunked-prefill-size 32768" in n for n in row.assumptions)


def test_prefill_option_moves_the_prefill_workers_only() -> None:
    """The recipe's prefill chunk (32,768) against SGLang's B200 default (16,384) on the
    8k-prompt record: the TTFT moves, the decode workers' TPOT is the same to the bit at the
    same arrival rate (an open loop: a closed loop's rate, and with it the requests each decode
    iteration carries, follows its TTFT)."""
    row = read_record(_record(B200_RECORD))
    opts = row.kwargs["engine_options"]
    open_loop = {k: v for k, v in row.kwargs.items() if k != "concurrency"}
    open_loop["request_rate"] = 1.0
    without = {
        **open_loop,
        "engine_options": {k: v for k, v in opts.items() if not k.startswith("prefill_")},
    }
    a = infer(row.model, **open_loop).to_dict()["options"][0]
    b = infer(row.model, **without).to_dict()["options"][0]
    assert a["ttft_ms"] != pytest.approx(b["ttft_ms"], rel=1e-2)
    assert a["tpot_ms"] == b["tpot_ms"]


def test_prefill_rank_engine_splits_the_prefill_chunk_alone() -> None:
    eng = dataclasses.replace(
        engine("sglang"), prefill_max_num_batched_tokens=32768, prefill_max_prefill_tokens=8192
    )
    prefill = Pool(workers=1, par=Parallelism(tp=4, ep=4, attention_dp=4))
    decode = Pool(workers=1, par=Parallelism(tp=8, ep=8))
    rank = prefill_rank_engine(eng, prefill)
    assert rank.max_num_batched_tokens == 32768 // 4  # SGLang chunked_prefill_size // dp_size
    assert rank.max_prefill_tokens == 8192  # not divided
    eng_p, eng_d = disaggregated_engines(
        eng, prefill, decode, Workload(input_len=8192.0, output_len=1024.0)
    )
    assert eng_p.max_num_batched_tokens == 8192
    assert eng_d.max_num_batched_tokens == engine("sglang").max_num_batched_tokens
    assert eng_d.max_prefill_tokens == engine("sglang").max_prefill_tokens
    # A stated prefill fraction replaces SGLang's rule (which derives it from the chunk) there.
    stated = prefill_worker_engine(dataclasses.replace(eng, prefill_memory_fraction=0.6))
    assert (stated.memory_fraction, stated.static_memory_rule) == (0.6, None)
    assert eng_d.static_memory_rule == engine("sglang").static_memory_rule
    # --chunked-prefill-size -1: no chunking, each batch bounded by the undivided limit.
    off = dataclasses.replace(engine("sglang"), prefill_chunked_prefill=False)
    rank_off = prefill_rank_engine(off, prefill)
    assert not rank_off.chunked_prefill
    assert rank_off.max_num_batched_tokens == off.max_prefill_tokens
    assert prefill_worker_engine(off).max_num_batched_tokens == off.max_prefill_tokens


def test_prefill_options_refused_for_aggregated_serving_in_one_line() -> None:
    agg: dict[str, Any] = {
        "gpu": "h200-sxm", "engine": "sglang", "concurrency": 8, "input_len": 1024,
    }  # fmt: skip
    opts: dict[str, Any]
    for opts in (
        {"prefill_max_num_batched_tokens": 4096},
        {"prefill_max_prefill_tokens": 4096, "prefill_chunked_prefill": False},
    ):
        with pytest.raises(InputError, match="prefill workers of disaggregated") as err:
            infer("llama3.1-8b", engine_options=opts, **agg)
        assert "\n" not in str(err.value)
    disagg: dict[str, Any] = {**agg, "prefill_workers": 1, "decode_workers": 1}
    both = {"prefill_max_num_batched_tokens": 4096, "prefill_chunked_prefill": False}
    with pytest.raises(InputError, match="contradict"):
        infer("llama3.1-8b", engine_options=both, **disagg)
    with pytest.raises(InputError, match="sglang"):
        infer(
            "llama3.1-8b",
            engine_options={"prefill_max_num_batched_tokens": 4096},
            **{**disagg, "engine": "vllm"},
        )


def test_record_whose_recipes_disagree_gets_no_option_and_a_note() -> None:
    """The plain and MTP entries of one H200 deployment both match the non-MTP record by the
    entry rule (``read_record`` gives each record its own kind's table): their recipes state
    (262144, 65536) and, on 2026-02-07, (65536, 65536)."""
    rec = _record(H200_RECORD)
    assert rec["date"] == "2026-02-07"
    opts, note = multinode_prefill_chunk(rec, "h200_sxm", [*PLAIN, *MTP], CHUNKS, 8)
    assert opts == {}
    assert "different prefill" in note
    assert "(262144, 65536, 0.75, 512), (65536, 65536, 0.82, 64)" in note
    # Its own kind's entries agree; the running cap is split over the 8 attention-DP ranks.
    opts, _ = multinode_prefill_chunk(rec, "h200_sxm", PLAIN, CHUNKS, 8)
    assert opts == {
        "engine_options": {
            "prefill_max_num_batched_tokens": 262144,
            "prefill_max_prefill_tokens": 65536,
            "prefill_memory_fraction": 0.75,
        },
        "prefill_batch": 512 // 8,
    }
    row = read_record(rec)
    assert row.kwargs["engine_options"]["prefill_max_num_batched_tokens"] == 262144
    assert row.kwargs["prefill_batch"] == 64


def test_changed_recipe_is_read_only_where_the_day_decides() -> None:
    """h200/1k1k/bs256-1p6d-dep-mtp.yaml: 262144 in its first versions, 65536 from a later
    commit the same day (2026-02-05); gb200-fp8/8k1k/low-latency.yaml: 24576 to 2026-03-03, a
    sweep version on 2026-04-08."""
    mtp = "recipes/h200/1k1k/bs256-1p6d-dep-mtp.yaml"
    value, why = recipe_prefill_values(mtp, "2026-02-05", CHUNKS)
    assert value is None and "does not decide" in why
    assert recipe_prefill_values(mtp, "2026-02-04", CHUNKS)[0] is None
    assert recipe_prefill_values(mtp, "2026-02-20", CHUNKS)[0] == ("65536", "65536", "0.82", "64")
    low = "recipes/gb200-fp8/8k1k/low-latency.yaml"
    # Its prefill fraction changed on 2026-02-04 (0.95 -> 0.8): that day decides nothing.
    assert recipe_prefill_values(low, "2026-02-10", CHUNKS)[0] == ("24576", "", "0.8", "512")
    assert recipe_prefill_values(low, "2026-02-04", CHUNKS)[0] is None
    value, why = recipe_prefill_values(low, "2026-04-09", CHUNKS)
    assert value is None and "sweep" in why


PLAIN_YAML = """
backend:
  sglang_config:
    prefill:
      max-prefill-tokens: 8192
      chunked-prefill-size: -1
      mem-fraction-static: 0.7
      max-running-requests: 8
    decode:
      chunked-prefill-size: 786432
      mem-fraction-static: 0.85
      max-running-requests: 128
"""
SWEEP_YAML = """
base:
  backend:
    sglang_config:
      prefill:
        chunked-prefill-size: 16384
        mem-fraction-static: 0.6
zip_override_a:
  backend:
    sglang_config:
      prefill:
        max-prefill-tokens: [8192, 16384]
        chunked-prefill-size: [8192, 16384]
"""


def test_regen_script_reads_the_prefill_stage_of_a_yaml() -> None:
    script = load_benchmark(SCRIPT, "recipe_prefill_chunks")
    # The decode stage's values are left out.
    assert script.prefill_values(PLAIN_YAML) == ("-1", "8192", "0.7", "8")
    assert script.prefill_values(SWEEP_YAML) == ("8192 16384", "8192 16384", "0.6", "")
    bare = "backend:\n  sglang_config:\n    prefill:\n      tp: 8\n"
    assert script.prefill_values(bare) == ("", "", "", "")
    assert script.prefill_values("backend:\n  sglang_config:\n    aggregated: {}\n") is None


def test_minus_one_reads_as_chunking_off() -> None:
    rec = _record(B200_RECORD)
    (recipe,) = {
        ln["recipe"] for ln in PLAIN if ln["system"] == "b200" and rec["conc"] in ln["concurrencies"].split()
        and ln["framework"] == rec["framework"] and ln["isl"] == rec["isl"]
        and ln["prefill_tp"] == rec["prefill_tp"] and ln["decode_workers"] == rec["decode_num_workers"]
    }  # fmt: skip
    table = [{**ln, "chunked_prefill_size": "-1"} for ln in CHUNKS if ln["recipe"] == recipe]
    opts, note = multinode_prefill_chunk(rec, "b200", PLAIN, table, 1)
    assert opts == {
        "engine_options": {
            "prefill_chunked_prefill": False,
            "prefill_max_prefill_tokens": 32768,
            "prefill_memory_fraction": 0.85,
        },
        "prefill_batch": 512,
    }
    assert "--chunked-prefill-size -1" in note


def test_serving_rows_read_the_same_recipes_prefill_stage() -> None:
    """The H100/H200 SGLang disaggregated rows (``serving_rows``), matched to their recipes by
    ``serving_recipes.disagg_recipe_entries``, read the prefill stage as the held-out records
    do: the H100 recipes' (2048, 2048, 0.6) beside the decode stage's fraction."""
    rows = [
        r
        for r in load(SERVING / "aiconfigurator_silicon_hopper.csv")
        if r.mode == "disagg" and r.engine == "sglang" and r.expressible
    ]
    h100 = [r for r in rows if r.raw["system"] == "h100_sxm"]
    assert h100
    for r in h100:
        opts = r.kwargs["engine_options"]
        assert opts["prefill_max_num_batched_tokens"] == 2048
        assert opts["prefill_max_prefill_tokens"] == 2048
        assert opts["prefill_memory_fraction"] == 0.6
        assert opts["memory_fraction"] == 0.9  # the decode stage's, both pools otherwise


def test_running_cap_is_split_over_the_attention_dp_ranks() -> None:
    """SGLang gives each attention-DP rank ``max_running_requests // dp_size``
    (``model_runner.py``): the B200 FP8 8k/1k recipes' prefill stage states 8 over 8 ranks, one
    prompt per rank per batch; a cap below the DP width still leaves each rank one (a launch
    left with 0 refuses to start), and a recipe that states none sets nothing."""
    recipe = "recipes/b200-fp8/8k1k_stp_maxtpt_0.yaml"
    (value, _) = recipe_prefill_values(recipe, "2026-04-01", CHUNKS)
    assert value is not None and value[3] == "8"
    opts, note = recipes_prefill_chunk([recipe], "2026-04-01", CHUNKS, 8)
    assert opts["prefill_batch"] == 1 and "--max-running-requests 8" in note
    assert recipes_prefill_chunk([recipe], "2026-04-01", CHUNKS, 16)[0]["prefill_batch"] == 1
    unstated = [{**ln, "max_running_requests": ""} for ln in CHUNKS if ln["recipe"] == recipe]
    opts, note = recipes_prefill_chunk([recipe], "2026-04-01", unstated, 8)
    assert "prefill_batch" not in opts and "--max-running-requests default" in note
