"""Read measurements from files: ``gpuscale bench ... --json`` output and nccl-tests logs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from gpuscale import files
from gpuscale.errors import InputError
from gpuscale.measure import nccl_tests
from gpuscale.measure.devices import match_gpu
from gpuscale.measure.results import (
    COLLECTIVES_KIND,
    MATMUL_KIND,
    CollectiveRun,
    CollectiveSample,
    GemmRun,
)


@dataclass(kw_only=True)
class Measurements:
    collectives: list[CollectiveRun] = field(default_factory=list)
    nccl: list[nccl_tests.NcclTestsRun] = field(default_factory=list)
    gemm: list[GemmRun] = field(default_factory=list)
    in_place: bool = False
    """Fit nccl-tests' in-place columns instead of the out-of-place ones."""

    def collective_samples(self) -> list[CollectiveSample]:
        out = [s for run in self.collectives for s in run.samples]
        out += [s for run in self.nccl for s in run.samples(in_place=self.in_place)]
        return out

    def ranks_per_node(self) -> int:
        """GPUs per node in the measured jobs (the largest, where they differ)."""
        sizes = [r.ranks_per_node for r in self.collectives] + [r.ranks_per_node for r in self.nccl]
        return max(sizes, default=1)

    def describe(self) -> str:
        """One line per source for the profile's ``source:``."""
        parts = [
            f"gpuscale bench collectives ({r.backend}, {r.world_size} ranks on {r.nodes} "
            f"node(s), {r.device}) on {r.host} at {r.started}"
            for r in self.collectives
        ]
        parts += [
            f"nccl-tests {r.op} log {Path(r.path).name} ({r.ranks} x "
            f"{r.device_names[0] if r.device_names else '?'}, {r.nodes} node(s)"
            f"{', NCCL ' + r.nccl_version if r.nccl_version else ''})"
            for r in self.nccl
        ]
        parts += [
            f"gpuscale bench matmul ({r.device}) on {r.host} at {r.started}" for r in self.gemm
        ]
        return "; ".join(parts)

    def measured_on(self, today: str) -> dict[str, str]:
        """What the measurements ran on, for the profile's ``measured_on:``: ``device`` (a catalog
        id, ``cpu``, or the driver's name of an unrecognised GPU; ``a+b`` for a mix), ``backend``
        of the collectives (``gloo``/``nccl``), and ``date``: the earliest measurement, or
        ``today`` where a source (an nccl-tests log) does not record when it ran."""
        devices: list[str] = []
        backends: list[str] = []
        dates: list[str | None] = []
        for run in self.collectives:
            backends.append(run.backend)
            devices.append("cpu" if run.backend != "nccl" else match_gpu(run.device) or run.device)
            dates.append(run.started[:10] or None)
        for log in self.nccl:
            backends.append("nccl")
            name = log.device_names[0] if log.device_names else ""
            devices.append(match_gpu(name) or name or "unknown GPU")
            dates.append(None)
        for gemm in self.gemm:
            gpu = "cpu" if gemm.on_cpu else match_gpu(gemm.device) or gemm.gpu_id or gemm.device
            devices.append(gpu)
            dates.append(gemm.started[:10] or None)
        out = {"device": "+".join(dict.fromkeys(devices))}
        if backends:
            out["backend"] = "+".join(dict.fromkeys(backends))
        known = [d for d in dates if d]
        out["date"] = min(known) if known and len(known) == len(dates) else today
        return out

    def notes(self) -> list[str]:
        out = [n for r in self.collectives for n in r.notes]
        out += [w for r in self.nccl for w in r.warnings()]
        out += [n for r in self.gemm for n in r.notes]
        return out


def load(paths: Iterable[str | Path], op: str | None = None) -> Measurements:
    """Sort files by kind: gpuscale JSON by its ``kind``, anything else as nccl-tests output."""
    found = Measurements()
    for p in paths:
        path = Path(p)
        text = files.read_text(path, label="measurement file", errors="replace")
        kind = None
        if text.lstrip().startswith("{"):
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(
                    f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); accepted: the output of "
                    "gpuscale bench --json, or an nccl-tests log"
                ) from None
            kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind == COLLECTIVES_KIND:
            found.collectives.append(CollectiveRun.from_dict(doc, str(path)))
        elif kind == MATMUL_KIND:
            found.gemm.append(GemmRun.from_dict(doc, str(path)))
        else:
            found.nccl.extend(nccl_tests.parse(text, str(path), op))
    return found
