"""Doctor checks that need hardware, run against stand-ins for NVML and for the environment."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from gpuscale.measure.doctor import Finding, Report, check_environment, check_nvml


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
    # a skipped check is not a problem, but neither is it a clean bill of health
    assert report.verdict == "nothing broken found; not checked: NVLink/PCIe link state"


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


IFACES = ["lo", "eth0", "ib0"]


@pytest.mark.parametrize(
    ("name", "value", "usable"),
    [
        ("NCCL_SOCKET_IFNAME", "nonexist0", False),
        ("NCCL_SOCKET_IFNAME", "eth", True),  # a prefix
        ("NCCL_SOCKET_IFNAME", "=eth", False),  # '=' is an exact name
        ("NCCL_SOCKET_IFNAME", "=eth0,=ib0", True),
        ("NCCL_SOCKET_IFNAME", "^docker", True),  # excludes what is not there
        ("NCCL_SOCKET_IFNAME", "^eth,ib,lo", False),  # excludes everything
        ("GLOO_SOCKET_IFNAME", "eth0", True),
        ("GLOO_SOCKET_IFNAME", "eth", False),  # gloo takes exact names
        ("GLOO_SOCKET_IFNAME", "eth0,eth9", False),  # and needs every one
    ],
)
def test_socket_interface_filters(name: str, value: str, usable: bool) -> None:
    report = Report()
    check_environment(report, {name: value}, IFACES)
    failed = [f for f in report.findings if f.status == "fail"]
    assert (not failed) is usable
    if failed:
        assert f"{name}={value} matches no network interface" in failed[0].detail
        assert "lo, eth0, ib0" in failed[0].fix
        assert report.verdict == "not ready"


def test_invalid_nccl_values_are_flagged_and_named() -> None:
    report = Report()
    env = {
        "NCCL_P2P_DISABLE": "abc",
        "NCCL_DEBUG": "LOUD",
        "NCCL_ALGO": "Foo",
        "NCCL_BUFFSIZE": "4M",
        "NCCL_P2P_LEVEL": "NVL",
        "NCCL_PROTO": "^LL128",
    }
    check_environment(report, env, IFACES)
    warned = {f.detail.split("=")[0]: f for f in report.findings if f.status == "warn"}
    for name in ("NCCL_P2P_DISABLE", "NCCL_DEBUG", "NCCL_ALGO", "NCCL_BUFFSIZE"):
        assert "is not a value NCCL accepts" in warned[name].detail
        assert warned[name].fix.startswith(f"set {name} to ")
    assert "NCCL_P2P_LEVEL" not in warned
    # a valid forced protocol is named in its own fix; the invalid NCCL_ALGO is not "forcing"
    forced = warned["NCCL_PROTO"]
    assert forced.detail == "NCCL_PROTO=^LL128 forces NCCL's choice"
    assert forced.fix == "unset NCCL_PROTO unless you measured that it helps"


def test_valid_nccl_values_pass() -> None:
    report = Report()
    env = {
        "NCCL_DEBUG": "info",
        "NCCL_ALGO": "allreduce:tree,ring;broadcast:ring",
        "NCCL_IB_DISABLE": "0",
        "NCCL_SOCKET_NTHREADS": "4",
    }
    check_environment(report, env, IFACES)
    assert [f.detail for f in report.findings if f.status == "warn"] == [
        "NCCL_ALGO=allreduce:tree,ring;broadcast:ring forces NCCL's choice"
    ]


def test_verdict_says_what_was_not_checked() -> None:
    report = Report()
    report.findings.append(Finding(area="torch", status="ok", detail="torch"))
    assert report.verdict == "healthy"
    report.findings.append(Finding(area="gpus", status="skip", detail="no CUDA GPU"))
    report.findings.append(Finding(area="network", status="skip", detail="no RDMA"))
    assert report.verdict == (
        "nothing broken found; not checked: GPUs, NVLink and NCCL, RDMA network"
    )
