"""vLLM 0.12's DeepGEMM MoE computes its worst-case contiguous layout at every batch size:
``M x top-k + local experts x 127`` rows rounded to 128 (``compute_aligned_M`` with no host
counts; the blocks past the real segments get expert id 0 and are computed). The serving
model adds those rows to the grouped expert GEMMs' math (one launch: the roofline of the whole
kernel), on block-FP8 experts on Hopper or B200/GB200 below MoE TP 8, for the vLLM 0.12.0 rows
only."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism, expert_load
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import engine_version_options
from gpuscale.validation.serving_rows import load

QWEN = "Qwen/Qwen3-235B-A22B-FP8"


def _it(
    tp: int = 2,
    ep: int = 1,
    dp: int = 1,
    weights: str = "fp8_block",
    gpu: str = "h200-sxm",
    worst_case: bool = True,
) -> IterationModel:
    eng = dataclasses.replace(engine("vllm"), deepgemm_moe_worst_case=worst_case)
    par = Parallelism(tp=tp, ep=ep, attention_dp=dp)
    return _iteration_model(
        catalog.model(QWEN),
        catalog.cluster(gpu, tp),
        par,
        weight_format(weights),
        "bf16",
        load_profile_for("vllm", None),
        eng,
    )


def _tail(it: IterationModel, tokens: float) -> float:
    m = it.model
    g = np.array([tokens])
    touched, pairs = expert_load(g, m.num_experts, m.experts_per_token, it.par.ep)
    return float(it.moe_worst_case_tail_rows(g, touched, pairs / touched)[0])


def _step_ms(it: IterationModel, n: float) -> float:
    a = np.array
    return float(it.time_s(a([n]), a([2050.0]), a([0.0]), a([0.0]))[0]) * 1e3


def test_the_layout_is_vllms_compute_aligned_m() -> None:
    it = _it()
    m = it.model
    assert it.moe_worst_case_align == 128
    for tokens in (1.0, 4.0, 20.0, 4096.0):
        layout = math.ceil((tokens * m.experts_per_token + m.num_experts * 127) / 128) * 128
        g = np.array([tokens])
        touched, pairs = expert_load(g, m.num_experts, m.experts_per_token, 1)
        counted = float(it.moe_padded_rows(pairs / touched)[0] * touched[0])
        assert _tail(it, tokens) == pytest.approx(max(layout - counted, 0.0))
    # Four decoding requests: 16,384 rows laid out, a few hundred of them the experts' own.
    assert _tail(it, 4.0) > 15_000


def test_each_chunk_of_the_batch_lays_out_its_own_tail() -> None:
    """``FusedMoEModularKernel`` runs the tokens in chunks of VLLM_FUSED_MOE_CHUNK_SIZE (16,384
    by default, vLLM 0.12.0 envs.py; ``_chunk_info``, ``DeepGemmExperts.supports_chunking()``
    is True), each through its own ``compute_aligned_M``: a prompt batch gathered over four
    attention-DP ranks (4 x 8,192 tokens) lays out two tails."""
    it = _it()
    assert it.moe_worst_case_chunk_tokens == 16384

    def layout(tokens: int) -> int:
        return math.ceil((tokens * 8 + 128 * 127) / 128) * 128

    for tokens, chunks in ((16384, [16384]), (32768, [16384, 16384]), (20000, [16384, 3616])):
        expected = sum(layout(c) for c in chunks) - _counted(it, float(tokens))
        assert _tail(it, float(tokens)) == pytest.approx(expected), tokens


def test_expert_parallel_ranks_lay_out_their_local_experts() -> None:
    """With --enable-expert-parallel the MoE TP size is 1 and a rank holds E / EP experts:
    TP2 EP2 lays out half the rows of TP2 on twice the intermediate width."""
    assert _tail(_it(ep=2), 4.0) == pytest.approx(
        math.ceil((4 * 8 + 64 * 127) / 128) * 128 - _counted(_it(ep=2), 4.0)
    )
    assert _tail(_it(ep=2), 4.0) < 0.6 * _tail(_it(), 4.0)


def _counted(it: IterationModel, tokens: float) -> float:
    m = it.model
    g = np.array([tokens])
    touched, pairs = expert_load(g, m.num_experts, m.experts_per_token, it.par.ep)
    return float(it.moe_padded_rows(pairs / touched)[0] * touched[0])


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"worst_case": False}, "other vLLM versions"),
        ({"weights": "fp8"}, "per-tensor FP8 experts take another backend"),
        ({"gpu": "b300", "tp": 2}, "B300 is 10.3: DeepGEMM wants 9.0 or 10.0 exactly"),
        ({"gpu": "gb300", "tp": 2}, "GB300 is 10.3 too"),
        ({"gpu": "a100-sxm-80gb", "tp": 2}, "no FP8: Marlin"),
        ({"tp": 8}, "DeepGEMM MoE is off by default at MoE TP >= 8"),
    ],
)
def test_only_where_vllm_picks_deepgemm(kw: dict, why: str) -> None:
    assert _tail(_it(**kw), 4.0) == 0.0, why


@pytest.mark.parametrize("gpu", ["h100-sxm", "h200-sxm", "b200", "gb200"])
def test_hopper_and_b200_both_run_deepgemm(gpu: str) -> None:
    """vLLM 0.12.0 ``is_deep_gemm_supported()`` is true on capability 9.0 or 10.0 exactly, and
    ``fused_experts`` says so for B200: "on B200, we use DeepGemm for all cases because they only
    support E8M0 scale" (fused_moe/fused_moe.py). FlashInfer's FP8 MoE is off by default
    (VLLM_USE_FLASHINFER_MOE_FP8 = 0), so ``get_fp8_moe_backend`` reaches DeepGEMM on both."""
    it = _it(gpu=gpu)
    assert _tail(it, 4.0) == pytest.approx(
        math.ceil((4 * 8 + 128 * 127) / 128) * 128 - _counted(it, 4.0)
    )


def test_decode_step_is_flat_in_the_batch_with_it() -> None:
    """The measured vLLM 0.12 TPOT of these rows hardly moves from C = 4 to 20 (TP2: 55.8 ->
    52.0 ms) while the touched experts triple; the worst-case layout makes the step's expert
    GEMMs compute-bound on a fixed row count, so the modelled step moves less too, and it is
    longer (the tail's FLOPs: 16k rows x 3 x 4096 x 768 x 2 per layer at TP2)."""
    on, off = _it(), _it(worst_case=False)
    growth_on = _step_ms(on, 20) / _step_ms(on, 4)
    growth_off = _step_ms(off, 20) / _step_ms(off, 4)
    assert growth_on < growth_off
    assert _step_ms(on, 4) > 1.5 * _step_ms(off, 4)
    # TP4 halves the intermediate width per rank: the fixed tail shrinks with it.
    assert _step_ms(_it(tp=4), 4) < _step_ms(on, 4)


def test_dense_models_are_untouched() -> None:
    eng = dataclasses.replace(engine("vllm"), deepgemm_moe_worst_case=True)
    base = engine("vllm")
    model = catalog.model("Qwen/Qwen3-32B")
    args = (model, catalog.cluster("h100-sxm", 2), Parallelism(tp=2), weight_format("fp8_block"))
    prof = load_profile_for("vllm", None)
    a = np.array([8.0])
    on = _iteration_model(*args, "bf16", prof, eng).time_s(a, a * 100, a * 0, a * 0)
    off = _iteration_model(*args, "bf16", prof, base).time_s(a, a * 100, a * 0, a * 0)
    assert on[0] == off[0]


def test_row_reading_sets_it_where_vllm_0_12_0_runs_deepgemm_moe() -> None:
    """Every vLLM 0.12.0 row whose deployment runs the DeepGEMM MoE gets the option (the 51
    aggregated Qwen3-235B-A22B-FP8 rows); the dense rows of the version (Qwen3-32B, Llama 3.1
    8B FP8), where it would change nothing and ``infer`` refuses it, and other versions do not."""
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    for row in rows:
        r = row.raw
        read = row.kwargs or row.guess
        opts = read.get("engine_options") or {}
        version = r["backend"] == "vllm" and r["backend_version"] == "0.12.0"
        runs = version and catalog.model(r["model_path"]).is_moe
        assert opts.get("deepgemm_moe_worst_case", False) == runs, r["id"]
        assert bool(engine_version_options(r, r["model_path"], read)) == runs
    qwen_012 = [
        r
        for r in rows
        if r.raw["model_path"] == QWEN
        and r.raw["backend_version"] == "0.12.0"
        and r.raw["mode"] == "agg"
    ]
    assert len(qwen_012) == 51
    assert all(r.kwargs["engine_options"]["deepgemm_moe_worst_case"] for r in qwen_012)


def test_engine_option_is_vllms() -> None:
    kw = dict(gpu="h200-sxm", input_len=1000, output_len=100, concurrency=8, tp=2)
    on = infer(QWEN, engine="vllm", engine_options={"deepgemm_moe_worst_case": True}, **kw)
    off = infer(QWEN, engine="vllm", **kw)
    assert on.to_dict()["options"][0]["tpot_ms"] > off.to_dict()["options"][0]["tpot_ms"]
    with pytest.raises(InputError, match="vllm setting"):
        infer(QWEN, engine="sglang", engine_options={"deepgemm_moe_worst_case": True}, **kw)
    with pytest.raises(InputError, match="deepgemm_moe_worst_case must be"):
        infer(QWEN, engine="vllm", engine_options={"deepgemm_moe_worst_case": 1}, **kw)


def test_the_qwen3_235b_vllm_rows_tpot() -> None:
    """The 51 aggregated rows as read (mean |error| 44.5%, bias -44% without the layout):
    17.8% mean with it; the attention-DP layouts stay below (-28..-37%, not found)."""
    rows = [
        r
        for r in load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
        if r.raw["model_path"] == QWEN
        and r.raw["backend"] == "vllm"
        and r.raw["mode"] == "agg"
        and r.expressible
    ]
    errors = []
    for row in rows:
        o = infer(QWEN, **row.kwargs).to_dict()["options"][0]
        errors.append(o["tpot_ms"] / row.tpot_ms - 1.0)
    assert len(errors) == 51
    assert float(np.mean(np.abs(errors))) < 0.20
    assert -0.25 < float(np.median(errors)) < 0.0
