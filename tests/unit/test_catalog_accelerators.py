"""Accelerators of 2024-2025 in the catalog: Blackwell (B200, B300, GB200/GB300 NVL72), H200 NVL,
MI300X/MI325X/MI355X, and the block-scaled training formats (MXFP8, NVFP4) where a GPU has them."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.errors import InputError
from gpuscale.specs import Plan, Training

NEW = ("b200", "b300", "gb200", "gb300", "h200-nvl", "mi300x", "mi325x", "mi355x")


@pytest.mark.parametrize("gpu_id", NEW)
def test_every_new_accelerator_has_datasheet_figures(gpu_id: str) -> None:
    d = catalog.gpu(gpu_id)
    assert d.peak("bf16") > 800 and d.peak("fp8") == pytest.approx(2 * d.peak("bf16"), rel=0.01)
    assert d.memory_gib > 100 and d.hbm_bandwidth_gb_per_s >= 4800
    assert "datasheet" in d.source or "data sheet" in d.source
    catalog.link(d.intra_link)
    catalog.link(d.pcie)
    # every generation has a GEMM curve and an attention efficiency in the generic profile
    generic = load_profile("generic")
    generic.gemm_curve(d.id, d.generation, "bf16")
    generic.attention(d.id, d.generation)


def test_block_scaled_formats_exist_only_where_the_datasheet_lists_them() -> None:
    for gpu_id in ("b200", "b300", "gb200", "gb300"):
        d = catalog.gpu(gpu_id)
        assert d.peak("nvfp4") >= 2 * d.peak("fp8") and d.peak("mxfp8") == d.peak("fp8")
    assert catalog.gpu("b300").peak("nvfp4") > catalog.gpu("b200").peak("nvfp4")  # Ultra
    assert catalog.gpu("mi355x").peak("mxfp8") == catalog.gpu("mi355x").peak("fp8")
    for gpu_id in ("h100-sxm", "h200-nvl", "mi300x", "mi355x", "a100-sxm-80gb"):
        with pytest.raises(InputError, match="no nvfp4 tensor-core rate"):
            catalog.gpu(gpu_id).peak("nvfp4")


def _estimate(
    gpu: str, precision: str, tp: int = 8, gpus: int = 144, term: str = "", inter: str = "ib-xdr800"
) -> float:
    plan = Plan(tp=tp, dp=gpus // tp, micro_batch=1, global_batch=gpus // tp * 4, zero=1)
    cluster = catalog.cluster(gpu, gpus, inter=inter)
    training = Training(seq_len=8192, precision=precision)  # type: ignore[arg-type]
    est = estimate_plan(
        catalog.model("llama3.1-70b"), cluster, training, plan, load_profile("megatron")
    )
    return float(getattr(est, term)[0] if term else est.step_time_s[0])


def test_nvfp4_and_mxfp8_train_faster_than_bf16_on_blackwell() -> None:
    bf16, mxfp8, nvfp4 = (_estimate("b200", p) for p in ("bf16", "mxfp8", "nvfp4"))
    assert nvfp4 < mxfp8 < bf16
    with pytest.raises(InputError, match="h100-sxm has no nvfp4"):
        _estimate("h100-sxm", "nvfp4")


def test_nvl72_lets_tensor_parallelism_span_more_than_eight_gpus_at_nvlink_speed() -> None:
    assert catalog.cluster("gb200", 144).gpus_per_node == 72
    assert catalog.cluster("b200", 144).gpus_per_node == 8
    # TP 16 stays inside one NVL72 rack; on HGX B200 it crosses the network.
    gb200 = _estimate("gb200", "bf16", tp=16, term="comm_tp_s", inter="ib-ndr400")
    b200 = _estimate("b200", "bf16", tp=16, term="comm_tp_s", inter="ib-ndr400")
    assert gb200 < 0.6 * b200


def test_gh200_is_an_h100_die_with_more_and_faster_memory_alone_on_its_superchip() -> None:
    h100 = catalog.gpu("h100-sxm")
    for gpu_id, memory, bandwidth in (("gh200", 95.58, 4000), ("gh200-144gb", 143.39, 4900)):
        d = catalog.gpu(gpu_id)
        assert d.peak_tflops == h100.peak_tflops  # the datasheet's tensor rates are the H100's
        assert (d.memory_gib, d.hbm_bandwidth_gb_per_s) == (memory, bandwidth)
        assert d.host_link == "nvlink-c2c" and "datasheet" in d.source
        # One GPU a superchip: a node of them is the caller's, at most an 8-GPU board.
        assert catalog.default_gpus_per_node(d) == 1
    # The 96 GB part holds 16 GiB more than an H100 SXM: KV cache beside a 70B model in FP8.
    assert catalog.gpu("gh200").memory_gib - h100.memory_gib == pytest.approx(16, abs=0.1)
