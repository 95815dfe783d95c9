"""``gpuscale.api.export_plan``: a plan as the files a trainer or scheduler accepts."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import SCHEMA_VERSION, files
from gpuscale.errors import InputError, require
from gpuscale.export import EXPORTERS, Export, TrainingJob, export, job_from_document
from gpuscale.specs import ModelSpec

TARGETS: tuple[str, ...] = tuple(EXPORTERS)
"""What ``--to`` accepts."""


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


def export_plan(
    source: str | os.PathLike[str] | dict[str, Any] | TrainingJob,
    *,
    to: str,
    seq: int | None = None,
    precision: str | None = None,
    gpus_per_node: int | None = None,
    output: str | os.PathLike[str] | None = None,
    model: ModelSpec | None = None,
) -> ExportResult:
    """Export a plan to ``to`` (one of :data:`gpuscale.export.EXPORTERS`).

    ``source``: a :class:`TrainingJob`, or an ``estimate``/``plan`` ``--json`` document (a dict or
    the path of the file holding it; for ``plan`` the first ranked plan). ``output``: an existing
    folder, or a new one inside an existing folder, to write the files into. ``model``: the spec
    the document was computed for when its name is no catalog id (a config.json pasted into the
    web page, read in memory)."""
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
    result = export(job, to)
    if output is None:
        return ExportResult(result, job)
    folder = Path(output)
    if not folder.is_dir():
        # One new folder inside an existing one is what -o asks for; missing parents are a typo.
        files.output_path(folder, label="-o", field="output")
        folder.mkdir()
    written = []
    for item in result.files:
        path = files.write_text(folder / item.name, item.content, label="-o", field="output")
        if item.executable:
            path.chmod(0o755)
        written.append(str(path))
    return ExportResult(result, job, tuple(written))
