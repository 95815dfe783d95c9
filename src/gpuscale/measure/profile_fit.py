"""From measurements to a calibration profile: the one orchestration behind ``gpuscale
calibrate --from`` and ``gpuscale import nccl-tests`` (and the API's ``calibrate`` and
``import_nccl_tests``). Torch-free: it fits what was measured, it measures nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile, profile_from_dict
from gpuscale.costmodel.profile_schema import validate_profile
from gpuscale.errors import InputError, require
from gpuscale.measure.calibrate import (
    Calibration,
    GemmFit,
    Topology,
    calibrate,
    fit_gemm,
    profile_document,
    write_profile,
)
from gpuscale.measure.results import GemmRun
from gpuscale.measure.sources import Measurements

MAX_NICS_PER_GPU = 8
"""Most NICs per GPU ``--nics-per-node`` may state: twice the densest nodes built (AWS
p5.48xlarge: 32 EFA ports for 8 H100s, 4 per GPU; OCI BM.GPU4.8 has 2, a DGX H100 1).
The fit divides the measured inter-node rate by this share, so a NIC count past it leaves each NIC
a rate no network has (9007199254740992 NICs on 8 GPUs left 2e-14 GB/s)."""


def topology(
    measured_per_node: int | None, gpus_per_node: int | None, nics_per_node: int | None
) -> Topology:
    """The NIC share the fit assumes. ``--gpus-per-node`` only divides ``--nics-per-node``, and
    a node has at least as many GPUs as the measurement ran ranks on it (``None``: not known
    yet, for checking the options before the work)."""
    measured = measured_per_node or 1
    if gpus_per_node is not None:
        require(
            gpus_per_node >= 1,
            f"--gpus-per-node must be >= 1, got {gpus_per_node}; accepted: the GPUs of one node",
        )
        require(
            nics_per_node is not None,
            f"--gpus-per-node {gpus_per_node} has no effect without --nics-per-node; accepted: "
            "both (the NIC share per GPU), or neither",
        )
        require(
            gpus_per_node >= measured,
            f"--gpus-per-node must be at least the {measured} ranks per node the "
            f"measurement ran, got {gpus_per_node}; accepted: {measured} or more",
        )
    if nics_per_node is None:
        return Topology()
    require(
        nics_per_node >= 1,
        f"--nics-per-node must be >= 1, got {nics_per_node}; accepted: the NICs of one node",
    )
    # Without --gpus-per-node the share is per measured rank, unknown until the logs are read.
    per_node = gpus_per_node or measured_per_node
    if per_node:
        of = (
            f"--gpus-per-node {per_node}"
            if gpus_per_node
            else f"the {per_node} ranks per node measured"
        )
        require(
            nics_per_node <= MAX_NICS_PER_GPU * per_node,
            f"--nics-per-node {nics_per_node} is {nics_per_node / per_node:.4g} NICs per GPU "
            f"for {of}; accepted: 1 to {MAX_NICS_PER_GPU * per_node} (at most "
            f"{MAX_NICS_PER_GPU} per GPU)",
            field="nics_per_node",
        )
    return Topology(nics_per_gpu=nics_per_node / (gpus_per_node or measured))


def distinct_files(paths: tuple[str, ...], what: str) -> None:
    """The same file twice would count its points twice and weight the fit towards it."""
    seen: dict[Path, str] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            alias = "" if seen[key] == p else f" (as '{seen[key]}')"
            raise InputError(f"{what} '{p}' is given twice{alias}; accepted: each file once")
        seen[key] = p


POOR_FIT_RMS = 0.5
"""RMS relative residual above which a fit is warned about, not just tabled. The real nccl-tests
sweeps in tests/data/nccl-tests fit at 0.5% to 43% RMS, because one alpha-beta line cannot follow
NCCL's protocol switches between latency and bandwidth regimes (see measure/calibrate.py); past
50% the line is off by more than that effect explains."""


def profile_warnings(cal: Calibration, m: Measurements) -> list[str]:
    """What makes the written profile wrong for the GPUs it will be used on: printed on stderr
    in every output mode, and kept in the JSON document."""
    out = []
    if cal.gemm is not None and cal.gemm.key != "cpu" and any(r.on_cpu for r in m.gemm):
        lo, hi = min(cal.gemm.efficiency), max(cal.gemm.efficiency)
        out.append(
            f"the GEMM curve was measured on a CPU and is stored as {cal.gemm.key}'s "
            f"(efficiency {lo:.2g} to {hi:.2g} of its peak): estimates with this profile price "
            f"{cal.gemm.key} compute at CPU speed; use it only to test the pipeline"
        )
    cpu_links = [r for r in m.collectives if r.backend != "nccl"]
    if cal.links and cpu_links:
        rates = ", ".join(f"{lv} {f.bandwidth_gb_per_s:.3g} GB/s" for lv, f in cal.links.items())
        out.append(
            f"links fitted from {cpu_links[0].backend} on a CPU ({rates}): every GPU estimate "
            "with this profile uses host-loopback bandwidth for NVLink and the network"
        )
    for f in cal.links.values():
        if f.rms_rel_residual > POOR_FIT_RMS:
            out.append(
                f"the {f.level} fit misses the measurements by {f.rms_rel_residual:.0%} RMS "
                f"({f.max_rel_residual:.0%} at worst): one latency-bandwidth line does not "
                "describe them; see the predicted-vs-measured table"
            )
    return out


def gemm_fit(runs: list[GemmRun], gpu: str | None) -> tuple[GemmFit | None, list[str]]:
    """Efficiency against the catalog peak of ``gpu`` (or the run's recognised GPU); on a CPU
    without ``--gpu`` the curve goes under ``cpu``, normalised to the best measured rate."""
    from gpuscale.measure.matmul_bench import peak_tflops

    if not runs:
        return None, []
    samples = [s for r in runs for s in r.samples]
    gpu_id = catalog.gpu(gpu).id if gpu else next((r.gpu_id for r in runs if r.gpu_id), None)
    notes = []
    if gpu_id:
        fit = fit_gemm(samples, gpu_id, peak_tflops(gpu_id, samples[0].dtype))
    else:
        fit = fit_gemm(samples, "cpu", None)
        notes.append(
            "GEMM curve stored under 'cpu', normalised to the best measured rate (no "
            "datasheet peak); the cost model only uses it for a device named 'cpu'. "
            "Pass --gpu ID to store it for a catalog GPU"
        )
    if fit.clipped:
        notes.append(
            f"{fit.clipped} GEMM points were above the {fit.peak_tflops:g} TFLOP/s peak "
            "and were clipped to efficiency 1: is --gpu right?"
        )
    return fit, notes


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileFit:
    """A fitted calibration profile and everything said about it."""

    calibration: Calibration
    measurements: Measurements
    profile: dict[str, Any]
    """The profile document (what ``-o`` writes)."""
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    """What makes the profile wrong for the GPUs it will be used on (:func:`profile_warnings`)."""
    written: Path | None = None


def check_loadable(doc: dict[str, Any], nics_per_node: int | None = None) -> None:
    """Refuse a fitted profile that ``load_profile`` would refuse, before it is written: the
    loader's own schema check, with the error on what produced the value (a flag, or the
    measurements) rather than on a file that should never have been written."""
    where = "the profile fitted to the measurements"
    devices = sorted({*catalog.gpus(), *(d.generation for d in catalog.gpus().values())})
    try:
        validate_profile(doc, where, devices, sorted(catalog.links()))
        profile_from_dict(doc, where)
    except InputError as exc:
        # The per-NIC rate is the measured one divided by the NIC share the flag states.
        if nics_per_node is not None and "links.inter.bandwidth_gb_per_s" in str(exc):
            raise InputError(
                f"--nics-per-node {nics_per_node} leaves each NIC too little of the measured "
                f"inter-node rate: {exc}; accepted: fewer NICs per node",
                field="nics_per_node",
            ) from None
        raise InputError(f"{exc}; accepted: measurements whose fit is in that range") from None


def fit_profile(
    m: Measurements,
    *,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    name: str = "measured",
    base: str = "generic",
    output: str | Path | None = None,
    notes: Sequence[str] | None = None,
    how: str = "gpuscale calibrate",
) -> ProfileFit:
    """Fit links and the GEMM curve to ``m``, build the profile document, and write it to
    ``output`` (whole, then read back: what was written must load). ``notes``: what to say
    about the measurements [default: their own notes]."""
    load_profile(base)  # a wrong base fails before anything is written
    samples = m.collective_samples()
    topo = topology(m.ranks_per_node(), gpus_per_node, nics_per_node)
    gemm, gemm_notes = gemm_fit(m.gemm, gpu)
    cal = calibrate(samples, gemm, topo)
    today = f"{datetime.now(timezone.utc):%Y-%m-%d}"
    doc = profile_document(
        cal,
        name=name,
        base=base,
        source=m.describe(),
        topo=topo,
        how=how,
        measured_on=m.measured_on(today),
    )
    check_loadable(doc, nics_per_node)
    written = None
    if output is not None:  # "" is refused by write_profile, not taken as "no output"
        written = write_profile(output, doc)
        load_profile.cache_clear()
        load_profile(str(written))
    return ProfileFit(
        calibration=cal,
        measurements=m,
        profile=doc,
        notes=(*(m.notes() if notes is None else notes), *gemm_notes),
        warnings=tuple(profile_warnings(cal, m)),
        written=written,
    )
