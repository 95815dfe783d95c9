"""Calibration fitting and the profile it writes; the small pure helpers of gpuscale.measure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.costmodel.collectives import LevelBandwidth, bus_factor, collective_time_s
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.measure.calibrate import (
    Topology,
    calibrate,
    fit_gemm,
    fit_level,
    profile_document,
    write_profile,
)
from gpuscale.measure.collectives_bench import node_layout, parse_size, parse_sizes, plan_levels
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.doctor import Report, check_environment
from gpuscale.measure.matmul_bench import parse_shapes
from gpuscale.measure.nccl_tests import parse_files
from gpuscale.measure.results import CollectiveRun, CollectiveSample, GemmSample
from gpuscale.measure.stats import jitter

LOGS = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
SIZES = [2**k for k in range(3, 31, 2)]


def _synthetic(
    op: str,
    level: str,
    n: int,
    per_node: int,
    levels: LevelBandwidth,
    noise: float = 0.0,
    seed: int = 0,
) -> list[CollectiveSample]:
    """Samples whose times are exactly what the cost model says (times a noise factor)."""
    rng = np.random.default_rng(seed)
    out = []
    for size in SIZES:
        t = float(collective_time_s(op, size, n, per_node, levels)) * (
            1 + noise * rng.standard_normal()
        )
        algbw = size / t / 1e9
        out.append(
            CollectiveSample(
                op=op,
                level=level,
                ranks=n,
                ranks_per_node=per_node,
                size_bytes=size,
                count=size // 4,
                dtype="float",
                time_us=t * 1e6,
                algbw_gb_per_s=algbw,
                busbw_gb_per_s=algbw * float(bus_factor(op, n)),
            )
        )
    return out


TRUE = LevelBandwidth(
    intra_gb_per_s=180.0,
    intra_latency_us=6.0,
    nic_gb_per_s=22.0,
    nics_per_gpu=1.0,
    inter_latency_us=9.0,
)


@pytest.mark.parametrize(
    "op", ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "send_recv"]
)
def test_fit_recovers_the_cost_models_own_parameters_intra(op: str) -> None:
    fit = fit_level(_synthetic(op, "intra", 8, 8, TRUE), "intra")
    assert fit.bandwidth_gb_per_s == pytest.approx(180.0, rel=1e-6)
    assert fit.latency_us == pytest.approx(6.0, rel=1e-6)
    assert fit.rms_rel_residual < 1e-9


def test_fit_recovers_inter_per_nic_rate_from_mixed_ops() -> None:
    samples = (
        _synthetic("all_reduce", "inter", 16, 8, TRUE)
        + _synthetic("all_gather", "inter", 16, 8, TRUE)
        + _synthetic("all_reduce", "inter", 2, 1, TRUE)
    )
    fit = fit_level(samples, "inter")
    assert fit.bandwidth_gb_per_s == pytest.approx(22.0, rel=1e-6)
    assert fit.latency_us == pytest.approx(9.0, rel=1e-6)
    assert "NIC per GPU" in fit.assumptions[0]


def test_nics_per_gpu_assumption_scales_the_per_nic_rate() -> None:
    two = LevelBandwidth(
        intra_gb_per_s=1e12,
        intra_latency_us=0.0,
        nic_gb_per_s=11.0,
        nics_per_gpu=2.0,
        inter_latency_us=9.0,
    )
    samples = _synthetic("all_reduce", "inter", 16, 8, two)
    assert fit_level(
        samples, "inter", Topology(nics_per_gpu=2.0)
    ).bandwidth_gb_per_s == pytest.approx(11.0, rel=1e-6)
    assert fit_level(samples, "inter").bandwidth_gb_per_s == pytest.approx(22.0, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    st.floats(min_value=0.5, max_value=900.0),
    st.floats(min_value=0.5, max_value=80.0),
    st.integers(min_value=2, max_value=64),
)
def test_fit_is_exact_on_noiseless_model_data(bw: float, alpha: float, n: int) -> None:
    levels = LevelBandwidth(
        intra_gb_per_s=bw,
        intra_latency_us=alpha,
        nic_gb_per_s=1.0,
        nics_per_gpu=1.0,
        inter_latency_us=1.0,
    )
    fit = fit_level(_synthetic("all_reduce", "intra", n, n, levels), "intra")
    assert fit.bandwidth_gb_per_s == pytest.approx(bw, rel=1e-4)
    assert fit.latency_us == pytest.approx(alpha, rel=1e-4)


def test_noisy_fit_reports_its_residuals() -> None:
    cal = calibrate(_synthetic("all_reduce", "intra", 8, 8, TRUE, noise=0.1, seed=3))
    fit = cal.links["intra"]
    assert 0.02 < fit.rms_rel_residual < 0.3
    assert fit.bandwidth_gb_per_s == pytest.approx(180.0, rel=0.2)
    assert len(cal.comparisons) == len(SIZES)
    assert max(abs(c.rel_error) for c in cal.comparisons) == pytest.approx(fit.max_rel_residual)


def test_flat_sweep_cannot_give_a_bandwidth() -> None:
    flat = [
        CollectiveSample(
            op="all_reduce",
            level="intra",
            ranks=4,
            ranks_per_node=4,
            size_bytes=s,
            count=s // 4,
            dtype="float",
            time_us=50.0 - s / 1e6,
            algbw_gb_per_s=0.0,
            busbw_gb_per_s=0.0,
        )
        for s in (8, 64, 512)
    ]
    with pytest.raises(InputError, match="no bandwidth term"):
        fit_level(flat, "intra")


def test_wrong_rows_and_foreign_ops_are_left_out() -> None:
    runs = parse_files([LOGS / "v100-dgx2-5collectives-oldformat.log"])
    samples = [s for r in runs for s in r.samples()]
    cal = calibrate(samples)
    assert set(cal.links) == {"intra"}
    assert cal.links["intra"].ops == ("all_gather", "all_reduce", "broadcast", "reduce_scatter")
    assert any("reduce: not in the cost model" in s for s in cal.skipped)
    assert any("2 rows with wrong values" in s for s in cal.skipped)
    # every comparison is the cost model's prediction with the fitted values
    assert all(c.predicted_us > 0 for c in cal.comparisons)


def test_profile_round_trip(tmp_path: Path) -> None:
    samples = _synthetic("all_reduce", "intra", 8, 8, TRUE) + _synthetic(
        "all_reduce", "inter", 16, 8, TRUE
    )
    gemm = fit_gemm(
        [
            GemmSample(
                m=s, n=s, k=s, dtype="bfloat16", time_us=1.0, tflops=2 * s**3 / 1e-6 / 1e12 * 1e-3
            )
            for s in (256, 1024, 4096)
        ],
        "h100-sxm",
        989.5,
    )
    cal = calibrate(samples, gemm)
    doc = profile_document(cal, name="lab", base="generic", source="unit test")
    path = write_profile(tmp_path / "lab.yaml", doc)
    profile = load_profile(str(path))
    assert profile.name == "lab" and profile.source == "unit test"
    assert profile.links["intra"].bandwidth_gb_per_s == pytest.approx(180.0, rel=1e-3)
    assert profile.links["inter"].latency_us == pytest.approx(9.0, rel=1e-3)
    assert profile.gemm["h100-sxm"].efficiency == gemm.efficiency
    assert "hopper" in profile.gemm  # the base profile's curves are still there
    levels = LevelBandwidth.of(_cluster(), profile)
    assert levels.nic_gb_per_s == pytest.approx(22.0, rel=1e-3)


def _cluster():  # type: ignore[no-untyped-def]
    from gpuscale import catalog

    return catalog.cluster("h100-sxm", 16)


def test_gemm_curve_against_peak_and_on_cpu() -> None:
    samples = [
        GemmSample(m=s, n=s, k=s, dtype="bfloat16", time_us=1.0, tflops=t)
        for s, t in ((128, 10.0), (128, 14.0), (1024, 300.0), (8192, 700.0))
    ]
    fit = fit_gemm(samples, "h100-sxm", 1000.0)
    assert fit.flops == pytest.approx((2 * 128**3, 2 * 1024**3, 2 * 8192**3))
    assert fit.efficiency == (0.012, 0.3, 0.7)  # median of the two 128 runs
    cpu = fit_gemm(samples, "cpu", None)
    assert cpu.efficiency[-1] == 1.0 and "best measured" in cpu.peak_source
    over = fit_gemm(samples, "x", 500.0)
    assert over.clipped == 1 and max(over.efficiency) == 1.0


def test_jitter_statistics() -> None:
    j = jitter([1.0] * 19 + [3.0])
    assert j.p50_s == 1.0 and j.p99_s == 3.0 and j.max_s == 3.0
    assert j.mean_s == pytest.approx(1.1)
    assert j.cv == pytest.approx(np.std([1.0] * 19 + [3.0]) / 1.1)
    assert j.jittery
    assert not jitter([2.0, 2.0, 2.1]).jittery


@pytest.mark.parametrize(
    ("text", "expected"),
    [("8", 8), ("64K", 65536), ("128M", 2**27), ("1g", 2**30), ("2MiB", 2**21)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_parse_sizes_sweep_and_errors() -> None:
    assert parse_sizes("8:128", 2) == [8, 16, 32, 64, 128]
    assert parse_sizes("1K,8,1K") == [8, 1024]
    for bad in ("8:x", "128:8", "", "1:1G"):
        with pytest.raises(InputError):
            parse_sizes(bad, 1.1 if bad == "1:1G" else 2)


def test_parse_shapes() -> None:
    assert parse_shapes("256, 8x16x32") == [(256, 256, 256), (8, 16, 32)]
    with pytest.raises(InputError, match="MxNxK"):
        parse_shapes("8x16")


def test_node_layout_and_levels() -> None:
    hosts = ["a", "a", "b", "b"]
    assert node_layout(hosts, None) == [[0, 1], [2, 3]]
    assert node_layout(["h"] * 4, 2) == [[0, 1], [2, 3]]
    levels = plan_levels([[0, 1], [2, 3]], group_by_node=True)
    assert levels == [("intra", [[0, 1], [2, 3]], 2), ("inter", [[0, 2], [1, 3]], 1)]
    assert plan_levels([[0, 1], [2, 3]], group_by_node=False) == [("inter", [[0, 1, 2, 3]], 2)]
    with pytest.raises(InputError, match="same number"):
        plan_levels([[0, 1, 2], [3]], group_by_node=True)
    with pytest.raises(InputError, match="does not divide"):
        node_layout(["h"] * 3, 2)


@pytest.mark.parametrize(
    ("name", "mem", "gpu"),
    [
        ("NVIDIA H100 80GB HBM3", 79.1, "h100-sxm"),
        ("NVIDIA H100 PCIe", 79.6, "h100-pcie"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "a100-sxm-40gb"),
        ("NVIDIA A100 80GB PCIe", 79.2, "a100-pcie-80gb"),
        ("NVIDIA H200", 139.8, "h200-sxm"),
        ("NVIDIA H200 NVL", 139.8, "h200-nvl"),
        ("NVIDIA GeForce RTX 4090", 23.6, "rtx-4090"),
        # GH200's name carries the Grace LPDDR5X; CUDA's memory picks the HBM3 or HBM3e part.
        ("NVIDIA GH200 120GB", 95.0, "gh200"),
        ("NVIDIA GH200 480GB", 95.58, "gh200"),
        ("NVIDIA GH200 144G HBM3e", 143.4, "gh200-144gb"),
    ],
)
def test_match_gpu(name: str, mem: float, gpu: str | None) -> None:
    assert match_gpu(name, mem) == gpu


def test_doctor_flags_risky_environment() -> None:
    report = Report()
    check_environment(report, {"NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Ring", "HOME": "/root"})
    assert report.facts["environment"] == {"NCCL_ALGO": "Ring", "NCCL_P2P_DISABLE": "1"}
    warns = [f for f in report.findings if f.status == "warn"]
    assert {"NCCL_P2P_DISABLE=1" in f.detail for f in warns} == {True, False}
    assert report.verdict == "usable, with problems to fix"
    assert "unset NCCL_P2P_DISABLE" in report.next_steps()


def test_bench_json_round_trip() -> None:
    run = CollectiveRun(
        samples=tuple(_synthetic("all_reduce", "intra", 4, 4, TRUE)[:2]),
        backend="gloo",
        world_size=4,
        nodes=1,
        ranks_per_node=4,
        device="cpu",
        host="h",
        started="2026-01-01T00:00:00+00:00",
    )
    assert CollectiveRun.from_dict(run.to_dict(), "x") == run
    with pytest.raises(InputError, match="malformed"):
        CollectiveRun.from_dict({"samples": []}, "broken.json")
