"""gpuscale.validation.inferencex_api: InferenceX's published DeepSeek-R1 records read into
``gpuscale.api.infer`` arguments, or marked not expressible with a reason."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.client_tokenizer import CLIENT_TOKENS_FILE, load_server_prompts
from gpuscale.validation.inferencex_api import (
    API_FILE,
    COLUMNS,
    MTP_UNKNOWN,
    NOT_EXPRESSIBLE,
    dedupe,
    distinct_measurements,
    engine_version,
    load_records,
    merge_parts,
    read_record,
    read_records,
    seen,
    seen_index,
    write_records,
)
from gpuscale.validation.inferencex_memory import MEM_FRACTIONS_FILE, load_fractions
from gpuscale.validation.inferencex_multinode import (
    FRONTENDS_FILE,
    MTP_RECIPES_FILE,
    PLAIN_RECIPES_FILE,
    PREFILL_CHUNKS_FILE,
    SGLANG_STAGES_FILE,
    TRT_STAGES_FILE,
    load_multinode_recipes,
)
from gpuscale.validation.inferencex_sweeps import (
    SCRIPTS_FILE,
    SWEEPS_FILE,
    load_scripts,
    load_sweeps,
)
from gpuscale.validation.inferencex_tables import InferenceXTables, load_tables
from gpuscale.validation.serving_clients import uniform_lengths
from gpuscale.validation.serving_launches import INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
from gpuscale.validation.serving_recipes import RECIPES_FILE, load_recipes
from gpuscale.validation.serving_rows import load

SERVING = DATA_DIR / "serving"
RECIPES = load_recipes(SERVING / RECIPES_FILE)
SWEEPS = load_sweeps(SERVING / SWEEPS_FILE)
SCRIPTS = load_scripts(SERVING / SCRIPTS_FILE)
MTP_RECIPES = load_multinode_recipes(SERVING / MTP_RECIPES_FILE)
PLAIN_RECIPES = load_multinode_recipes(SERVING / PLAIN_RECIPES_FILE)


def _rec(**kw: str) -> dict[str, str]:
    """A record as the CSV holds it: MI355X SGLang FP4 TP4 aggregated 1k/1k at 4 by default."""
    r = dict.fromkeys(COLUMNS, "")
    r.update(
        page_offset="0",
        hardware="mi355x",
        framework="sglang",
        model="dsr1",
        precision="fp4",
        spec_method="none",
        disagg="false",
        is_multinode="false",
        prefill_tp="4",
        prefill_ep="1",
        prefill_dp_attention="false",
        prefill_num_workers="0",
        decode_tp="4",
        decode_ep="1",
        decode_dp_attention="false",
        decode_num_workers="0",
        num_prefill_gpu="4",
        num_decode_gpu="4",
        isl="1024",
        osl="1024",
        conc="4",
        image="lmsysorg/sglang:v0.5.9-rocm700-mi35x",
        date="2026-02-27",
        run_url="22469096331/1",
        mean_ttft="0.14774119136855007",
        median_ttft="0.10738262953236699",
        p99_ttft="0.5353527302853761",
        mean_tpot="0.010644555535103583",
        median_tpot="0.01064601337724555",
        p99_tpot="0.011019807103644934",
        mean_itl="0.010648039572855027",
        median_itl="0.010386066511273384",
        mean_e2el="9.909064922039397",
        median_e2el="9.95336338551715",
        tput_per_gpu="180.65719659379948",
    )
    r.update(kw)
    return r


def _agg(**kw: str) -> dict[str, str]:
    """An aggregated record whose prefill and decode labels are the same ``tp``/``ep``/``dp``."""
    tp, ep, dp = kw.pop("tp", "4"), kw.pop("ep", "1"), kw.pop("dp", "false")
    labels = {
        "prefill_tp": tp,
        "decode_tp": tp,
        "prefill_ep": ep,
        "decode_ep": ep,
        "prefill_dp_attention": dp,
        "decode_dp_attention": dp,
        "num_prefill_gpu": tp,
        "num_decode_gpu": tp,
    }
    return _rec(**{**labels, **kw})


def _disagg(**kw: str) -> dict[str, str]:
    """B200 Dynamo TensorRT-LLM: 1 prefill worker TP4 EP4 attention DP, 2 decode workers TP8."""
    base = {
        "hardware": "b200",
        "framework": "dynamo-trt",
        "disagg": "true",
        "is_multinode": "true",
        "prefill_tp": "4",
        "prefill_ep": "4",
        "prefill_dp_attention": "true",
        "prefill_num_workers": "1",
        "decode_tp": "8",
        "decode_ep": "8",
        "decode_dp_attention": "false",
        "decode_num_workers": "2",
        "num_prefill_gpu": "4",
        "num_decode_gpu": "16",
        "conc": "64",
        "image": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2",
        "date": "2026-03-23",
    }
    base.update(kw)
    return _rec(**base)


def test_aggregated_amd_fp4_is_mxfp4_with_inferencex_client() -> None:
    row = read_record(_agg())
    assert row.expressible and row.mode == "agg" and row.engine == "sglang"
    kw = row.kwargs
    (im, icv) = uniform_lengths(1024, 0.8)
    assert kw["gpu"] == "mi355x" and kw["engine"] == "sglang" and kw["weights"] == "mxfp4"
    assert (kw["input_len"], kw["output_len"]) == (round(im), round(im)) == (922, 922)
    assert kw["input_cv"] == pytest.approx(icv)
    assert kw["concurrency"] == 4 and kw["num_requests"] == 40
    assert (kw["tp"], kw["ep"], kw["attention_dp"], kw["pp"]) == (4, 1, 1, 1)
    assert row.measured["ttft_ms"] == pytest.approx(147.74119136855007)
    assert row.measured["ttft_ms_p50"] == pytest.approx(107.38262953236699)
    assert row.measured["tpot_ms_p99"] == pytest.approx(11.019807103644934)


@pytest.mark.parametrize(
    ("hardware", "precision", "gpu", "weights"),
    [
        ("b200", "fp4", "b200", "nvfp4"),
        ("gb300", "fp4", "gb300", "nvfp4"),
        ("mi325x", "fp8", "mi325x", "fp8_block"),
        ("h100", "fp8", "h100-sxm", "fp8_block"),
        ("h200", "fp8", "h200-sxm", "fp8_block"),
        ("mi355x", "fp4", "mi355x", "mxfp4"),
    ],
)
def test_hardware_and_precision_names(
    hardware: str, precision: str, gpu: str, weights: str
) -> None:
    row = read_record(_agg(hardware=hardware, precision=precision, tp="8"))
    assert (row.kwargs["gpu"], row.kwargs["weights"]) == (gpu, weights)


def test_attention_dp_spans_the_engine_and_trt_balances_it() -> None:
    row = read_record(
        _agg(hardware="b200", framework="trt", tp="8", ep="8", dp="true", image="", conc="256")
    )
    kw = row.kwargs
    assert (kw["engine"], kw["tp"], kw["ep"], kw["attention_dp"]) == ("tensorrt-llm", 8, 8, 8)
    # serving_launches.launch_options: InferenceX launches TensorRT-LLM attention DP balanced.
    assert kw["adp_balance_timeout_iters"] == INFERENCEX_ADP_BALANCE_TIMEOUT_ITERS
    plain = read_record(_agg(hardware="b200", framework="trt", tp="8", ep="8", image=""))
    assert "adp_balance_timeout_iters" not in plain.kwargs


@pytest.mark.parametrize(
    ("date", "conc", "isl", "tokens"),
    [
        ("2025-12-15", "4", "1024", 1152),  # (CONC + ISL + 64 + 63) / 64 * 64: one prompt
        ("2026-01-14", "64", "8192", 8320),
        ("2026-01-29", "4", "1024", 8192),  # 64af5a771 (2026-01-21): at least 8192
        ("2026-02-06", "4", "8192", 8320),  # above the floor: the formula
    ],
)
def test_b200_trt_deepseek_launch_of_its_script_date(
    date: str, conc: str, isl: str, tokens: int
) -> None:
    """serving_launches.INFERENCEX_DSR1_B200_TRT_FLOOR_FROM: the DeepSeek-R1 B200 TensorRT-LLM
    scripts' token budget, KV dtype and memory fraction, FP8 and FP4 alike."""
    for precision in ("fp8", "fp4"):
        rec = _agg(
            hardware="b200", framework="trt", precision=precision, tp="8", ep="8", image="",
            date=date, conc=conc, isl=isl,
        )  # fmt: skip
        kw = read_record(rec).kwargs
        assert kw["engine_options"] == {"max_num_batched_tokens": tokens, "memory_fraction": 0.8}
        assert kw["kv_dtype"] == "fp8"
        assert (kw["tp"], kw["ep"], kw["attention_dp"]) == (8, 8, 1)  # as the record states


@pytest.mark.parametrize(
    ("tp", "conc", "isl", "osl", "options"),
    [
        ("8", "4", "1024", "1024", {"memory_fraction": 0.8}),
        ("8", "64", "1024", "1024", {"memory_fraction": 0.8, "batch_wait_timeout_iters": 40,
                                     "batch_wait_max_tokens_ratio": 0.8}),
        ("8", "256", "1024", "8192", {"memory_fraction": 0.7}),
        ("4", "4", "8192", "1024", {"memory_fraction": 0.75}),
    ],
)  # fmt: skip
def test_b200_trt_fp8_script_of_2026_01_29(
    tp: str, conc: str, isl: str, osl: str, options: dict[str, float]
) -> None:
    """ec7bafaae's FP8 script (serving_launches.INFERENCEX_DSR1_B200_FP8_TRT_FROM): its memory
    fractions and batch waiting by shape; the FP4 script and earlier days keep 0.8, no wait."""
    rec = _agg(
        hardware="b200", framework="trt", precision="fp8", tp=tp, ep="1", image="",
        date="2026-02-05", conc=conc, isl=isl, osl=osl,
    )  # fmt: skip
    opts = read_record(rec).kwargs["engine_options"]
    assert {k: v for k, v in opts.items() if k != "max_num_batched_tokens"} == options
    for other in ({"precision": "fp4"}, {"date": "2026-01-14"}):
        opts = read_record({**rec, **other}).kwargs["engine_options"]
        assert opts["memory_fraction"] == 0.8 and "batch_wait_timeout_iters" not in opts


@pytest.mark.parametrize(
    ("precision", "tp", "conc", "isl", "osl", "ep", "dp"),
    [
        ("fp8", "8", "4", "1024", "1024", 8, 1),  # EP_SIZE="$TP" whatever the record says
        ("fp8", "8", "64", "1024", "1024", 8, 8),  # DP above 32 at 1k/1k
        ("fp8", "8", "64", "8192", "1024", 8, 1),  # above 64 at 8k/1k
        ("fp4", "8", "8", "1024", "1024", 1, 1),
        ("fp4", "8", "16", "1024", "1024", 8, 1),  # EP above 8 on TP8 1k/1k
        ("fp4", "4", "16", "1024", "1024", 1, 1),  # above 32 on TP4
        ("fp4", "4", "256", "1024", "8192", 4, 4),  # DP from 256 at 1k prompts
        ("fp4", "8", "64", "8192", "1024", 8, 8),  # EP and DP together at 8k/1k
    ],
)
def test_b200_trt_deepseek_layout_before_the_configuration_entry(
    precision: str, tp: str, conc: str, isl: str, osl: str, ep: int, dp: int
) -> None:
    """Runs before InferenceX #145 (2025-11-03): the B200 scripts chose EP and attention DP."""
    rec = _agg(
        hardware="b200", framework="trt", precision=precision, tp=tp, ep="1", image="",
        date="2025-11-02", conc=conc, isl=isl, osl=osl,
    )  # fmt: skip
    kw = read_record(rec).kwargs
    assert (kw["ep"], kw["attention_dp"]) == (ep, dp)
    assert ("adp_balance_timeout_iters" in kw) == (dp > 1)


@pytest.mark.parametrize(
    ("precision", "date", "tp", "ep"),
    [
        ("fp4", "2025-11-02", "8", 8),  # --enable-ep-moe: EP = TP, the record says 1
        ("fp4", "2025-11-10", "4", 4),
        ("fp4", "2025-11-18", "4", 1),  # after #204 the record states what ran
        ("fp8", "2025-11-10", "8", 1),  # only the FP4 script had the flag
    ],
)
def test_b200_sglang_fp4_expert_parallel_of_enable_ep_moe(
    precision: str, date: str, tp: str, ep: int
) -> None:
    """inferencex_sglang_launch.EP_MOE_LAST_DAY."""
    rec = _agg(hardware="b200", framework="sglang", precision=precision, tp=tp, date=date)
    assert read_record(rec).kwargs["ep"] == ep


@pytest.mark.parametrize(
    ("hardware", "precision", "date", "conc", "isl", "budget"),
    [
        ("mi355x", "fp4", "2026-02-27", "4", "1024", 196608),
        ("mi355x", "fp4", "2025-10-06", "64", "8192", 32768),  # FP4 8k/1k above 32
        ("mi355x", "fp8", "2026-05-03", "64", "8192", 196608),
        ("mi300x", "fp8", "2026-02-27", "4", "1024", 131072),  # from 32772c579
        ("mi325x", "fp8", "2026-01-14", "4", "1024", 196608),
    ],
)
def test_amd_sglang_token_budget_of_its_script(
    hardware: str, precision: str, date: str, conc: str, isl: str, budget: int
) -> None:
    """inferencex_sglang_launch.amd_sglang_budget: --chunked-prefill-size and
    --max-prefill-tokens as the MI3xx scripts set them (SGLang's 16384 had been read)."""
    rec = _agg(
        hardware=hardware, precision=precision, tp="8", date=date, conc=conc, isl=isl,
        osl="1024",
    )  # fmt: skip
    opts = read_record(rec).kwargs["engine_options"]
    assert opts["max_num_batched_tokens"] == opts["max_prefill_tokens"] == budget


def test_aggregated_gpus_are_the_tp_label_not_the_tp_x_ep_total() -> None:
    row = read_record(
        _agg(hardware="h200", framework="trt", precision="fp8", tp="8", ep="8", num_decode_gpu="64")
    )
    assert (row.kwargs["tp"], row.kwargs["ep"]) == (8, 8)


def test_h200_sglang_launch_of_its_script_date() -> None:
    rec = _agg(hardware="h200", precision="fp8", tp="8", date="2026-03-10")
    opts = read_record(rec).kwargs["engine_options"]
    # serving_launches.INFERENCEX_LAUNCHES: dsr1_fp8_h200.sh from 41aff0afc (2026-03-06)
    assert opts["memory_fraction"] == 0.82 and opts["max_num_batched_tokens"] == 32768
    before = read_record({**rec, "date": "2026-02-01"})
    assert "engine_options" not in before.kwargs


def test_h200_trt_mtp_reads_the_swept_script_else_not_expressible() -> None:
    rec = _agg(
        hardware="h200",
        framework="trt",
        precision="fp8",
        spec_method="mtp",
        tp="8",
        ep="8",
        date="2026-01-14",
    )
    row = read_record(rec, InferenceXTables(sweeps=SWEEPS))
    assert row.expressible, row.reason
    assert row.kwargs["speculative"] == "mtp" and row.kwargs["draft_tokens"] == 3
    assert row.kwargs["engine_options"]["max_num_batched_tokens"] > 0
    later = read_record({**rec, "date": "2026-03-01"}, InferenceXTables(sweeps=SWEEPS))
    assert not later.expressible and later.reason == MTP_UNKNOWN
    other_gpu = read_record({**rec, "hardware": "b200"}, InferenceXTables(sweeps=SWEEPS))
    assert other_gpu.reason == MTP_UNKNOWN


def test_disaggregated_workers_client_and_kv() -> None:
    row = read_record(_disagg(), InferenceXTables(recipes=RECIPES))
    assert row.expressible and row.mode == "disagg" and row.engine == "trtllm"
    kw = row.kwargs
    assert (kw["prefill_workers"], kw["prefill_tp"], kw["prefill_ep"]) == (1, 4, 4)
    assert kw["prefill_attention_dp"] == 4
    assert (kw["decode_workers"], kw["decode_tp"], kw["decode_ep"]) == (2, 8, 8)
    assert kw["decode_attention_dp"] == 1
    # sa-bench: 5 rounds of C (serving_clients.SA_BENCH_ROUNDS); recipes' FP8 KV for TensorRT-LLM.
    assert kw["num_requests"] == 5 * 64 and kw["kv_dtype"] == "fp8"
    assert "tp" not in kw and kw["weights"] == "nvfp4"


def test_disaggregated_mtp_draft_count_from_the_recipes_table() -> None:
    e = next(e for e in RECIPES if e["spec"] == "mtp" and e["draft_tokens"])
    dp = {p: "true" if int(e[f"{p}_attention_dp"]) > 1 else "false" for p in ("prefill", "decode")}
    rec = _disagg(
        hardware=e["system"].split("_")[0],
        framework="dynamo-trt" if e["backend"] == "trtllm" else "dynamo-sglang",
        precision="fp8",
        spec_method="mtp",
        prefill_tp=e["prefill_tp"],
        prefill_ep=e["prefill_ep"],
        prefill_dp_attention=dp["prefill"],
        prefill_num_workers=e["prefill_workers"],
        num_prefill_gpu=str(int(e["prefill_tp"]) * int(e["prefill_workers"])),
        decode_tp=e["decode_tp"],
        decode_ep=e["decode_ep"],
        decode_dp_attention=dp["decode"],
        decode_num_workers=e["decode_workers"],
        num_decode_gpu=str(int(e["decode_tp"]) * int(e["decode_workers"])),
        isl=e["isl"],
        osl=e["osl"],
        conc=e["concurrency"],
    )
    row = read_record(rec, InferenceXTables(recipes=RECIPES))
    assert row.expressible, row.reason
    assert row.kwargs["speculative"] == "mtp"
    assert row.kwargs["draft_tokens"] == int(e["draft_tokens"])
    assert read_record(rec).reason == MTP_UNKNOWN  # without the table


def test_disaggregated_mtp_prefill_attention_dp_is_the_recipes() -> None:
    """InferenceX's labels of 2026-02-14 state the H200 TensorRT-LLM prefill's attention DP the
    other way round from the recipes it launched (#919 corrected them): the 8k/1k MTP record at
    C = 512 is labelled DP 8 for ``c512_ctx3_gen1_dep8_batch64_eplb0_mtp1.yaml``, whose context
    servers run ``enable_attention_dp: false``. The reader takes the recipe's, with a note."""
    rec = next(
        r
        for r in load_records(SERVING / API_FILE)
        if r["hardware"] == "h200" and r["framework"] == "dynamo-trt"
        and r["spec_method"] == "mtp" and r["isl"] == "8192" and r["conc"] == "512"
        and r["prefill_dp_attention"] == "true" and r["date"] == "2026-02-14"
    )  # fmt: skip
    row = read_record(rec, InferenceXTables(recipes=RECIPES))
    assert row.expressible, row.reason
    assert row.kwargs["prefill_attention_dp"] == 1 and row.kwargs["draft_tokens"] == 1
    assert any("#919" in a for a in row.assumptions)
    # Where the label is the recipe's, nothing is said.
    fixed = read_record({**rec, "prefill_dp_attention": "false"}, InferenceXTables(recipes=RECIPES))
    assert fixed.kwargs["prefill_attention_dp"] == 1
    assert not any("#919" in a for a in fixed.assumptions)


def test_tp_one_label_on_a_wider_worker() -> None:
    # MI355X mori-sglang: "tp 1, ep 8, dp" on 8 GPUs per worker is a DEP8 worker.
    rec = _disagg(
        hardware="mi355x",
        framework="mori-sglang",
        precision="fp8",
        prefill_tp="1",
        prefill_ep="8",
        prefill_dp_attention="true",
        prefill_num_workers="1",
        num_prefill_gpu="8",
        decode_tp="1",
        decode_ep="8",
        decode_dp_attention="false",
        decode_num_workers="2",
        num_decode_gpu="16",
    )
    row = read_record(rec)
    kw = row.kwargs
    assert (kw["prefill_tp"], kw["prefill_ep"], kw["prefill_attention_dp"]) == (8, 8, 8)
    assert (kw["decode_tp"], kw["decode_ep"], kw["decode_attention_dp"]) == (8, 8, 1)
    assert any("read as 8 GPUs" in a for a in row.assumptions)
    # GB200 dynamo-sglang "tp 1, ep 1, dp" on 8 GPUs: the labels do not say how.
    unknown = read_record({**rec, "prefill_ep": "1"})
    assert not unknown.expressible
    assert "do not account for the worker's 8 GPUs" in unknown.reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"model": "gptoss"}, "model 'gptoss' is not DeepSeek-R1"),
        ({"hardware": "tpu7"}, "hardware 'tpu7' is not in the catalog"),
        ({"framework": "tgi"}, "framework 'tgi': no engine profile"),
        ({"precision": "int4"}, "precision 'int4' not read"),
        ({"spec_method": "eagle3"}, "speculative method 'eagle3' is not modelled"),
        ({"spec_method": "mtp"}, MTP_UNKNOWN),
        ({"prefill_tp": "8", "num_prefill_gpu": "8"}, "prefill and decode parallelism differ"),
    ],
)
def test_not_expressible_aggregated(change: dict[str, str], reason: str) -> None:
    row = read_record(_agg(**change), InferenceXTables(recipes=RECIPES, sweeps=SWEEPS))
    assert row.kind == NOT_EXPRESSIBLE and not row.kwargs
    assert reason in row.reason and "\n" not in row.reason


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"decode_num_workers": "0"}, "without worker counts"),
        ({"num_decode_gpu": "17"}, "decode GPU total 17 is not a multiple of its 2 workers"),
        ({"num_prefill_gpu": "8"}, "prefill labels (tp 4, ep 4) do not account"),
        ({"spec_method": "mtp"}, MTP_UNKNOWN),
    ],
)
def test_not_expressible_disaggregated(change: dict[str, str], reason: str) -> None:
    row = read_record(_disagg(**change), InferenceXTables(recipes=RECIPES, sweeps=SWEEPS))
    assert row.kind == NOT_EXPRESSIBLE and not row.kwargs
    assert reason in row.reason


@pytest.mark.parametrize(
    ("image", "engine", "version"),
    [
        ("vllm/vllm-openai:v0.12.0", "vllm", "0.12.0"),
        ("lmsysorg/sglang:v0.5.8.post1-cu130-runtime", "sglang", "0.5.8.post1"),
        ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post1", "trtllm", "1.2.0rc6.post1"),
        ("nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.1.post2", "trtllm", ""),
        ("rocm/sgl-dev:sglang-0.5.8-rocm700-mi35x-mori-0210", "sglang", ""),
        ("", "vllm", ""),
    ],
)
def test_engine_version_from_image(image: str, engine: str, version: str) -> None:
    assert engine_version(_rec(image=image), engine) == version


def test_vllm_deepgemm_option_only_on_nvidia() -> None:
    # EP 8 leaves MoE TP 1, where vLLM 0.12's DeepGEMM MoE runs.
    nv = _agg(hardware="h200", framework="vllm", precision="fp8", tp="8", ep="8")
    nv["image"] = "vllm/vllm-openai:v0.12.0"
    assert read_record(nv).kwargs["engine_options"]["deepgemm_moe_worst_case"] is True
    amd = {**nv, "hardware": "mi355x"}
    assert "engine_options" not in read_record(amd).kwargs


def test_vllm_deepgemm_option_only_where_the_kernel_runs() -> None:
    # MoE TP 8: vLLM 0.12 turns DeepGEMM MoE off, so the option would change nothing (and
    # infer refuses it there).
    nv = _agg(hardware="h200", framework="vllm", precision="fp8", tp="8")
    nv["image"] = "vllm/vllm-openai:v0.12.0"
    assert "deepgemm_moe_worst_case" not in (read_record(nv).kwargs.get("engine_options") or {})


def test_dedupe_keeps_one_of_identical_records_only() -> None:
    a = _rec()
    b = {**a, "page_offset": "16000"}  # the same record copied from another page
    c = {**a, "mean_ttft": "0.2"}  # one figure differs: another record
    assert dedupe([a, b, c]) == [a, c]


def test_merge_parts_orders_by_page_and_dedupes(tmp_path: Path) -> None:
    one, two = tmp_path / "part1.csv", tmp_path / "part2.csv"
    late, early = _rec(page_offset="32000", conc="8"), _rec(page_offset="0")
    write_records([late], one)
    write_records([early, {**late, "page_offset": "16000"}], two)
    merged = merge_parts([one, two])
    assert [r["page_offset"] for r in merged] == ["0", "16000"]
    out = tmp_path / "merged.csv"
    write_records(merged, out)
    assert load_records(out) == merged


def test_wrong_header_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    with bad.open("w", newline="") as f:
        csv.writer(f).writerow(["hardware", "conc"])
    with pytest.raises(InputError, match="not the InferenceX API columns"):
        load_records(bad)


def test_one_measurement_under_two_runs_counts_once() -> None:
    a = read_record(_rec())
    b = read_record(_rec(run_url="1/1", date="2026-01-01", page_offset="9"))
    c = read_record(_rec(mean_ttft="0.3"))
    assert [r.record for r in distinct_measurements([a, b, c])] == [a.record, c.record]


def test_seen_matches_the_projects_hopper_rows() -> None:
    records = load_records(SERVING / API_FILE)
    index = seen_index(load(SERVING / "aiconfigurator_silicon_hopper.csv"))
    hopper = [
        r
        for r in read_records(records, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS))
        if r.expressible and r.hardware in ("h100", "h200")
    ]
    assert hopper
    marks = [seen(r, index) for r in hopper]
    # Most H100/H200 records are the very measurements the project's data carries.
    assert sum(exact for _, exact in marks) > len(hopper) / 2
    assert all(same for same, exact in marks if exact)
    row = next(r for r, (_, exact) in zip(hopper, marks, strict=True) if exact)
    moved = read_record(
        {**row.record, "date": "2020-01-01"}, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS)
    )
    assert seen(moved, index) == (False, False)
    other = read_record(
        {**row.record, "hardware": "b200"}, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS)
    )
    assert seen(other, index) == (False, False)


def test_every_record_of_the_csv_reads() -> None:
    records = load_records(SERVING / API_FILE)
    rows = read_records(records, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS))
    assert len(rows) == len(records) == len(dedupe(records))
    assert all(r.kwargs if r.expressible else r.reason for r in rows)
    assert sum(r.expressible for r in rows) > len(rows) / 2


NAMES = st.sampled_from


@settings(max_examples=300)
@given(
    # Mostly names the reader knows, some it must refuse.
    hardware=NAMES(["mi355x", "mi300x", "b200", "b300", "gb200", "gb300", "h100", "h200", "tpu7"]),
    framework=NAMES(
        ["sglang", "trt", "dynamo-trt", "dynamo-sglang", "mori-sglang", "vllm", "atom", "tgi"]
    ),
    precision=NAMES(["fp4", "fp8", "fp8", "bf16"]),
    spec=NAMES(["none", "none", "none", "mtp", "eagle"]),
    disagg=st.booleans(),
    tp=st.sampled_from([1, 2, 4, 8, 16]),
    ep=st.sampled_from([1, 4, 8, 16]),
    dp=st.booleans(),
    workers=st.integers(0, 6),
    total=st.one_of(st.just(0), st.integers(1, 64)),
    conc=st.integers(1, 4096),
    isl=st.sampled_from(["1024", "8192"]),
)
def test_any_record_maps_or_gives_one_reason(
    hardware: str,
    framework: str,
    precision: str,
    spec: str,
    disagg: bool,
    tp: int,
    ep: int,
    dp: bool,
    workers: int,
    total: int,
    conc: int,
    isl: str,
) -> None:
    rec = _rec(
        hardware=hardware,
        framework=framework,
        precision=precision,
        spec_method=spec,
        disagg="true" if disagg else "false",
        isl=isl,
        conc=str(conc),
    )
    # 0: the GPU total the labels state (tp x workers), else a drawn one.
    total = total or tp * max(workers, 1)
    for p in ("prefill", "decode"):
        rec.update(
            {
                f"{p}_tp": str(tp),
                f"{p}_ep": str(ep),
                f"{p}_dp_attention": "true" if dp else "false",
                f"{p}_num_workers": str(workers if disagg else 0),
                f"num_{p}_gpu": str(total),
            }
        )
    row = read_record(
        rec,
        InferenceXTables(
            recipes=RECIPES,
            sweeps=SWEEPS,
            scripts=SCRIPTS,
            mtp_recipes=MTP_RECIPES,
            plain_recipes=PLAIN_RECIPES,
        ),
    )
    if row.expressible:
        kw = row.kwargs
        assert (
            kw["concurrency"] == conc
            and kw["gpu"]
            and kw["weights"] in ("nvfp4", "mxfp4", "fp8_block")
        )
        if disagg:
            gpus = kw["prefill_tp"] * kw["prefill_workers"]
            assert gpus == total and kw["decode_tp"] * kw["decode_workers"] == total
            assert kw["prefill_attention_dp"] in (1, kw["prefill_tp"])
        else:
            assert (kw["tp"], kw["ep"]) == (tp, ep)
            assert kw["attention_dp"] == (tp if dp else 1)
    else:
        assert row.reason and "\n" not in row.reason and not row.kwargs


@pytest.mark.parametrize(
    ("change", "drafts", "script"),
    [
        # dsr1_fp4_b200_trt_mtp_slurm.sh at bf3456727: MTP=3, MTP=1 with DP_ATTENTION.
        (
            {"precision": "fp4", "date": "2026-01-14"},
            3,
            "dsr1_fp4_b200_trt_mtp_slurm.sh@bf3456727",
        ),
        (
            {"precision": "fp4", "date": "2026-01-14", "dp": "true"},
            1,
            "dsr1_fp4_b200_trt_mtp_slurm.sh@bf3456727",
        ),
        # The boundary day of #632 (5d517074c): both versions in force, both MTP=3.
        (
            {"precision": "fp8", "date": "2026-02-05"},
            3,
            "dsr1_fp8_b200_trt_mtp.sh@5d517074c",
        ),
        (
            {"precision": "fp8", "date": "2026-02-05", "dp": "true"},
            1,
            "dsr1_fp8_b200_trt_mtp.sh@b30c3398a",
        ),
        # SGLang: --speculative-num-steps 2 (--speculative-num-draft-tokens 3, topk 1).
        (
            {"framework": "sglang", "precision": "fp8", "date": "2026-03-25"},
            2,
            "single_node/dsr1_fp8_b200_mtp.sh@64c20b6b5",
        ),
        (
            {"hardware": "b300", "framework": "sglang", "precision": "fp8", "date": "2026-04-17"},
            2,
            "single_node/dsr1_fp8_b300_mtp.sh@f8543f9d1",
        ),
    ],
)
def test_single_node_mtp_draft_count_from_the_launch_script_table(
    change: dict[str, str], drafts: int, script: str
) -> None:
    base = {"hardware": "b200", "framework": "trt", "spec_method": "mtp", "tp": "8", "ep": "8"}
    row = read_record(
        _agg(**{**base, **change}),
        InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS),
    )
    assert row.expressible, row.reason
    assert row.kwargs["speculative"] == "mtp" and row.kwargs["draft_tokens"] == drafts
    assert any(script in n for n in row.assumptions)
    # Without the table, or outside the dates a read version was on main, it stays unknown.
    assert (
        read_record(row.record, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS)).reason
        == MTP_UNKNOWN
    )
    for day in ("2025-12-01", "2026-06-01"):
        assert read_record(
            {**row.record, "date": day},
            InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS),
        ).reason == (MTP_UNKNOWN)


def test_sglang_mtp_script_without_a_dp_branch_leaves_attention_dp_unknown() -> None:
    rec = _agg(
        hardware="b200", framework="sglang", precision="fp8", spec_method="mtp", tp="8", ep="8"
    )
    rec = {**rec, "date": "2026-03-25"}
    assert read_record(
        rec, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS)
    ).expressible
    dp = {**rec, "prefill_dp_attention": "true", "decode_dp_attention": "true"}
    assert (
        read_record(dp, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS)).reason
        == MTP_UNKNOWN
    )


def test_script_versions_that_disagree_on_a_day_leave_it_unknown() -> None:
    line = next(s for s in SCRIPTS if s["system"] == "b200" and s["backend"] == "trtllm")
    other = {**line, "draft_tokens": "2", "commit": "0000000"}
    rec = _agg(
        hardware="b200",
        framework="trt",
        precision=line["precision"],
        spec_method="mtp",
        tp="8",
        ep="8",
        date=line["from_day"],
        dp=line["attention_dp"],
    )
    row = read_record(rec, InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=[line, other]))
    assert not row.expressible and "different draft counts ([2, 3])" in row.reason


def test_disaggregated_client_request_count_by_launch() -> None:
    """The measured requests of a disaggregated record follow its launch's client: GB200
    Dynamo-TensorRT-LLM before srt-slurm (2026-01-31) ran Dynamo's ``bench.sh`` (8 x C),
    MI355X MoRI-SGLang its launchers' ``bench.sh`` (10 x C), the rest sa-bench or Dynamo's
    SGLang ``slurm_jobs`` client (5 x C)."""
    gb200 = {"hardware": "gb200", "precision": "fp4", "prefill_dp_attention": "false"}
    gb200 |= {"prefill_tp": "4", "prefill_ep": "4", "num_prefill_gpu": "4"}
    dynamo = _disagg(**gb200, date="2025-12-19", conc="48")
    assert read_record(dynamo).kwargs["num_requests"] == 8 * 48
    srt = _disagg(**gb200, date="2026-01-31", conc="48")
    assert read_record(srt).kwargs["num_requests"] == 5 * 48
    sgl = _disagg(**gb200, framework="dynamo-sglang", date="2025-12-21", conc="48")
    assert read_record(sgl).kwargs["num_requests"] == 5 * 48
    mori = {"hardware": "mi355x", "framework": "mori-sglang", "conc": "32"}
    mori |= {"prefill_tp": "8", "prefill_ep": "8", "num_prefill_gpu": "8"}
    for day in ("2026-02-06", "2026-03-03"):
        assert read_record(_disagg(**mori, date=day)).kwargs["num_requests"] == 10 * 32


def test_load_tables_reads_each_table_from_its_own_file() -> None:
    # One loader for every caller: each field holds the table of its own file (a swapped or
    # missing file would give another table, or none).
    tables = load_tables(SERVING)
    assert tables == InferenceXTables(
        recipes=RECIPES,
        sweeps=SWEEPS,
        scripts=SCRIPTS,
        mtp_recipes=MTP_RECIPES,
        fractions=load_fractions(SERVING / MEM_FRACTIONS_FILE),
        plain_recipes=PLAIN_RECIPES,
        server_prompts=load_server_prompts(SERVING / CLIENT_TOKENS_FILE),
        prefill_chunks=load_multinode_recipes(SERVING / PREFILL_CHUNKS_FILE),
        frontends=load_multinode_recipes(SERVING / FRONTENDS_FILE),
        trt_stages=load_multinode_recipes(SERVING / TRT_STAGES_FILE),
        sglang_stages=load_multinode_recipes(SERVING / SGLANG_STAGES_FILE),
    )
    assert tables.prefill_chunks and tables.frontends and tables.trt_stages and tables.sglang_stages
    assert all(getattr(tables, f) for f in ("recipes", "sweeps", "scripts", "fractions"))
    assert tables.server_prompts
    assert tables.mtp_recipes and tables.plain_recipes


def _atom(**kw: str) -> dict[str, str]:
    """An InferenceX ATOM record: MI355X, its own image and date."""
    base = {
        "framework": "atom",
        "image": "rocm/atom:rocm7.2.0-ubuntu24.04-pytorch2.9-atom0.1.1",
        "date": "2026-02-25",
        "tp": "8",
    }
    return _agg(**{**base, **kw})


def test_atom_records_read_as_the_atom_engine_with_the_scripts_fp8_kv_cache() -> None:
    tables = InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS)
    row = read_record(_atom(), tables)
    assert row.expressible, row.reason
    assert row.engine == "atom" and row.kwargs["engine"] == "atom"
    # Every ATOM launch script states --kv_cache_dtype fp8 (ATOM's default is bf16).
    assert row.kwargs["kv_dtype"] == "fp8"
    assert "speculative" not in row.kwargs
    # Disaggregated ATOM is not modelled: such a record has no deployment to read.
    disagg = read_record(
        {**_atom(), "disagg": "true", "prefill_num_workers": "1", "decode_num_workers": "1"},
        tables,
    )
    assert not disagg.expressible


@pytest.mark.parametrize(
    ("change", "drafts"),
    [
        # --method mtp alone: ATOM's --num-speculative-tokens default, 1.
        ({"precision": "fp8", "date": "2026-02-11"}, 1),
        ({"precision": "fp4", "date": "2026-02-25"}, 1),
        ({"precision": "fp8", "date": "2026-03-30"}, 1),
        # 1aa6aa7db (#984): --num-speculative-tokens 3, alone on main from 2026-04-02.
        ({"precision": "fp8", "date": "2026-04-02"}, 3),
    ],
)
def test_atom_mtp_draft_count_from_its_launch_scripts(change: dict[str, str], drafts: int) -> None:
    tables = InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS)
    row = read_record(_atom(spec_method="mtp", **change), tables)
    assert row.expressible, row.reason
    assert row.kwargs["speculative"] == "mtp" and row.kwargs["draft_tokens"] == drafts


def test_atom_mtp_on_the_day_its_draft_count_changed_reads_the_image() -> None:
    # 2026-04-01: 9c24d280a (1 draft token, its configuration pinning atom0.1.1 throughout) and
    # 1aa6aa7db (3; it moved the image to atom0.1.2, back and forth that day) were both on main.
    tables = InferenceXTables(recipes=RECIPES, sweeps=SWEEPS, scripts=SCRIPTS)
    new = "rocm/atom:rocm7.2.1-ubuntu24.04-pytorch2.9.1-atom0.1.2"
    row = read_record(
        _atom(spec_method="mtp", precision="fp8", date="2026-04-01", image=new), tables
    )
    assert row.expressible, row.reason
    assert row.kwargs["draft_tokens"] == 3 and any("1aa6aa7db" in n for n in row.assumptions)
    # An atom0.1.1 run that day may have launched either version: not read.
    old = read_record(_atom(spec_method="mtp", precision="fp8", date="2026-04-01"), tables)
    assert not old.expressible
    assert "different draft counts ([1, 3])" in old.reason
    # An image that names no release (a dated nightly) matches every line of its day.
    nightly = "rocm/atom:rocm7.2.3_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom20260511"
    assert not read_record(
        _atom(spec_method="mtp", precision="fp8", date="2026-04-01", image=nightly), tables
    ).expressible
