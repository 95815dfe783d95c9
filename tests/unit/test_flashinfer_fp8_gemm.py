"""SGLang's dense block-FP8 linear layers on FlashInfer's TRT-LLM GEMM (engine option
``flashinfer_fp8_gemm``): the kernel's measured rate in the iteration model
(``IterationModel.dense_linear_time``), the option's checks, and how the held-out InferenceX
records read it: the single-node B200/B300 scripts (``inferencex_sglang_launch``) and the
srt-slurm recipes' stages by the image's SGLang version (``benchmarks/recipe_sglang_stages.py``,
``inferencex_multinode.recipes_fp8_gemm``)."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import ApiRow, load_records, read_record
from gpuscale.validation.inferencex_multinode import (
    FP8_GEMM_FIELDS,
    SGLANG_STAGES_COLUMNS,
    SGLANG_STAGES_FILE,
    fp8_gemm_of_stage,
    recipes_fp8_gemm,
    recipes_kv_dtype,
)
from gpuscale.validation.inferencex_sglang_launch import blackwell_sglang_launch
from gpuscale.validation.inferencex_tables import load_tables
from tests.benchmark_scripts import load_benchmark

SERVING = DATA_DIR / "serving"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
load_benchmark(BENCHMARKS / "recipe_prefill_chunks.py", "recipe_prefill_chunks")
stage_values = load_benchmark(BENCHMARKS / "recipe_sglang_stages.py").stage_values


def _r1(gpu: str = "b200", options: dict | None = None, **kw) -> dict[str, float]:
    args = dict(
        gpu=gpu, engine="sglang", weights="fp8_block", input_len=8192, output_len=1024,
        concurrency=4, tp=8,
    )  # fmt: skip
    args.update(kw)
    return infer("deepseek-r1", engine_options=options or {}, **args).to_dict()["options"][0]


def _r1_iteration(gpu: str, *, flashinfer: bool) -> IterationModel:
    eng = dataclasses.replace(
        engine("sglang").for_device(catalog.gpu(gpu)), flashinfer_fp8_gemm=flashinfer
    )
    return _iteration_model(
        catalog.model("deepseek-r1"),
        catalog.cluster(gpu, 8),
        Parallelism(tp=8),
        weight_format("fp8_block"),
        "fp8",
        load_profile(eng.cost_profile),
        eng,
    )


def test_the_kernel_rate_reproduces_its_benchmark() -> None:
    # sgl-project/sglang PR #13528 (GB200): N = 24,576, K = 7,168 at M = 2,048 took 1,632.5 us,
    # at M = 1,024 826.2 us; the rate is that of the larger.
    it = _r1_iteration("gb200", flashinfer=True)
    for m, us in ((2048, 1632.5), (1024, 826.2)):
        t = it.dense_linear_time(np.array([0.0]), np.array([float(m)]), 24576.0, 7168.0, "fp8")
        assert float(t[0]) * 1e6 == pytest.approx(us, rel=0.02)
    # K below 256 goes to Triton in SGLang: the curve's time is kept.
    t = it.dense_linear_time(np.array([1e-6]), np.array([4096.0]), 7168.0, 128.0, "fp8")
    assert float(t[0]) == pytest.approx(1e-6)
    # Without the option the curve's time stands whatever the size.
    plain = _r1_iteration("gb200", flashinfer=False)
    t = plain.dense_linear_time(np.array([1e-6]), np.array([4096.0]), 24576.0, 7168.0, "fp8")
    assert float(t[0]) == pytest.approx(1e-6)


def test_each_dense_fp8_layer_meets_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # An 8k-token prompt: the projections, the shared experts (in moe_other) and the dense
    # layers' MLPs all run the kernel; the routed experts (grouped GEMMs) do not.
    args = (np.array([0.0]), np.array([0.0]), np.array([8192.0]), np.array([4096.0]))
    on = _r1_iteration("b200", flashinfer=True).parts_s(*args)
    off = _r1_iteration("b200", flashinfer=False).parts_s(*args)
    assert float(on["projections"][0]) > 1.5 * float(off["projections"][0])
    assert float(on["dense_mlp"][0]) > 1.5 * float(off["dense_mlp"][0])
    assert float(on["moe_other"][0]) - float(off["moe_other"][0]) > 0.005
    assert float(on["experts"][0]) == float(off["experts"][0])
    # Decoding, kv_b_proj is the absorbed BF16 bmm, not the block-FP8 kernel: the kernel's
    # rate is asked of its width with the prompt rows alone (none here).
    it = _r1_iteration("b200", flashinfer=True)
    kv_b = it.model.num_heads / 8 * (it.model.qk_nope_head_dim + it.model.v_head_dim)
    asked: list[tuple[float, float]] = []
    real = IterationModel.dense_linear_time

    def spy(self, t, rows, n, k, precision):  # type: ignore[no-untyped-def]
        asked.append((float(n), float(np.max(rows))))
        return real(self, t, rows, n, k, precision)

    monkeypatch.setattr(IterationModel, "dense_linear_time", spy)
    it.parts_s(np.array([512.0]), np.array([2000.0]), np.array([0.0]), np.array([0.0]))
    assert (kv_b, 0.0) in asked
    assert all(rows == 512.0 for n, rows in asked if n != kv_b)


def test_it_slows_a_long_prefill_not_a_small_decode() -> None:
    base, fi = _r1(), _r1(options={"flashinfer_fp8_gemm": True})
    # An 8k prompt's projections run at M = 8k rows: several times DeepGEMM's time.
    assert fi["ttft_ms_p50"] / base["ttft_ms_p50"] > 1.3
    # Four requests decoding are 4-row GEMMs, memory-bound under either kernel.
    assert fi["tpot_ms"] / base["tpot_ms"] == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize(
    ("gpu", "weights", "engine", "match"),
    [
        (
            "h200-sxm",
            "fp8_block",
            "sglang",
            "runs on Blackwell GPUs for fp8_block weights; got h200",
        ),
        ("b200", "nvfp4", "sglang", "got b200 \\(blackwell\\) with nvfp4 weights"),
        ("b200", "fp8_block", "vllm", "is a sglang setting, not vllm's"),
    ],
)
def test_the_option_is_refused_where_sglang_would_not_run_the_kernel(
    gpu: str, weights: str, engine: str, match: str
) -> None:
    with pytest.raises(InputError, match=match):
        _r1(gpu, {"flashinfer_fp8_gemm": True}, weights=weights, engine=engine)


def test_the_single_node_fp8_scripts_run_flashinfer() -> None:
    rec = {
        "hardware": "b200", "framework": "sglang", "disagg": "false", "model": "dsr1",
        "precision": "fp8", "spec_method": "none", "decode_tp": "8", "conc": "4",
        "date": "2026-03-25",
    }  # fmt: skip
    assert blackwell_sglang_launch(rec)["flashinfer_fp8_gemm"] is True
    assert blackwell_sglang_launch({**rec, "spec_method": "mtp"})["flashinfer_fp8_gemm"] is True
    assert blackwell_sglang_launch({**rec, "decode_tp": "4"})["flashinfer_fp8_gemm"] is True
    assert "flashinfer_fp8_gemm" not in blackwell_sglang_launch({**rec, "precision": "fp4"})


RECIPE = """
backend:
  prefill_environment:
    SGLANG_ENABLE_JIT_DEEPGEMM: "false"
  decode_environment:
    SGLANG_ENABLE_JIT_DEEPGEMM: "false"
    SGLANG_ENABLE_FLASHINFER_GEMM: "1"
  sglang_config:
    prefill:
      fp8-gemm-backend: flashinfer_trtllm
    decode:
      quantization: fp8
      kv-cache-dtype: fp8_e4m3
"""

SWEEP = """
base:
  backend:
    prefill_environment: {SGL_ENABLE_JIT_DEEPGEMM: "0"}
    sglang_config:
      prefill: {}
      decode: {}
override_low:
  backend:
    sglang_config:
      decode: {fp8-gemm-backend: deep_gemm}
"""


def test_a_recipe_gives_each_stage_its_switches() -> None:
    got = ("false", "", "flashinfer_trtllm", "false", "1", "", "", "fp8_e4m3")
    assert stage_values(RECIPE) == got
    assert stage_values(SWEEP) == ("0", "", "", "", "", "deep_gemm", "", "")
    # An aggregated or TensorRT-LLM recipe has no SGLang stages.
    assert stage_values("backend:\n  sglang_config:\n    aggregated: {}\n") is None
    assert stage_values("backend:\n  trtllm_config:\n    prefill: {}\n") is None


@pytest.mark.parametrize(
    ("stated", "version", "expected"),
    [
        (("", "", "flashinfer_trtllm"), "", True),
        (("false", "", "deep_gemm"), "0.5.9", False),
        (("", "true", ""), "0.5.5.post2", True),  # the switch 0.5.3-0.5.9 read first
        (("", "true", ""), "0.5.10.post1", False),  # 0.5.10 reads no switch: DeepGEMM
        (("false", "true", ""), "", True),  # every release: FlashInfer
        (("", "true", ""), "", None),  # FlashInfer up to 0.5.9, DeepGEMM in 0.5.10
        (("false", "", ""), "0.5.3", None),  # 0.5.3 reads only the SGL_ spelling
        (("false true", "", ""), "0.5.9", None),  # a sweep's list
        (("false", "", ""), "0.5.8.post1", True),  # DeepGEMM off: FlashInfer on Blackwell
        (("false", "", ""), "0.5.6", None),  # DeepGEMM off before 0.5.8: Triton, no rate
        (("false", "", ""), "", None),  # a version the image does not name
        (("", "", ""), "", False),  # DeepGEMM, SGLang's default
        (("", "", "cutlass"), "0.5.9", None),
    ],
)
def test_each_release_picks_its_kernel(
    stated: tuple[str, str, str], version: str, expected: bool | None
) -> None:
    got, why = fp8_gemm_of_stage(*stated, version)
    assert got is expected
    assert bool(why) == (expected is None)


def _line(recipe: str, values: tuple[str, ...], first: str, last: str) -> dict[str, str]:
    return {
        "recipe": recipe,
        **dict(zip(FP8_GEMM_FIELDS, values, strict=True)),
        "first_day": first,
        "last_day": last,
    }


def test_the_recipes_become_an_engine_option() -> None:
    off = ("false", "", "", "false", "", "")
    table = [
        _line("recipes/a.yaml", off, "2026-01-01", "2026-03-01"),
        _line("recipes/b.yaml", ("", "", "", "", "", ""), "2026-01-01", "2026-03-01"),
        _line("recipes/c.yaml", ("false", "", "", "", "", ""), "2026-01-01", "2026-03-01"),
    ]
    kw, note = recipes_fp8_gemm(["recipes/a.yaml"], "2026-02-10", table, "0.5.8.post1")
    assert kw == {"flashinfer_fp8_gemm": True}
    assert "FlashInfer's TRT-LLM kernel" in note
    # DeepGEMM kept: nothing to set, nothing to say.
    assert recipes_fp8_gemm(["recipes/b.yaml"], "2026-02-10", table, "0.5.8.post1") == ({}, "")
    # Under 0.5.6 DeepGEMM off means Triton: not read, and said.
    kw, note = recipes_fp8_gemm(["recipes/a.yaml"], "2026-02-10", table, "0.5.6")
    assert kw == {} and "Triton" in note
    # Stages or recipes that differ are not read.
    kw, note = recipes_fp8_gemm(["recipes/c.yaml"], "2026-02-10", table, "0.5.9")
    assert kw == {} and "prefill and decode workers differ" in note
    kw, note = recipes_fp8_gemm(["recipes/a.yaml", "recipes/b.yaml"], "2026-02-10", table, "0.5.9")
    assert kw == {} and "recipes differ" in note
    kw, note = recipes_fp8_gemm(["recipes/z.yaml"], "2026-02-10", table, "0.5.9")
    assert kw == {} and f"not on file ({SGLANG_STAGES_FILE})" in note
    # No recipe at all is said too, and a version first committed after the run is named.
    assert recipes_fp8_gemm([], "2026-02-10", table, "0.5.9") == (
        {},
        "dense FP8 GEMM kernel not read: no recipe file for the record",
    )
    kw, note = recipes_fp8_gemm(["recipes/a.yaml"], "2025-12-01", table, "0.5.9")
    assert kw == {"flashinfer_fp8_gemm": True}
    assert "first committed after the run: recipes/a.yaml" in note


def test_the_table_has_its_columns() -> None:
    with (SERVING / SGLANG_STAGES_FILE).open(newline="") as f:
        reader = csv.DictReader(f)
        lines = list(reader)
    assert tuple(reader.fieldnames or ()) == SGLANG_STAGES_COLUMNS
    # The B200 FP8 recipes of 2026-02 turn DeepGEMM off on both stages.
    b200 = [
        ln for ln in lines if ln["recipe"] == "recipes/b200-fp8/1k1k/stp/max-tpt-dep8-1p5d.yaml"
    ]
    assert [(ln["prefill_jit_deepgemm"], ln["decode_jit_deepgemm"]) for ln in b200] == [
        ("false", "false")
    ]


def _b200_dynamo_sglang_fp8() -> ApiRow:
    """A held-out B200 Dynamo-SGLang FP8 record of February 2026 (SGLang 0.5.8.post1), read."""
    rec = next(
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if r["hardware"] == "b200"
        and r["framework"] == "dynamo-sglang"
        and r["precision"] == "fp8"
        and r["image"].startswith("lmsysorg/sglang:v0.5.8")
        and r["date"] < "2026-03-01"
        and r["spec_method"] == "none"
    )
    return read_record(rec, load_tables(SERVING))


def test_a_held_out_record_reads_its_recipes_kernel() -> None:
    row = _b200_dynamo_sglang_fp8()
    assert row.kwargs["engine_options"]["flashinfer_fp8_gemm"] is True
    assert any("FlashInfer's TRT-LLM kernel" in n for n in row.assumptions)


def _kv_line(recipe: str, pre: str, dec: str) -> dict[str, str]:
    line = _line(recipe, ("", "", "", "", "", ""), "2026-01-01", "2026-03-01")
    return {**line, "prefill_kv_cache_dtype": pre, "decode_kv_cache_dtype": dec}


def test_the_recipes_kv_cache_dtype() -> None:
    table = [
        _kv_line("recipes/fp8.yaml", "fp8_e4m3", "fp8_e4m3"),
        _kv_line("recipes/auto.yaml", "", ""),
        _kv_line("recipes/half.yaml", "fp8_e4m3", ""),
        _kv_line("recipes/e5m2.yaml", "fp8_e5m2", "fp8_e5m2"),
        _kv_line("recipes/spelled.yaml", "auto", ""),
        _kv_line("recipes/bf16.yaml", "bf16", "bfloat16"),
    ]
    kv, note = recipes_kv_dtype(["recipes/fp8.yaml"], "2026-02-10", table)
    assert kv == {"kv_dtype": "fp8"} and "fp8_e4m3 on both stages" in note
    # Not stated: SGLang's auto, the engine's own rule; nothing to set or say.
    assert recipes_kv_dtype(["recipes/auto.yaml"], "2026-02-10", table) == ({}, "")
    # One format however spelled: auto stated or not (nothing to set), bf16 / bfloat16.
    assert recipes_kv_dtype(["recipes/spelled.yaml"], "2026-02-10", table) == ({}, "")
    kv, _ = recipes_kv_dtype(["recipes/bf16.yaml"], "2026-02-10", table)
    assert kv == {"kv_dtype": "bf16"}
    # A version first committed after the run is named.
    _, note = recipes_kv_dtype(["recipes/fp8.yaml"], "2025-12-01", table)
    assert "first committed after the run: recipes/fp8.yaml" in note
    # Stages that differ, a format the model has not, recipes that differ: said, not read.
    for recipes, said in (
        (["recipes/half.yaml"], "the recipe's stages differ"),
        (["recipes/e5m2.yaml"], "fp8_e5m2 has no KV format here"),
        (["recipes/fp8.yaml", "recipes/auto.yaml"], "the recipes differ"),
    ):
        kv, note = recipes_kv_dtype(recipes, "2026-02-10", table)
        assert kv == {} and said in note, recipes


def test_a_held_out_record_reads_its_recipes_kv_dtype() -> None:
    # recipes/b200-fp8/1k1k/stp/max-tpt-dep8-1p5d.yaml: kv-cache-dtype fp8_e4m3 on both stages
    # (SGLang's auto would keep the FP8 checkpoint's 16-bit KV).
    row = _b200_dynamo_sglang_fp8()
    assert row.kwargs["kv_dtype"] == "fp8"
    assert any("fp8_e4m3 on both stages" in n for n in row.assumptions)
