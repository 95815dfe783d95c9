"""Fit a calibration profile to measurements: per-level latency and bandwidth of the collectives,
and the GEMM efficiency curve.

Collectives are fitted in the cost model's own terms, so that
:func:`gpuscale.costmodel.collectives.collective_time_s` with the fitted values reproduces the
measurement: on each level, ``t = c * alpha + x / B`` (Hockney's alpha-beta model), where ``c`` is
the number of latency steps and ``x`` the bytes each rank moves over the level's bottleneck for the
algorithm the model picks (ring or tree; Thakur, Rabenseifner & Gropp 2005, Sec. 4). Ring and
tree are two lines; the fit alternates between assigning each point to the line the model would
use and a least-squares solve. ``B`` comes from the bandwidth plateau and ``alpha`` from the
messages below it (see ``PLATEAU``): one alpha-beta line cannot follow NCCL's protocol switches
in between, and the reported residuals over all points say how far off it is there. Residuals are
relative (``(model - measured) / measured``) because a sweep spans six decades of time and an
absolute fit would ignore every small message.

``B`` is what the profile stores: for ``intra``, the bus bandwidth of a ring inside a node; for
``inter``, the rate of one NIC, since the cost model multiplies it by the NICs a group's ranks
share on each node (``ranks_per_node * nics_per_gpu``). A measurement cannot tell how many NICs a
node has, so ``nics_per_gpu`` is an assumption the caller states (default one per GPU, as on
rail-optimized DGX/HGX nodes) and the profile records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpuscale import SCHEMA_VERSION, files
from gpuscale.costmodel.collectives import OPS, LevelBandwidth, bus_factor, collective_time_s
from gpuscale.errors import InputError, require
from gpuscale.measure.results import CollectiveSample, GemmSample

LEVELS = ("intra", "inter")


def fitted_time_us(s: CollectiveSample) -> float:
    """The time a fit uses: the median iteration where per-iteration times exist (robust to the
    odd descheduled iteration), else the mean that nccl-tests prints."""
    return s.p50_us if s.p50_us else s.time_us


PLATEAU = 0.8
"""A point whose bus bandwidth is within 80% of its series' peak is on the bandwidth plateau
(NCCL's Simple protocol regime, nccl-tests doc/PERFORMANCE.md "on large sizes ... the bandwidth").
The level's bandwidth is fitted on those points only: training's gradient buckets, weight gathers
and activations are megabytes to gigabytes, so that is the regime the cost model must get
right; the latency is fitted on the smaller messages with that bandwidth fixed."""
_BIG = 1e12
"""Stand-in bandwidth (GB/s) for a level that was not measured, so the other one is the
bottleneck in predictions (stated in the fit's assumptions)."""
_STEPS = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "broadcast": 1.0}
"""Latency steps per ring hop, as in collectives.collective_time_s (reduce-scatter + all-gather
for all-reduce)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Topology:
    """What the measurement cannot see and the fit must assume."""

    nics_per_gpu: float = 1.0


ONE_NIC_PER_GPU = Topology()
"""The default assumption: rail-optimized nodes, one NIC per GPU."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LevelFit:
    level: str
    latency_us: float | None
    """Per-step latency (alpha), as the cost model uses it; ``None`` where the sweep cannot
    determine it (every message on the bandwidth plateau), so the base profile's stays."""
    bandwidth_gb_per_s: float
    """The profile value: ring bus bandwidth (intra) or one NIC's rate (inter)."""
    busbw_gb_per_s: float
    """Bus bandwidth the measured groups reached at their largest size (for reading)."""
    points: int
    rms_rel_residual: float
    max_rel_residual: float
    ops: tuple[str, ...]
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    """Predicted (cost model with the fitted profile) vs measured time of one sample."""

    op: str
    level: str
    ranks: int
    ranks_per_node: int
    size_bytes: int
    measured_us: float
    predicted_us: float

    @property
    def rel_error(self) -> float:
        return (self.predicted_us - self.measured_us) / self.measured_us


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmFit:
    key: str
    """Profile ``gemm:`` key: a catalog GPU id, or ``cpu``."""
    flops: tuple[float, ...]
    efficiency: tuple[float, ...]
    peak_tflops: float
    peak_source: str
    """Where the denominator comes from (catalog dense peak, or best measured rate on CPU)."""
    points: int
    clipped: int = 0
    """Points above the peak, clipped to efficiency 1."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    links: Mapping[str, LevelFit] = field(default_factory=dict)
    gemm: GemmFit | None = None
    comparisons: tuple[Comparison, ...] = ()
    skipped: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# collectives


def _branches(s: CollectiveSample, topo: Topology) -> list[tuple[float, float]]:
    """``(latency steps, bytes over the level's bandwidth)`` of each algorithm the cost model
    considers for this sample (collectives.collective_time_s)."""
    n, per = float(s.ranks), float(min(s.ranks_per_node, s.ranks))
    size = float(s.size_bytes)
    inter = s.level == "inter"
    share = per * topo.nics_per_gpu if inter else 1.0
    if s.op == "send_recv":
        return [(1.0, size / (topo.nics_per_gpu if inter else 1.0))]
    if s.op == "all_to_all":
        moved = size * (n - per) / n / topo.nics_per_gpu if inter else size * (n - 1) / n
        return [(n - 1.0, moved)]
    steps = _STEPS[s.op]
    x = size * float(bus_factor(s.op, n)) / share
    ring = (steps * (n - 1.0), x)
    if s.op != "all_reduce":
        return [ring]  # NCCL (and the cost model) run these as rings only
    tree = (steps * np.ceil(np.log2(n)), x * n / max(n - 1.0, 1.0))
    return [ring, tree]


def _solve(c: np.ndarray, x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """Weighted least squares of ``t = c*alpha + x*inv_bw`` on relative residuals, alpha >= 0."""
    w = 1.0 / t
    a = np.column_stack([c * w, x * w])
    (alpha, inv_bw), *_ = np.linalg.lstsq(a, t * w, rcond=None)
    if alpha < 0:
        alpha = 0.0
        xw = x * w
        inv_bw = float(xw @ (t * w) / (xw @ xw))
    return float(alpha), float(inv_bw)


def _slope(x: np.ndarray, y: np.ndarray, t: np.ndarray) -> float:
    """Least squares of ``y = k*x`` on residuals relative to ``t``."""
    w2 = 1.0 / t**2
    return float((w2 * x * y).sum() / (w2 * x * x).sum())


def _plateau(pts: Sequence[CollectiveSample]) -> np.ndarray:
    """Points within ``PLATEAU`` of the peak bus bandwidth of their own series (op, group)."""
    peak: dict[tuple[str, int, int], float] = {}
    for s in pts:
        key = (s.op, s.ranks, s.ranks_per_node)
        peak[key] = max(peak.get(key, 0.0), s.busbw_gb_per_s)
    return np.array(
        [s.busbw_gb_per_s >= PLATEAU * peak[(s.op, s.ranks, s.ranks_per_node)] > 0 for s in pts]
    )


def fit_level(
    samples: Sequence[CollectiveSample], level: str, topo: Topology = ONE_NIC_PER_GPU
) -> LevelFit:
    """Alpha (s per step) and bandwidth of one level from a size sweep (any mix of ops)."""
    pts = [
        s
        for s in samples
        if s.level == level
        and s.ranks > 1
        and s.size_bytes > 0
        and s.valid
        and s.op in OPS
        and fitted_time_us(s) > 0
    ]
    require(
        len(pts) >= 2,
        f"{level}: need at least 2 valid measurements of a collective over 2+ "
        f"ranks to fit latency and bandwidth, got {len(pts)}",
    )
    t = np.array([fitted_time_us(s) * 1e-6 for s in pts])
    branches = [_branches(s, topo) for s in pts]
    plateau = _plateau(pts)
    if plateau.all():
        return _bandwidth_only(pts, t, branches, level, topo)
    split = bool(plateau.any())
    pick = np.zeros(len(pts), dtype=int)
    alpha = inv_bw = 0.0
    for step in range(40):
        c = np.array([b[i][0] for b, i in zip(branches, pick, strict=True)])
        x = np.array([b[i][1] for b, i in zip(branches, pick, strict=True)])
        if step == 0 or not split:
            alpha, inv_bw = _solve(c, x, t)
        else:
            # bandwidth from the plateau, latency from the messages below it
            inv_bw = _slope(x[plateau], t[plateau] - c[plateau] * alpha, t[plateau])
            alpha = max(0.0, _slope(c[~plateau], t[~plateau] - x[~plateau] * inv_bw, t[~plateau]))
        new = np.array(
            [int(np.argmin([cc * alpha + xx * inv_bw for cc, xx in b])) for b in branches]
        )
        if step > 0 and np.array_equal(new, pick) and not split:
            break
        pick = new
    return _level_fit(pts, t, branches, level, topo, alpha, inv_bw)


def _bandwidth_only(
    pts: Sequence[CollectiveSample],
    t: np.ndarray,
    branches: Sequence[Sequence[tuple[float, float]]],
    level: str,
    topo: Topology,
) -> LevelFit:
    """Every message is on the bandwidth plateau, where the latency term is a rounding error of
    the time: a least-squares alpha there is unconstrained noise (a 2.5 us inter-node all-reduce
    fitted on 0.5-8 GB messages, against the 15-50 us such a network takes). Fit the bandwidth
    alone (with alpha = 0 the ring is the model's pick) and leave the latency undetermined."""
    x = np.array([b[0][1] for b in branches])
    inv_bw = _slope(x, t, t)
    fit = _level_fit(pts, t, branches, level, topo, 0.0, inv_bw)
    return replace(
        fit,
        latency_us=None,
        assumptions=(
            *fit.assumptions,
            "latency not determined: every message is on the bandwidth plateau, so the base "
            "profile's latency is kept (measure small messages too, e.g. nccl-tests -b 8)",
        ),
    )


def _level_fit(
    pts: Sequence[CollectiveSample],
    t: np.ndarray,
    branches: Sequence[Sequence[tuple[float, float]]],
    level: str,
    topo: Topology,
    alpha: float,
    inv_bw: float,
) -> LevelFit:
    if inv_bw <= 0:
        raise InputError(
            f"{level}: the sweep shows no bandwidth term (time does not grow with "
            "size); accepted: a sweep up to large messages (e.g. --sizes 8:128M)"
        )
    model = np.array([min(cc * alpha + xx * inv_bw for cc, xx in b) for b in branches])
    rel = (model - t) / t
    biggest = max(pts, key=lambda s: s.size_bytes)
    assumptions = []
    if level == "inter":
        assumptions.append(
            f"{topo.nics_per_gpu:g} NIC per GPU; the network, not NVLink/PCIe, is "
            "the bottleneck of groups that cross nodes"
        )
    return LevelFit(
        level=level,
        latency_us=alpha * 1e6,
        bandwidth_gb_per_s=1.0 / inv_bw / 1e9,
        busbw_gb_per_s=biggest.busbw_gb_per_s,
        points=len(pts),
        rms_rel_residual=float(np.sqrt(np.mean(rel**2))),
        max_rel_residual=float(np.abs(rel).max()),
        ops=tuple(sorted({s.op for s in pts})),
        assumptions=tuple(assumptions),
    )


def level_bandwidth(
    links: Mapping[str, LevelFit], topo: Topology = ONE_NIC_PER_GPU
) -> LevelBandwidth:
    """The cost model's view of a cluster whose levels are the fitted ones."""
    intra, inter = links.get("intra"), links.get("inter")
    return LevelBandwidth(
        intra_gb_per_s=intra.bandwidth_gb_per_s if intra else _BIG,
        intra_latency_us=(intra.latency_us or 0.0) if intra else 0.0,
        nic_gb_per_s=inter.bandwidth_gb_per_s if inter else _BIG,
        nics_per_gpu=topo.nics_per_gpu,
        inter_latency_us=(inter.latency_us or 0.0) if inter else 0.0,
    )


def compare(
    samples: Iterable[CollectiveSample],
    links: Mapping[str, LevelFit],
    topo: Topology = ONE_NIC_PER_GPU,
) -> tuple[Comparison, ...]:
    """Every fitted sample, measured vs what ``collective_time_s`` predicts with the fit."""
    levels = level_bandwidth(links, topo)
    out = []
    for s in samples:
        if s.level not in links or s.op not in OPS or not s.valid or s.size_bytes <= 0:
            continue
        per = s.ranks_per_node if s.level == "inter" else s.ranks
        predicted = float(collective_time_s(s.op, s.size_bytes, s.ranks, per, levels)) * 1e6
        out.append(
            Comparison(
                op=s.op,
                level=s.level,
                ranks=s.ranks,
                ranks_per_node=per,
                size_bytes=s.size_bytes,
                measured_us=fitted_time_us(s),
                predicted_us=predicted,
            )
        )
    return tuple(out)


# --------------------------------------------------------------------------------------------
# GEMM


def fit_gemm(
    samples: Sequence[GemmSample], key: str, peak_tflops: float | None, bins_per_decade: int = 4
) -> GemmFit:
    """Efficiency over GEMM FLOPs: the median of each ``1/bins_per_decade`` decade of size.

    ``peak_tflops`` is the catalog device's dense peak for the dtype; without one (a CPU), the
    curve is normalised to the best measured rate, which keeps its shape but not its level.
    """
    pts = [s for s in samples if s.tflops > 0]
    require(bool(pts), "matmul: no successful GEMM measurement to fit")
    best = max(s.tflops for s in pts)
    peak, source = (
        (peak_tflops, "catalog dense peak")
        if peak_tflops
        else (best, "best measured rate (no datasheet peak for this device)")
    )
    flops = np.array([s.flops for s in pts])
    eff = np.array([s.tflops / peak for s in pts])
    clipped = int((eff > 1.0).sum())
    eff = np.clip(eff, 1e-6, 1.0)
    bucket = np.round(np.log10(flops) * bins_per_decade).astype(int)
    xs, ys = [], []
    for b in sorted(set(bucket.tolist())):
        sel = bucket == b
        xs.append(float(10 ** np.median(np.log10(flops[sel]))))
        ys.append(float(np.median(eff[sel])))
    return GemmFit(
        key=key,
        flops=tuple(xs),
        efficiency=tuple(round(y, 4) or 1e-4 for y in ys),
        peak_tflops=float(peak),
        peak_source=source,
        points=len(pts),
        clipped=clipped,
    )


# --------------------------------------------------------------------------------------------
# profile


def calibrate(
    collectives: Sequence[CollectiveSample] = (),
    gemm: GemmFit | None = None,
    topo: Topology = ONE_NIC_PER_GPU,
) -> Calibration:
    """Fit every level that has measurements; say which samples could not be used."""
    links: dict[str, LevelFit] = {}
    for level in LEVELS:
        if any(s.level == level for s in collectives):
            links[level] = fit_level(collectives, level, topo)
    skipped = sorted({s.op for s in collectives if s.op not in OPS})
    notes = tuple(f"{op}: not in the cost model, not fitted" for op in skipped)
    bad = [s for s in collectives if not s.valid]
    if bad:
        notes += (f"{len(bad)} rows with wrong values left out",)
    require(
        bool(links) or gemm is not None, "nothing to calibrate: no collective or GEMM measurements"
    )
    return Calibration(
        links=links, gemm=gemm, comparisons=compare(collectives, links, topo), skipped=notes
    )


def profile_document(
    cal: Calibration,
    *,
    name: str,
    base: str,
    source: str,
    topo: Topology = ONE_NIC_PER_GPU,
    how: str = "gpuscale calibrate",
    measured_on: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A profile YAML mapping (costmodel/profile.py schema) with a ``fit:`` provenance block.

    ``measured_on`` (``{device: <catalog id or 'cpu'>, backend: gloo|nccl, date: ...}``) says
    what the numbers describe, so a reader of the profile can tell a CPU/loopback measurement
    from a GPU one before pricing a GPU with it."""
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "base": base,
        "description": f"Measured with {how} on {datetime.now(timezone.utc):%Y-%m-%d}",
        "source": source,
    }
    if measured_on:
        doc["measured_on"] = dict(measured_on)
    if cal.links:
        doc["links"] = {lv: _link_entry(f) for lv, f in cal.links.items()}
    if cal.gemm is not None:
        doc["gemm"] = {
            cal.gemm.key: {
                "flops": [_sig(x) for x in cal.gemm.flops],
                "efficiency": list(cal.gemm.efficiency),
            }
        }
    fit: dict[str, Any] = {"nics_per_gpu": topo.nics_per_gpu}
    for lv, f in cal.links.items():
        fit[lv] = {
            "points": f.points,
            "ops": list(f.ops),
            "busbw_gb_per_s_at_largest": _sig(f.busbw_gb_per_s),
            "rms_rel_residual": _sig(f.rms_rel_residual),
            "max_rel_residual": _sig(f.max_rel_residual),
            "assumptions": list(f.assumptions),
        }
    if cal.gemm is not None:
        fit["gemm"] = {
            "key": cal.gemm.key,
            "points": cal.gemm.points,
            "peak_tflops": _sig(cal.gemm.peak_tflops),
            "peak": cal.gemm.peak_source,
            "clipped_above_peak": cal.gemm.clipped,
        }
    if cal.skipped:
        fit["skipped"] = list(cal.skipped)
    doc["fit"] = fit
    return doc


def _link_entry(f: LevelFit) -> dict[str, float]:
    """An undetermined latency is left out, so the base profile's (or the catalog's) applies."""
    entry = {"bandwidth_gb_per_s": _sig(f.bandwidth_gb_per_s)}
    if f.latency_us is not None:
        entry["latency_us"] = _sig(f.latency_us)
    return entry


def _sig(x: float, digits: int = 4) -> float:
    return float(f"{x:.{digits}g}")


def write_profile(path: str | Path, doc: Mapping[str, Any]) -> Path:
    out = Path(path)
    header = (
        "# gpuscale calibration profile (schema in gpuscale/costmodel/profile.py).\n"
        "# 'measured_on' says what the numbers were measured on (device, backend, date);\n"
        "# 'fit' records how they were obtained (the cost model does not read it).\n"
    )
    text = header + yaml.safe_dump(dict(doc), sort_keys=False, width=100)
    return files.write_text(out, text, label="-o", field="output")
