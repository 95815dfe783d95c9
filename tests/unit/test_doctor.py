"""Doctor checks that need hardware, run against stand-ins for NVML and for the environment."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from gpuscale.measure.doctor import Report, check_environment, check_nvml


class _NVMLError(Exception):
    pass


def _fake_pynvml(width: list[int], links: list[int], busy: int = 0) -> types.ModuleType:
    """Two GPUs: ``width[i]`` PCIe lanes of 16, ``links[i]`` NVLinks up of 4."""
    nvml: Any = types.ModuleType("pynvml")
    nvml.NVMLError = _NVMLError
    nvml.NVML_FEATURE_ENABLED = 1
    nvml.NVML_NVLINK_MAX_LINKS = 4
    nvml.nvmlInit = lambda: None
    nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    nvml.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=busy if h else 0)
    nvml.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 5
    nvml.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 5
    nvml.nvmlDeviceGetCurrPcieLinkWidth = lambda h: width[h]
    nvml.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 16
    nvml.nvmlDeviceGetNvLinkState = lambda h, link: int(link < links[h])
    return nvml


GPUS = [
    {"index": 0, "name": "NVIDIA H100 80GB HBM3"},
    {"index": 1, "name": "NVIDIA H100 80GB HBM3"},
]


def test_healthy_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([16, 16], [4, 4]))
    report, gpus = Report(), [dict(g) for g in GPUS]
    check_nvml(report, gpus)
    assert [g["nvlinks_active"] for g in gpus] == [4, 4]
    assert gpus[0]["pcie"] == "gen5 x16 (max gen5 x16)"
    assert {f.status for f in report.findings} == {"ok"}


def test_degraded_pcie_missing_nvlink_and_a_busy_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([16, 8], [4, 2], busy=90))
    report = Report()
    check_nvml(report, [dict(g) for g in GPUS])
    warned = {f.area: f.detail for f in report.findings if f.status == "warn"}
    assert warned["pcie"] == "GPU 1 runs PCIe x8 of x16"
    assert warned["nvlink"] == "active NVLinks per GPU: [2, 4]"
    assert warned["utilization"] == "GPU 1 is 90% busy"
    assert report.verdict == "usable, with problems to fix"


def test_without_nvml_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    report = Report()
    check_nvml(report, [dict(g) for g in GPUS])
    (finding,) = report.findings
    assert finding.status == "skip" and "nvidia-ml-py" in finding.detail
    assert report.verdict == "healthy"  # a skipped check is not a problem


def test_risky_environment() -> None:
    report = Report()
    check_environment(
        report,
        {"NCCL_IB_DISABLE": "1", "CUDA_LAUNCH_BLOCKING": "1", "NCCL_PROTO": "LL", "PATH": "/bin"},
    )
    assert set(report.facts["environment"]) == {"NCCL_IB_DISABLE", "NCCL_PROTO"}
    details = " | ".join(f.detail for f in report.findings if f.status == "warn")
    assert "NCCL_IB_DISABLE=1" in details and "CUDA_LAUNCH_BLOCKING=1" in details
    assert "NCCL_PROTO=LL forces" in details
