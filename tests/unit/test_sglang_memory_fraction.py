"""SGLang's default memory fraction follows the GPU, TP, DP attention and MTP, and the MI355X
prices FP4 GEMMs at its MXFP4 tensor rate.

Expected fractions are worked by hand from sglang/srt/server_args.py
``_handle_gpu_memory_settings`` (0.5.6.post2, 0.5.8.post1, 0.5.9 wheels): reserved MiB = 512 +
1.5 x max(chunk, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024 (+ 4.5 x graph_bs x dp with
DP attention and graph_bs > 300), at least 10 GiB above 60 GiB, + 2 GiB for an EAGLE draft;
fraction = round((mem - reserved) / mem, 3)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine, sglang_gpu_tier, sglang_mem_fraction_static
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import gemm_precision, is_weight_only, weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import kv_pool
from gpuscale.planner.serving.steady_state import Workload

H200_MIB = 143771.0  # nvidia-smi memory.total of an H200 SXM
H100_MIB = 81559.0


@pytest.mark.parametrize(
    ("mem", "tp", "dp", "chunk", "spec", "expected"),
    [
        # 512 + 1.5 x 8192 + 2 x 512 + 1024 = 14848 -> 128923 / 143771
        (H200_MIB, 8, 1, 8192, False, 0.897),
        # 512 + 12288 + 2 x 256 + 128 = 13440 -> 130331 / 143771
        (H200_MIB, 1, 1, 8192, False, 0.907),
        # 14848 on 81559 MiB
        (H100_MIB, 8, 1, 8192, False, 0.818),
        # B200: 512 + 1.5 x 16384 + 1024 + 512 = 26624 -> 156735 / 183359
        (183359.0, 4, 1, 16384, False, 0.855),
        # DP attention 8: 14848 + 3 x 512 x 8 + 1.5 x 512 x 8 = 33280 -> 110491 / 143771
        (H200_MIB, 8, 8, 8192, False, 0.769),
        # EAGLE/MTP draft: 14848 + 2048 = 16896 -> 126875 / 143771
        (H200_MIB, 8, 1, 8192, True, 0.882),
        # 10 GiB floor above 60 GiB: 512 + 3072 + 512 + 128 = 4224 -> 10240 -> 71680 / 81920
        (81920.0, 1, 1, 2048, False, 0.875),
        # A100-40GB, no floor: 512 + 6144 + 64 + 128 = 6848 -> 34112 / 40960
        (40960.0, 1, 1, 4096, False, 0.833),
    ],
)
def test_sglang_fraction_matches_the_source_rule_worked_by_hand(
    mem: float, tp: int, dp: int, chunk: int, spec: bool, expected: float
) -> None:
    got = sglang_mem_fraction_static(
        mem, tp=tp, dp_attention=dp, chunked_prefill_size=chunk, speculative=spec
    )
    assert got == pytest.approx(expected, abs=1e-9)


def test_sglang_chunk_and_graph_batch_tiers_follow_gpu_memory() -> None:
    assert sglang_gpu_tier(40960.0, tp=8) == (4096, 160)
    assert sglang_gpu_tier(H100_MIB, tp=2) == (8192, 256)
    assert sglang_gpu_tier(H200_MIB, tp=8) == (8192, 512)
    assert sglang_gpu_tier(183359.0, tp=1) == (16384, 512)


def test_the_profile_picks_the_tier_chunk_and_fraction_per_gpu() -> None:
    eng = engine("sglang")
    h200, b200 = catalog.gpu("h200-sxm"), catalog.gpu("b200")
    assert eng.for_device(h200).max_num_batched_tokens == 8192
    assert eng.for_device(b200).max_num_batched_tokens == 16384
    f_h200 = eng.for_device(h200).static_memory_fraction(
        h200, tp=8, pp=1, dp_attention=1, speculative=False
    )
    f_b200 = eng.for_device(b200).static_memory_fraction(
        b200, tp=4, pp=1, dp_attention=1, speculative=False
    )
    mib = b200.memory_bytes / 2**20
    assert f_b200 == round((mib - (512 + 1.5 * 16384 + 1024 + 512)) / mib, 3)
    assert f_h200 != f_b200
    # Engines without the rule keep their single fraction.
    vllm = engine("vllm")
    assert vllm.static_memory_fraction(b200, tp=4, pp=1, dp_attention=1, speculative=False) == 0.9


def test_a_stated_fraction_replaces_the_rule_in_the_kv_pool() -> None:
    m = catalog.model("llama3.1-8b")
    cl = catalog.cluster("h200-sxm", 1)
    eng = engine("sglang").for_device(cl.device)
    prof = load_profile(eng.cost_profile)
    fmt = weight_format("bf16")
    work = Workload(input_len=1024.0, output_len=512.0, input_cv=0.0, output_cv=0.0)
    par = Parallelism()
    _, _, used_rule = kv_pool(m, cl, par, fmt, "bf16", prof, eng, work)
    stated = dataclasses.replace(eng, memory_fraction=0.8, static_memory_rule=None)
    _, _, used_stated = kv_pool(m, cl, par, fmt, "bf16", prof, stated, work)
    mem = cl.device.memory_gib
    assert used_rule == pytest.approx(0.907 * mem, rel=1e-6)
    assert used_stated == pytest.approx(0.8 * mem, rel=1e-6)


def test_mi355x_runs_fp4_gemms_at_its_dense_mxfp4_rate() -> None:
    mi355x = catalog.gpu("mi355x")
    # AMD Instinct MI355X data sheet: MXFP4 10 PF dense, twice the dense FP8 5,033.2 TFLOPS.
    assert mi355x.peak("mxfp4") == pytest.approx(10066.4)
    assert mi355x.peak("mxfp4") == pytest.approx(2 * mi355x.peak("fp8"))
    fmt = weight_format("mxfp4")
    assert gemm_precision(fmt, mi355x) == "mxfp4"
    assert not is_weight_only(fmt, mi355x)
    # NVIDIA keeps its NVFP4 rate; a GPU without FP4 stays weight-only.
    assert gemm_precision(weight_format("nvfp4"), catalog.gpu("b200")) == "nvfp4"
    assert is_weight_only(fmt, catalog.gpu("h200-sxm"))
