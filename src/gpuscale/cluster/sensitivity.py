"""Check the slowdown model against measured packed-vs-spread throughputs.

For every spread row of ``placement_sensitivity.csv`` that has a packed partner (same source,
GPU, model, GPU count and per-GPU batch) and a measured step time, the model predicts

    spread / packed throughput = step_packed / (step_packed - T(packed) + T(spread))

where T is the cost model's all-reduce time of the model's fp32 gradients
(:func:`gpuscale.costmodel.collectives.collective_time_s`) on that placement: inside one server
at the GPU link's rate, across servers at the NICs the job's ranks own. The measured packed step
(compute, framework overheads, its own sync) is kept; only the communication the placement
changes is the model's. This is the same mechanism the simulator uses (trace duration = packed,
slowdown from the collective over the slowest level spanned).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpuscale import catalog
from gpuscale.costmodel.collectives import LevelBandwidth, collective_time_s
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.specs import Link


@dataclass(frozen=True, kw_only=True, slots=True)
class Server:
    gpus_per_node: int
    intra: Link
    nic: Link
    nics_per_node: int


@dataclass(frozen=True, kw_only=True, slots=True)
class SensitivityRow:
    id: str
    source: str
    model: str
    n_gpus: int
    packed: str
    spread: str
    measured: float
    predicted: float


def _link(value: Any) -> Link:
    if isinstance(value, str):
        return catalog.link(value)
    return Link(
        id=str(value["name"]),
        name=str(value["name"]),
        kind=value["kind"],
        bandwidth_gb_per_s=float(value["bandwidth_gb_per_s"]),
        latency_us=float(value["latency_us"]),
        rdma=False,
        source=str(value["source"]),
    )


def load_hardware(path: Path) -> tuple[dict[str, Server], dict[str, float]]:
    data = yaml.safe_load(path.read_text())
    servers = {
        key: Server(
            gpus_per_node=int(v["gpus_per_node"]),
            intra=_link(v["intra"]),
            nic=_link(v["nic"]),
            nics_per_node=int(v["nics_per_node"]),
        )
        for key, v in data["hardware"].items()
    }
    params = {name: float(v["params"]) for name, v in data["models"].items()}
    return servers, params


def allreduce_s(server: Server, placement: str, grad_bytes: float, profile: Profile) -> float:
    """All-reduce seconds of ``grad_bytes`` over a placement string (digits = GPUs per server,
    as in the Pollux/Sia artifacts: ``22`` is two servers with two GPUs each)."""
    counts = [int(c) for c in placement]
    n = sum(counts)
    per_node = min(counts)
    intra = profile.link("intra", server.intra.kind, server.intra.id)
    inter = profile.link("inter", server.nic.kind, server.nic.id)
    # Dedicated servers: a node's ranks drive up to one NIC each (NCCL binds a rank's channels
    # to its nearest NIC), so the node boundary carries min(ranks, NICs) NIC rates.
    nics = min(per_node, server.nics_per_node)
    levels = LevelBandwidth(
        intra_gb_per_s=intra.bandwidth(server.intra.bandwidth_gb_per_s),
        intra_latency_us=intra.latency(server.intra.latency_us),
        nic_gb_per_s=inter.collective_bandwidth(server.nic.bandwidth_gb_per_s),  # all-reduce
        nics_per_gpu=nics / per_node,
        inter_latency_us=inter.latency(server.nic.latency_us),
    )
    per = n if len(counts) == 1 else per_node
    return float(collective_time_s("all_reduce", grad_bytes, n, per, levels))


_NOTE = re.compile(r"placement=(\d+).*?local_bsz=(\d+); step_time_s=([0-9.eE+-]+)")


def evaluate(
    csv_path: Path, hardware_path: Path, profile: Profile | None = None
) -> list[SensitivityRow]:
    """Model vs measurement for every spread row that can be paired and has hardware data."""
    profile = profile or load_profile("generic")
    servers, params = load_hardware(hardware_path)
    rows = list(csv.DictReader(csv_path.open()))
    packed: dict[tuple[str, str, str, int, int], tuple[str, float]] = {}
    parsed: list[tuple[dict[str, str], str, int, float]] = []
    for r in rows:
        m = _NOTE.search(r["notes"])
        if m is None:
            continue
        placement, bsz, step = m.group(1), int(m.group(2)), float(m.group(3))
        key = (r["id"].rsplit("-", 1)[0], r["gpu"], r["model"], int(r["n_gpus"]), bsz)
        if r["placement"] == "packed":
            packed[key] = (placement, step)
        else:
            parsed.append((r, placement, bsz, step))
    out = []
    for r, placement, bsz, _step in parsed:
        prefix = r["id"].rsplit("-", 1)[0]
        key = (prefix, r["gpu"], r["model"], int(r["n_gpus"]), bsz)
        if key not in packed or prefix not in servers or r["model"] not in params:
            continue
        server = servers[prefix]
        p_place, p_step = packed[key]
        grad = 4.0 * params[r["model"]]
        t_packed = allreduce_s(server, p_place, grad, profile)
        t_spread = allreduce_s(server, placement, grad, profile)
        predicted = p_step / max(p_step - t_packed + t_spread, 1e-9)
        out.append(
            SensitivityRow(
                id=r["id"],
                source=prefix,
                model=r["model"],
                n_gpus=int(r["n_gpus"]),
                packed=p_place,
                spread=placement,
                measured=float(r["relative_to_packed"]),
                predicted=predicted,
            )
        )
    return out


def summary(rows: list[SensitivityRow]) -> dict[str, float]:
    """Errors of the model and of a placement-blind baseline (spread = packed, ratio 1)."""
    meas = np.array([r.measured for r in rows])
    pred = np.array([r.predicted for r in rows])
    err = np.abs(pred - meas) / meas
    blind = np.abs(1.0 - meas) / meas
    return {
        "rows": float(len(rows)),
        "median_abs_error": float(np.median(err)),
        "mean_abs_error": float(err.mean()),
        "blind_median_abs_error": float(np.median(blind)),
        "blind_mean_abs_error": float(blind.mean()),
        "within_20pct": float((err <= 0.2).mean()),
        "spearman": float(_spearman(pred, meas)) if len(rows) > 2 else float("nan"),
    }


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra = np.argsort(np.argsort(a))
    rb = np.argsort(np.argsort(b))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])
