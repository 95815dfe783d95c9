"""``gpuscale.api.export_plan``: a plan as the files a trainer or scheduler accepts."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import SCHEMA_VERSION, files
from gpuscale.api._arguments import checks_arguments
from gpuscale.cluster.export import export as topology
from gpuscale.cluster.export import node_names
from gpuscale.cluster.spec import ClusterSpec, load_cluster
from gpuscale.errors import InputError, require
from gpuscale.export import EXPORTERS, Export, ExportedFile, TrainingJob, export, job_from_document
from gpuscale.export.torchtitan import VERSIONS
from gpuscale.specs import ModelSpec

TARGETS: tuple[str, ...] = tuple(EXPORTERS)
"""What ``--to`` accepts."""
TORCHTITAN_VERSIONS: tuple[str, ...] = tuple(f"{v}.x" for v in VERSIONS)
"""What ``--torchtitan-version`` accepts (``0.2``, ``0.2.2`` too)."""
CLUSTER_TARGETS = ("slurm", "volcano")
"""Targets that also write the cluster file's topology for their scheduler (``--cluster``)."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What was exported (and, once written, where)."""

    export: Export
    job: TrainingJob
    written: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        plan = self.job.plan
        return {
            "schema_version": SCHEMA_VERSION,
            "target": self.export.target,
            "model": self.job.model_id,
            "gpu": self.job.gpu,
            "gpus": self.job.gpus,
            "gpus_per_node": self.job.gpus_per_node,
            "plan": {
                "tp": plan.tp,
                "pp": plan.pp,
                "dp": plan.dp,
                "cp": plan.cp,
                "vp": plan.vp,
                "ep": plan.ep,
                "etp": plan.etp,
                "mbs": plan.micro_batch,
                "gbs": plan.global_batch,
                "recompute": plan.recompute,
                "zero": plan.zero,
            },
            "seq": self.job.training.seq_len,
            "precision": self.job.training.precision,
            "files": [
                {"name": f.name, "purpose": f.purpose, "bytes": len(f.content.encode())}
                for f in self.export.files
            ],
            "written": list(self.written),
            "notes": list(self.export.notes),
        }

    def figures(self) -> list[Any]:
        return []


def _read(source: str | os.PathLike[str]) -> str:
    """The document's text: a regular file of at most 1 MiB, or standard input for ``-`` (so
    ``gpuscale estimate ... --json | gpuscale export --to megatron --from -`` works)."""
    if str(source) != "-":
        return files.read_text(source, label="--from", field="source", max_bytes=files.MiB)
    data = sys.stdin.buffer.read(files.MiB + 1)
    require(len(data) <= files.MiB, "--from - : standard input is over 1 MiB", field="source")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("--from - : standard input is not UTF-8 text", field="source") from None


def _document(source: str | os.PathLike[str] | dict[str, Any]) -> dict[str, Any]:
    if isinstance(source, dict):
        return source
    text = _read(source)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"--from '{files.shown(source)}' is not JSON ({exc.msg} at line {exc.lineno}); "
            "expected the --json output of `gpuscale estimate` or `gpuscale plan`",
            field="source",
        ) from None
    require(
        isinstance(doc, dict),
        "--from must hold one JSON object: the --json output of `gpuscale estimate` or `gpuscale plan`",
        field="source",
    )
    return doc


def _nodes_for(job: TrainingJob, spec: ClusterSpec) -> list[int]:
    """Indices of the cluster's nodes that can host one of the job's nodes (same GPU, enough of
    them), after checking there are enough of them."""
    nodes = [
        i
        for i in range(spec.num_nodes)
        if (kind := spec.node_types[int(spec.node_type[i])]).gpu.id == job.gpu
        and kind.gpus_per_node >= job.procs_per_node
    ]
    require(
        len(nodes) >= job.nodes,
        f"--cluster {spec.name} has {len(nodes)} node(s) with {job.procs_per_node}+ {job.gpu} "
        f"GPUs; the plan needs {job.nodes}",
        field="cluster",
    )
    return nodes


def _tier(job: TrainingJob, spec: ClusterSpec, nodes: list[int]) -> int:
    """The lowest HyperNode tier (1 leaf, 2 pod, 3 core, as ``cluster export --format volcano``
    numbers them) with one domain holding all of the job's nodes."""
    for tier, domain in ((1, spec.node_leaf), (2, spec.node_pod)):
        sizes: dict[int, int] = {}
        for i in nodes:
            sizes[int(domain[i])] = sizes.get(int(domain[i]), 0) + 1
        if max(sizes.values()) >= job.nodes:
            return tier
    return 3


def _exported(
    job: TrainingJob,
    to: str,
    torchtitan_version: str | None,
    cluster: str | os.PathLike[str] | ClusterSpec | None,
) -> Export:
    """The target's files, plus the cluster's topology for its scheduler when one is given."""
    if to == "torchtitan" and torchtitan_version is not None:
        return export(job, to, version=torchtitan_version)
    require(
        torchtitan_version is None,
        "--torchtitan-version applies to --to torchtitan only",
        field="torchtitan_version",
    )
    if cluster is None:
        return export(job, to)
    require(
        to in CLUSTER_TARGETS,
        f"--cluster applies to --to {' or '.join(CLUSTER_TARGETS)} (their schedulers read the "
        "topology); other targets run wherever those place them",
        field="cluster",
    )
    spec = cluster if isinstance(cluster, ClusterSpec) else load_cluster(Path(cluster))
    nodes = _nodes_for(job, spec)
    extra: tuple[ExportedFile, ...]
    tier = _tier(job, spec, nodes)
    if to == "slurm":
        # one leaf switch holds the job: ask Slurm's topology/tree plugin for exactly that
        result = export(job, to, switches=1 if tier == 1 else None)
        extra = (
            ExportedFile(
                name="topology.conf",
                content=topology(spec, "slurm-conf"),
                purpose=f"Slurm topology/tree plugin file of cluster {spec.name}",
            ),
            ExportedFile(
                name="topology.yaml",
                content=topology(spec, "slurm-yaml"),
                purpose=f"Slurm 24.05+ topology.yaml of cluster {spec.name}",
            ),
        )
    else:
        result = export(job, to, highest_tier=tier, required=True)
        extra = (
            ExportedFile(
                name="hypernodes.yaml",
                content=topology(spec, "volcano"),
                purpose=f"Volcano HyperNodes of cluster {spec.name} (tier 1 leaf, 2 pod, 3 core)",
            ),
        )
    names = node_names(spec)
    note = (
        f"the topology names the nodes of {spec.name} {names[0]} ... {names[-1]} in cluster-file "
        "order; rename them to the real host names"
    )
    return Export(target=result.target, files=(*result.files, *extra), notes=(*result.notes, note))


@checks_arguments
def export_plan(
    source: str | os.PathLike[str] | dict[str, Any] | TrainingJob,
    *,
    to: str,
    seq: int | None = None,
    precision: str | None = None,
    gpus_per_node: int | None = None,
    output: str | os.PathLike[str] | None = None,
    model: ModelSpec | None = None,
    torchtitan_version: str | None = None,
    cluster: str | os.PathLike[str] | ClusterSpec | None = None,
) -> ExportResult:
    """Export a plan to ``to`` (one of :data:`gpuscale.export.EXPORTERS`).

    ``source``: a :class:`TrainingJob`, or an ``estimate``/``plan`` ``--json`` document (a dict or
    the path of the file holding it; for ``plan`` the first ranked plan). ``output``: an existing
    folder, or a new one inside an existing folder, to write the files into. ``model``: the spec
    the document was computed for when its name is no catalog id (a config.json pasted into the
    web page, read in memory). ``torchtitan_version``: one of
    :data:`~gpuscale.export.torchtitan.VERSIONS` (default: the newest). ``cluster``: a cluster
    file (or spec) whose topology goes with a ``slurm`` or ``volcano`` export: ``topology.conf``
    and ``topology.yaml``, or the HyperNodes and the lowest tier that holds the job."""
    require(to in EXPORTERS, f"--to must be one of {', '.join(EXPORTERS)}, got '{to}'", field="to")
    if isinstance(source, TrainingJob):
        job = source
    else:
        job = job_from_document(
            _document(source),
            seq=seq,
            precision=precision,
            gpus_per_node=gpus_per_node,
            model=model,
        )
    result = _exported(job, to, torchtitan_version, cluster)
    if output is None:
        return ExportResult(result, job)
    folder = Path(output)
    if not folder.is_dir():
        # One new folder inside an existing one is what -o asks for; missing parents are a typo.
        require(
            not files.exists(folder),
            f"-o '{files.shown(folder)}' is not a folder; accepted: a folder, existing or new "
            "inside an existing one, to write the files into",
            field="output",
        )
        files.output_path(folder, label="-o", field="output")
        try:
            folder.mkdir()
        except OSError as exc:
            raise InputError(
                f"cannot create -o folder '{files.shown(folder)}': {exc.strerror or exc}",
                field="output",
            ) from None
    written = []
    for item in result.files:
        path = files.write_text(folder / item.name, item.content, label="-o", field="output")
        if item.executable:
            path.chmod(0o755)
        written.append(str(path))
    return ExportResult(result, job, tuple(written))
