"""Devices, links and the clusters built from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuscale.errors import InputError, require
from gpuscale.specs.units import GIB

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4"]
LinkKind = Literal["nvlink", "xgmi", "pcie", "infiniband", "roce", "ethernet"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Device:
    """One accelerator as its vendor's datasheet describes it."""

    id: str
    name: str
    vendor: str
    generation: str
    """Architecture family (``ampere``, ``hopper``, ``blackwell``, ``ada``, ``cdna3``): the key of
    the efficiency curves in a calibration profile."""
    memory_gib: float
    hbm_bandwidth_gb_per_s: float
    """Peak device-memory bandwidth, GB/s (1e9 bytes)."""
    peak_tflops: Mapping[str, float]
    """Dense (no sparsity) peak TFLOP/s per precision; a precision the device lacks is absent."""
    intra_link: str
    """Catalog id of the GPU-to-GPU link inside a node (``nvlink4``, ``pcie4``...)."""
    intra_bandwidth_gb_per_s: float
    """Per-GPU, per-direction bandwidth on that link, GB/s."""
    pcie: str
    """Catalog id of the GPU's PCIe link (``pcie5``...)."""
    tdp_w: float
    source: str
    nvlink_domain_gpus: int = 8
    """GPUs joined at ``intra_bandwidth`` by one NVLink/xGMI fabric: 8 in an HGX/OAM node, 72 in
    a GB200/GB300 NVL72 rack, 4 for H200 NVL bridged cards. The default node size of a cluster,
    so TP/EP groups up to this size run at NVLink speed."""
    host_link: str = ""
    """Catalog id of the GPU's link to host memory where it is not the PCIe slot (NVLink-C2C to
    the Grace CPU on GB200/GB300); empty: ``pcie``."""
    compute_capability: float | None = None
    """CUDA compute capability, major.minor (9.0 Hopper, 10.0 B200/GB200, 10.3 B300/GB300); None
    where CUDA does not run (AMD) or unknown. Engines select kernels by its exact value (vLLM's
    ``current_platform.is_device_capability(100)`` is true on a B200, false on a B300)."""

    def __post_init__(self) -> None:
        require(self.memory_gib > 0, f"GPU '{self.id}': memory_gib must be > 0")
        require(self.nvlink_domain_gpus >= 1, f"GPU '{self.id}': nvlink_domain_gpus must be >= 1")
        require(self.hbm_bandwidth_gb_per_s > 0, f"GPU '{self.id}': hbm bandwidth must be > 0")
        require(
            "bf16" in self.peak_tflops or "fp16" in self.peak_tflops,
            f"GPU '{self.id}': peak_tflops needs bf16 or fp16",
        )

    def peak(self, precision: str) -> float:
        """Dense peak TFLOP/s for ``precision``; a precision the device lacks is an error
        (an A100 has no FP8 tensor cores, a V100 no BF16), never a silent substitute."""
        if precision not in self.peak_tflops:
            raise InputError(
                f"{self.id} has no {precision} tensor-core rate; accepted: "
                f"{', '.join(self.peak_tflops)}"
            )
        return float(self.peak_tflops[precision])

    @property
    def half_precision(self) -> str:
        """The 16-bit format this device computes in: bf16 where it exists, else fp16."""
        return "bf16" if "bf16" in self.peak_tflops else "fp16"

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB


@dataclass(frozen=True, kw_only=True, slots=True)
class Link:
    """A GPU-to-GPU link or a network fabric port."""

    id: str
    name: str
    kind: LinkKind
    bandwidth_gb_per_s: float
    """Per port (per GPU, for NVLink/xGMI/PCIe), per direction, GB/s (1e9 bytes)."""
    latency_us: float
    """Typical one-way small-message latency through the software stack, microseconds."""
    rdma: bool
    source: str

    def __post_init__(self) -> None:
        require(self.bandwidth_gb_per_s > 0, f"link '{self.id}': bandwidth must be > 0")
        require(self.latency_us >= 0, f"link '{self.id}': latency must be >= 0")


def fills_whole_nodes(num_gpus: int, gpus_per_node: int) -> bool:
    """``num_gpus`` fits in one node or fills each node it spans."""
    return num_gpus <= gpus_per_node or num_gpus % gpus_per_node == 0


def check_whole_nodes(
    num_gpus: int, gpus_per_node: int, count: str | None = None, field: str | None = "gpus"
) -> None:
    """Refuse a GPU count that spans several nodes without filling each. ``count`` names it in
    the words the user gave it (default ``--gpus (N)``; ``--max-gpus (N)``, or the plan's
    degrees where no GPU count was typed: ``tp x pp x dp x cp = 1 x 1 x 4 x 1 = 4 GPUs``),
    ``field`` the argument at fault (None: several)."""
    require(
        fills_whole_nodes(num_gpus, gpus_per_node),
        f"{count or f'--gpus ({num_gpus})'} must be a multiple of --gpus-per-node "
        f"({gpus_per_node}) once it spans several nodes",
        field=field,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Cluster:
    """``num_gpus`` identical devices, ``gpus_per_node`` to a node joined by ``intra``; nodes
    joined by ``nics_per_node`` ports of ``inter`` (rail-optimized: one NIC per local rank group).
    """

    device: Device
    num_gpus: int
    gpus_per_node: int
    intra: Link
    inter: Link
    nics_per_node: int
    oversubscription: float = 1.0
    """Leaf-to-spine oversubscription: cross-leaf traffic gets ``1/oversubscription`` of the NIC rate."""
    slowest_device: Device | None = field(default=None)
    """In a mixed cluster the slowest card sets the pace of every synchronous step."""

    def __post_init__(self) -> None:
        require(self.num_gpus >= 1, f"--gpus must be >= 1, got {self.num_gpus}")
        require(self.gpus_per_node >= 1, f"--gpus-per-node must be >= 1, got {self.gpus_per_node}")
        # Rail-optimized nodes carry one compute NIC per GPU at most (NVIDIA DGX H100
        # reference architecture: 8 ConnectX-7 ports for 8 GPUs); more would give a GPU more
        # network than its PCIe slot can feed.
        require(
            1 <= self.nics_per_node <= self.gpus_per_node,
            f"--nics-per-node must be 1 to {self.gpus_per_node} (one per GPU at most), "
            f"got {self.nics_per_node}",
            field="nics_per_node",
        )
        require(self.oversubscription >= 1.0, "oversubscription must be >= 1")
        check_whole_nodes(self.num_gpus, self.gpus_per_node)
        slow = self.slowest_device
        if slow is not None:
            half = self.device.half_precision
            faster = slow.peak_tflops.get(half, 0.0) > self.device.peak_tflops[half] or (
                slow.hbm_bandwidth_gb_per_s > self.device.hbm_bandwidth_gb_per_s
            )
            require(
                not faster,
                f"--slowest-gpu {slow.id} is faster than the cluster's {self.device.id} "
                f"({slow.peak_tflops.get(half, 0.0):g} vs {self.device.peak_tflops[half]:g} "
                f"{half} TFLOP/s, {slow.hbm_bandwidth_gb_per_s:g} vs "
                f"{self.device.hbm_bandwidth_gb_per_s:g} GB/s); accepted: a card no faster than "
                f"{self.device.id} (the slowest card sets the pace), or leave it out",
                field="slowest_gpu",
            )

    @property
    def num_nodes(self) -> int:
        return max(1, -(-self.num_gpus // self.gpus_per_node))

    @property
    def gpus_in_first_node(self) -> int:
        return min(self.num_gpus, self.gpus_per_node)

    @property
    def pace_device(self) -> Device:
        return self.slowest_device or self.device
