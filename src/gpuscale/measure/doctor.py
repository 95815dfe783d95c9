"""Is this machine healthy for distributed training? Facts, findings and next steps.

Each check returns :class:`Finding` s with a status: ``ok``, ``warn`` (works, but will cost
throughput), ``fail`` (training will break), or ``skip`` (could not be checked here, and why).
Optional pieces are imported where they are used: torch, and NVML through ``nvidia-ml-py``.
Expectations come from the catalog and the ``generic`` calibration profile, never from constants
in this file.
"""

from __future__ import annotations

import os
import platform
import re
import socket
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.stats import JITTER_CV_LIMIT

STATUSES = ("ok", "warn", "fail", "skip")
BENCH_FLOOR = 0.5
"""A benchmark below half of what the catalog and the generic profile expect is a warning: the
gap is too large for run-to-run noise (NeMo's revisions differ by ~6%, README of the validation
set) and points at a misconfiguration (wrong NIC, no P2P, throttling)."""

_ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "FI_", "UCX_")
_ENV_NAMES = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "OMP_NUM_THREADS",
)
_RISKY_ENV = {
    "NCCL_P2P_DISABLE": (
        "1",
        "disables NVLink/PCIe peer-to-peer: intra-node traffic goes through host memory",
        "unset NCCL_P2P_DISABLE",
    ),
    "NCCL_IB_DISABLE": (
        "1",
        "disables InfiniBand/RoCE: inter-node traffic falls back to TCP sockets",
        "unset NCCL_IB_DISABLE on an RDMA cluster",
    ),
    "NCCL_SHM_DISABLE": (
        "1",
        "disables shared-memory transport inside a node",
        "unset NCCL_SHM_DISABLE",
    ),
    "CUDA_LAUNCH_BLOCKING": (
        "1",
        "serialises every CUDA launch (a debugging switch)",
        "unset CUDA_LAUNCH_BLOCKING for training",
    ),
}


NCCL_ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
"""Source of the accepted values below: NCCL's environment-variable reference (2.23 to 2.27)."""
_NCCL_SWITCHES = (
    "NCCL_P2P_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_SHM_DISABLE",
    "NCCL_NET_GDR_READ",
    "NCCL_NVLS_ENABLE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_COLLNET_ENABLE",
    "NCCL_IGNORE_CPU_AFFINITY",
)
"""0/1 switches. NCCL reads them with strtoll and, on a value that is not a number, warns and
keeps its default: a typo silently does nothing."""
_NCCL_INTEGERS = (
    "NCCL_SOCKET_NTHREADS",
    "NCCL_NSOCKS_PERTHREAD",
    "NCCL_BUFFSIZE",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT",
)
_PATH_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "0", "1", "2", "3", "4", "5")
_NCCL_WORDS = {
    "NCCL_DEBUG": ("VERSION", "WARN", "INFO", "TRACE", "ABORT"),
    "NCCL_P2P_LEVEL": _PATH_LEVELS,
    "NCCL_NET_GDR_LEVEL": _PATH_LEVELS,
}
_NCCL_CHOICE_LISTS = {
    "NCCL_ALGO": (
        "Ring",
        "Tree",
        "CollNet",
        "CollNetDirect",
        "CollNetChain",
        "NVLS",
        "NVLSTree",
        "PAT",
    ),
    "NCCL_PROTO": ("LL", "LL128", "Simple"),
}
"""Comma lists, optionally negated with ``^``, and for NCCL_ALGO optionally per collective
(``allreduce:tree,ring;broadcast:ring``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    area: str
    status: str
    detail: str
    fix: str = ""


_UNCHECKED = {
    "gpus": "GPUs, NVLink and NCCL",
    "nvlink/pcie": "NVLink/PCIe link state",
    "network": "RDMA network",
    "torch": "everything that needs torch",
}
"""How the verdict names what a skipped check left unchecked."""


@dataclass(kw_only=True)
class Report:
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """``healthy`` only when every check ran: a CPU box where the GPU checks were skipped
        has nothing broken, which is less than healthy."""
        statuses = {f.status for f in self.findings}
        if "fail" in statuses:
            return "not ready"
        if "warn" in statuses:
            return "usable, with problems to fix"
        unchecked = list(dict.fromkeys(_UNCHECKED.get(f.area, f.area) for f in self.skipped()))
        if unchecked:
            return f"nothing broken found; not checked: {', '.join(unchecked)}"
        return "healthy"

    def next_steps(self) -> list[str]:
        return list(
            dict.fromkeys(f.fix for f in self.findings if f.fix and f.status in ("fail", "warn"))
        )

    def skipped(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "skip"]


def check_software(report: Report) -> Any:
    """Python, torch, CUDA and NCCL versions; returns the torch module or ``None``."""
    report.facts["python"] = platform.python_version()
    report.facts["platform"] = platform.platform()
    try:
        import torch
    except ImportError:
        report.findings.append(
            Finding(
                area="torch",
                status="skip",
                detail="PyTorch is not installed: no GPU, NCCL or benchmark checks",
                fix="pip install 'gpuscale[torch]'",
            )
        )
        return None
    import torch.distributed as dist

    report.facts["torch"] = torch.__version__
    report.facts["cuda_runtime"] = torch.version.cuda
    report.facts["nccl_available"] = dist.is_nccl_available()
    report.facts["gloo_available"] = dist.is_gloo_available()
    if torch.cuda.is_available() and dist.is_nccl_available():
        report.facts["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    report.findings.append(
        Finding(
            area="torch",
            status="ok",
            detail=f"torch {torch.__version__}"
            + (f", CUDA {torch.version.cuda}" if torch.version.cuda else " (CPU build)"),
        )
    )
    if not dist.is_available():
        report.findings.append(
            Finding(
                area="torch.distributed",
                status="fail",
                detail="this torch build has no torch.distributed",
                fix="install a torch build with distributed support",
            )
        )
    return torch


def check_gpus(report: Report, torch: Any) -> list[dict[str, Any]]:
    if torch is None or not torch.cuda.is_available():
        report.findings.append(
            Finding(
                area="gpus",
                status="skip",
                detail="no CUDA GPU visible: GPU memory, NVLink/PCIe "
                "state and NCCL were not checked",
            )
        )
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        free, total = torch.cuda.mem_get_info(i)
        gpus.append(
            {
                "index": i,
                "name": props.name,
                "memory_gib": round(total / 2**30, 1),
                "free_gib": round(free / 2**30, 1),
                "capability": f"{props.major}.{props.minor}",
                "catalog_id": match_gpu(props.name, total / 2**30),
            }
        )
    report.facts["gpus"] = gpus
    names = {g["name"] for g in gpus}
    report.findings.append(
        Finding(
            area="gpus",
            status="ok" if len(names) == 1 else "warn",
            detail=f"{len(gpus)} x {', '.join(sorted(names))}",
            fix=""
            if len(names) == 1
            else "mixed GPU models: the slowest sets the pace of every step",
        )
    )
    busy = [g for g in gpus if g["free_gib"] < 0.9 * g["memory_gib"]]
    if busy:
        report.findings.append(
            Finding(
                area="gpu memory",
                status="warn",
                detail=f"GPU {', '.join(str(g['index']) for g in busy)} already has memory in use",
                fix="check nvidia-smi for other processes before training",
            )
        )
    if torch.cuda.device_count() > 1:
        blocked = [
            (a, b)
            for a in range(len(gpus))
            for b in range(len(gpus))
            if a != b and not torch.cuda.can_device_access_peer(a, b)
        ]
        report.findings.append(
            Finding(
                area="peer access",
                status="warn" if blocked else "ok",
                detail=f"{len(blocked)} GPU pairs without peer-to-peer access"
                if blocked
                else "every GPU pair has peer-to-peer access",
                fix="check IOMMU/ACS settings and NCCL_P2P_LEVEL" if blocked else "",
            )
        )
    return gpus


def check_nvml(report: Report, gpus: list[dict[str, Any]]) -> None:
    if not gpus:
        return
    try:
        import pynvml
    except ImportError:
        report.findings.append(
            Finding(
                area="nvlink/pcie",
                status="skip",
                detail="nvidia-ml-py is not installed: NVLink and PCIe link state not checked",
                fix="pip install 'gpuscale[nvml]'",
            )
        )
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        report.findings.append(
            Finding(area="nvlink/pcie", status="skip", detail=f"NVML did not start: {exc}")
        )
        return
    try:
        for g in gpus:
            h = pynvml.nvmlDeviceGetHandleByIndex(g["index"])
            g["utilization_pct"] = pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            gen, width = (
                pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h),
                pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
            )
            max_gen, max_width = (
                pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h),
                pynvml.nvmlDeviceGetMaxPcieLinkWidth(h),
            )
            g["pcie"] = f"gen{gen} x{width} (max gen{max_gen} x{max_width})"
            if width < max_width:
                report.findings.append(
                    Finding(
                        area="pcie",
                        status="warn",
                        detail=f"GPU {g['index']} runs PCIe x{width} of x{max_width}",
                        fix="reseat the card or check the riser/BIOS lane settings",
                    )
                )
            active = 0
            for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                try:
                    active += int(
                        pynvml.nvmlDeviceGetNvLinkState(h, link) == pynvml.NVML_FEATURE_ENABLED
                    )
                except pynvml.NVMLError:
                    break
            g["nvlinks_active"] = active
            if g["utilization_pct"] > 10:
                report.findings.append(
                    Finding(
                        area="utilization",
                        status="warn",
                        detail=f"GPU {g['index']} is {g['utilization_pct']}% busy",
                        fix="another job is using the GPU; benchmarks will be low",
                    )
                )
        links = {g["nvlinks_active"] for g in gpus}
        report.findings.append(
            Finding(
                area="nvlink",
                status="ok" if len(links) == 1 else "warn",
                detail=f"active NVLinks per GPU: {sorted(links)}",
                fix=""
                if len(links) == 1
                else "a GPU has fewer NVLinks up: run nvidia-smi nvlink -s",
            )
        )
    finally:
        pynvml.nvmlShutdown()


def check_environment(
    report: Report,
    environ: dict[str, str] | None = None,
    interfaces: Iterable[str] | None = None,
) -> None:
    env = dict(os.environ if environ is None else environ)
    names = list(_interface_names() if interfaces is None else interfaces)
    relevant = {
        k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES
    }
    report.facts["environment"] = relevant
    for name, (bad, why, fix) in _RISKY_ENV.items():
        if env.get(name) == bad:
            report.findings.append(
                Finding(area="environment", status="warn", detail=f"{name}={bad} {why}", fix=fix)
            )
    invalid = check_nccl_values(report, env, names)
    forced = [k for k in ("NCCL_ALGO", "NCCL_PROTO") if k in env and k not in invalid]
    if forced:
        report.findings.append(
            Finding(
                area="environment",
                status="warn",
                detail=f"{', '.join(f'{k}={env[k]}' for k in forced)} forces NCCL's choice",
                fix=f"unset {' and '.join(forced)} unless you measured that "
                + ("they help" if len(forced) > 1 else "it helps"),
            )
        )
    nets = _interfaces()
    report.facts["network_interfaces"] = nets
    rdma = (
        sorted(p.name for p in Path("/sys/class/infiniband").glob("*"))
        if Path("/sys/class/infiniband").is_dir()
        else []
    )
    report.facts["rdma_devices"] = rdma
    report.findings.append(
        Finding(
            area="network",
            status="ok" if rdma else "skip",
            detail=f"RDMA devices: {', '.join(rdma)}"
            if rdma
            else "no RDMA (InfiniBand/RoCE) device: fine for one node; across nodes NCCL would use TCP "
            "sockets",
        )
    )


def check_nccl_values(report: Report, env: dict[str, str], interfaces: list[str]) -> set[str]:
    """Flag NCCL/gloo variables whose value NCCL or gloo will not accept; return their names.

    An interface filter that matches nothing stops the bootstrap ("no socket interface found"),
    so it fails; a malformed tuning value is ignored by NCCL with a log line, so it warns."""
    invalid: set[str] = set()
    shown = ", ".join(interfaces) or "none"
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if name in env and not _interface_matches(name, env[name], interfaces):
            invalid.add(name)
            report.findings.append(
                Finding(
                    area="environment",
                    status="fail",
                    detail=f"{name}={env[name]} matches no network interface here "
                    f"(interfaces: {shown}): process-group setup will fail",
                    fix=f"set {name} to one of: {shown} (or unset it)",
                )
            )

    def bad(name: str, accepted: str) -> None:
        invalid.add(name)
        report.findings.append(
            Finding(
                area="environment",
                status="warn",
                detail=f"{name}={env[name]} is not a value NCCL accepts, so it does not do "
                f"what was meant (accepted: {accepted})",
                fix=f"set {name} to {accepted}, or unset it",
            )
        )

    for name in _NCCL_SWITCHES:
        if name in env and env[name].strip() not in ("0", "1"):
            bad(name, "0 or 1")
    for name in _NCCL_INTEGERS:
        if name in env and not re.fullmatch(r"\s*-?\d+\s*", env[name]):
            bad(name, "an integer")
    for name, words in _NCCL_WORDS.items():
        if name in env and env[name].strip().upper() not in words:
            bad(name, f"one of {', '.join(words)}")
    for name, choices in _NCCL_CHOICE_LISTS.items():
        if name in env and not _valid_choice_list(env[name], choices):
            bad(name, f"a comma list of {', '.join(choices)}, optionally after ^")
    return invalid


def _interface_matches(name: str, value: str, interfaces: list[str]) -> bool:
    """Whether the filter leaves an interface to use. NCCL_SOCKET_IFNAME takes prefixes, ``=``
    for an exact name and a leading ``^`` to exclude (NCCL env docs); GLOO_SOCKET_IFNAME takes
    exact names, comma separated, and gloo needs every one of them."""
    items = [i.strip() for i in value.lstrip("^").split(",") if i.strip()]
    if name == "GLOO_SOCKET_IFNAME":
        return bool(items) and all(i in interfaces for i in value.split(","))

    def hit(iface: str, item: str) -> bool:
        return iface == item[1:] if item.startswith("=") else iface.startswith(item)

    if value.startswith("^"):
        return any(not any(hit(i, item) for item in items) for i in interfaces)
    return any(hit(i, item) for i in interfaces for item in items)


def _valid_choice_list(value: str, choices: tuple[str, ...]) -> bool:
    known = {c.lower() for c in choices}
    for part in value.split(";"):
        names = part.split(":", 1)[-1].lstrip("^")
        words = [w.strip().lower() for w in names.split(",")]
        if not words or not all(w in known for w in words):
            return False
    return True


def _interface_names() -> list[str]:
    try:
        return [name for _, name in socket.if_nameindex()]
    except OSError:
        return []


def _interfaces() -> dict[str, str]:
    out = {}
    for dev in sorted(Path("/sys/class/net").glob("*")) if Path("/sys/class/net").is_dir() else []:
        if dev.name == "lo":
            continue
        try:
            speed = (dev / "speed").read_text().strip()
        except OSError:
            speed = "?"
        out[dev.name] = f"{speed} Mb/s" if speed not in ("?", "-1") else "speed unknown"
    return out


def check_allreduce(
    report: Report,
    torch: Any,
    gpus: list[dict[str, Any]],
    timeout_s: float,
    on_step: Callable[[str], None] | None = None,
) -> None:
    """A short all-reduce sweep over every local GPU (nccl), or 2 gloo ranks on a CPU."""
    if torch is None:
        return
    from gpuscale.measure.bench_setup import choose_launch
    from gpuscale.measure.collectives_bench import CollectiveConfig
    from gpuscale.measure.launcher import RankFailure, launch

    plan = choose_launch(nproc=None, backend="auto", gpus=len(gpus))
    nproc, backend = plan.ranks, plan.backend
    cfg = CollectiveConfig(
        ops=("all_reduce",),
        sizes=(1024, 2**20, 2**24 if gpus else 2**22),
        iters=10,
        warmup=3,
        backend=backend,
        timeout_s=timeout_s,
        command="gpuscale doctor",
    )
    if on_step:
        on_step(f"all-reduce over {nproc} {backend} ranks")
    try:
        result = launch(cfg.to_dict(), nproc, timeout_s=timeout_s).result
    except RankFailure as exc:
        report.findings.append(
            Finding(
                area="all-reduce",
                status="fail",
                detail=str(exc),
                fix="run with NCCL_DEBUG=INFO and read the first error",
            )
        )
        return
    samples = result["samples"]
    big, small = samples[-1], samples[0]
    report.facts["allreduce"] = {
        "backend": backend,
        "ranks": nproc,
        "busbw_gb_per_s": round(big["busbw_gb_per_s"], 3),
        "size_bytes": big["size_bytes"],
        "small_message_us": round(small["time_us"], 1),
    }
    jittery = [s for s in samples if (s.get("cv") or 0) > JITTER_CV_LIMIT]
    detail = (
        f"{nproc} {backend} ranks: {big['busbw_gb_per_s']:.2f} GB/s busbw at "
        f"{big['size_bytes'] // 2**20} MiB, {small['time_us']:.0f} us at 1 KiB"
    )
    status, fix = "ok", ""
    expected = _expected_busbw(gpus)
    if expected is not None and big["busbw_gb_per_s"] < BENCH_FLOOR * expected:
        status, fix = (
            "warn",
            (
                "all-reduce is far below the catalog link rate: check NVLink/"
                "P2P (nvidia-smi topo -m) and NCCL_* settings"
            ),
        )
        detail += f" (expected about {expected:.0f})"
    elif jittery:
        status = "warn"
        fix = "network jitter: expect slow training; look for noisy neighbours or CPU contention"
        detail += f"; run-to-run variation over {JITTER_CV_LIMIT:.0%} at {len(jittery)} sizes"
    if not gpus:
        detail += " (CPU/gloo: a check that torch.distributed works, not an interconnect figure)"
    report.findings.append(Finding(area="all-reduce", status=status, detail=detail, fix=fix))


def _expected_busbw(gpus: list[dict[str, Any]]) -> float | None:
    ids = {g.get("catalog_id") for g in gpus}
    if len(gpus) < 2 or len(ids) != 1 or None in ids:
        return None
    device = catalog.gpu(str(ids.pop()))
    link = catalog.link(device.intra_link)
    return (
        load_profile("generic")
        .link("intra", link.kind, link.id)
        .bandwidth(device.intra_bandwidth_gb_per_s)
    )


def check_matmul(
    report: Report,
    torch: Any,
    gpus: list[dict[str, Any]],
    on_step: Callable[[str], None] | None = None,
) -> None:
    if torch is None:
        return
    from gpuscale.measure.matmul_bench import MatmulConfig, parse_shapes, run

    size = 8192 if gpus else 512
    dtype = "bfloat16" if gpus else "float32"
    if on_step:
        on_step(f"{size}^3 {dtype} matmul")
    gpu_id = gpus[0].get("catalog_id") if gpus else None
    result = run(
        MatmulConfig(
            shapes=tuple(parse_shapes(str(size))),
            dtype=dtype,
            device="cuda" if gpus else "cpu",
            iters=10,
            warmup=3,
            gpu_id=gpu_id,
        )
    )
    s = result.samples[0]
    report.facts["matmul"] = {"shape": size, "dtype": dtype, "tflops": round(s.tflops, 3)}
    detail = f"{size}x{size}x{size} {dtype}: {s.tflops:.2f} TFLOP/s"
    status, fix = "ok", ""
    if gpu_id:
        device = catalog.gpu(gpu_id)
        eff = float(load_profile("generic").gemm_curve(device.id, device.generation)(s.flops))
        expected = eff * device.peak(device.half_precision)
        detail += f" (generic profile expects about {expected:.0f})"
        if s.tflops < BENCH_FLOOR * expected:
            status, fix = (
                "warn",
                (
                    "matmul far below the expected rate: check clocks and "
                    "throttling (nvidia-smi -q -d PERFORMANCE)"
                ),
            )
    elif gpus:
        detail += " (GPU not in the catalog: no expectation)"
    else:
        detail += " (CPU: no expectation)"
    report.findings.append(Finding(area="matmul", status=status, detail=detail, fix=fix))


def diagnose(
    *,
    benchmarks: bool = True,
    timeout_s: float = 60.0,
    on_step: Callable[[str], None] | None = None,
) -> Report:
    report = Report()
    report.facts["executable"] = sys.executable
    torch = check_software(report)
    gpus = check_gpus(report, torch)
    check_nvml(report, gpus)
    check_environment(report)
    if benchmarks:
        check_allreduce(report, torch, gpus, timeout_s, on_step)
        check_matmul(report, torch, gpus, on_step)
    else:
        report.findings.append(
            Finding(area="benchmarks", status="skip", detail="skipped (--no-bench)")
        )
    return report


def statuses(findings: Iterable[Finding]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for f in findings:
        counts[f.status] += 1
    return counts
