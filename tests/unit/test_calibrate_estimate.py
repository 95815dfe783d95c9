"""A measured profile moves the cost model's prediction the way the measurement says
(the estimate API: estimate_plan with a profile from load_profile_for, as --profile does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscale import catalog
from gpuscale.costmodel.collectives import LevelBandwidth, bus_factor, collective_time_s
from gpuscale.costmodel.profile import load_profile, load_profile_for
from gpuscale.costmodel.step import StepEstimate, estimate_plan
from gpuscale.measure.calibrate import calibrate, fit_gemm, profile_document, write_profile
from gpuscale.measure.results import CollectiveSample, GemmSample
from gpuscale.specs import Cluster, Plan, Training

MODEL = "llama3.1-8b"
GPU = "h100-sxm"
PLAN = Plan(dp=16, micro_batch=1, global_batch=16, zero=3)
TRAINING = Training(seq_len=1024)


def _measured(nic_gb_per_s: float) -> list[CollectiveSample]:
    """A 2-node all-reduce sweep as a network with this per-NIC rate would produce it."""
    levels = LevelBandwidth(
        intra_gb_per_s=1e12,
        intra_latency_us=0.0,
        nic_gb_per_s=nic_gb_per_s,
        nics_per_gpu=1.0,
        inter_latency_us=8.0,
    )
    out = []
    for size in (2**k for k in range(10, 33, 2)):
        t = float(collective_time_s("all_reduce", size, 16, 8, levels))
        algbw = size / t / 1e9
        out.append(
            CollectiveSample(
                op="all_reduce",
                level="inter",
                ranks=16,
                ranks_per_node=8,
                size_bytes=size,
                count=size // 4,
                dtype="float",
                time_us=t * 1e6,
                algbw_gb_per_s=algbw,
                busbw_gb_per_s=algbw * float(bus_factor("all_reduce", 16)),
            )
        )
    return out


def _estimate(
    tmp_path: Path,
    cluster: Cluster,
    samples: list[CollectiveSample],
    gemm_tflops: float | None = None,
) -> StepEstimate:
    gemm = None
    if gemm_tflops is not None:
        gemm = fit_gemm(
            [
                GemmSample(m=s, n=s, k=s, dtype="bfloat16", time_us=1.0, tflops=gemm_tflops)
                for s in (1024, 4096, 16384)
            ],
            GPU,
            catalog.gpu(GPU).peak("bf16"),
        )
    doc = profile_document(calibrate(samples, gemm), name="m", base="generic", source="test")
    path = write_profile(tmp_path / f"p{len(list(tmp_path.iterdir()))}.yaml", doc)
    profile = load_profile_for("generic", str(path))
    return estimate_plan(catalog.model(MODEL), cluster, TRAINING, PLAN, profile)


def _generic(cluster: Cluster) -> StepEstimate:
    return estimate_plan(catalog.model(MODEL), cluster, TRAINING, PLAN, load_profile("generic"))


@pytest.mark.parametrize("fabric", ["ib-ndr400", "roce-100"])
@pytest.mark.parametrize("factor", [1 / 3, 3.0])
def test_measured_network_moves_the_estimate(tmp_path: Path, fabric: str, factor: float) -> None:
    """Measured NIC rate ``factor`` x the catalog's: the ZeRO-3 traffic of a 2-node job runs at
    min(NVLink, 8 NICs), so the estimate moves exactly when that minimum moves."""
    cluster = catalog.cluster(GPU, 16, inter=fabric)
    generic = LevelBandwidth.of(cluster, load_profile("generic"))
    nic = generic.nic_gb_per_s
    before = min(generic.intra_gb_per_s, 8 * nic)
    after = min(generic.intra_gb_per_s, 8 * nic * factor)
    base = _generic(cluster)
    measured = _estimate(tmp_path, cluster, _measured(nic * factor))
    assert measured.compute_s[0] == pytest.approx(base.compute_s[0])
    if after < before:
        assert measured.comm_zero_s[0] > base.comm_zero_s[0]
        assert measured.step_time_s[0] > base.step_time_s[0]
    elif after > before:
        assert measured.comm_zero_s[0] < base.comm_zero_s[0]
        assert measured.step_time_s[0] < base.step_time_s[0]
    else:  # NVLink-bound either way: only the fitted latency differs, paid per layer by ZeRO-3
        assert measured.step_time_s[0] == pytest.approx(base.step_time_s[0], rel=0.03)


def test_cases_cover_both_directions() -> None:
    """The parametrized cases above are not all NVLink-bound: one gets slower, one faster."""

    def bottleneck(fabric: str, factor: float) -> tuple[float, float]:
        lv = LevelBandwidth.of(catalog.cluster(GPU, 16, inter=fabric), load_profile("generic"))
        return (
            min(lv.intra_gb_per_s, 8 * lv.nic_gb_per_s),
            min(lv.intra_gb_per_s, 8 * lv.nic_gb_per_s * factor),
        )

    before, after = bottleneck("ib-ndr400", 1 / 3)
    assert after < before
    before, after = bottleneck("roce-100", 3.0)
    assert after > before


def test_slower_or_faster_matmuls_move_compute(tmp_path: Path) -> None:
    cluster = catalog.cluster(GPU, 16)
    base = _generic(cluster)
    nic = LevelBandwidth.of(cluster, load_profile("generic")).nic_gb_per_s
    peak = catalog.gpu(GPU).peak("bf16")
    slow = _estimate(tmp_path, cluster, _measured(nic), gemm_tflops=0.2 * peak)
    fast = _estimate(tmp_path, cluster, _measured(nic), gemm_tflops=0.95 * peak)
    assert slow.compute_s[0] > base.compute_s[0] > fast.compute_s[0]
