"""Hand a plan off: files the trainers and schedulers people run accept.

Every exporter is a pure function of a :class:`TrainingJob` returning an :class:`Export` (named
text files); writing them is the caller's job. The tests feed each file to the real tool's own
parser (torchtitan, megatron-core, DeepSpeed, accelerate, the Kubernetes schema, bash).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuscale.errors import unknown
from gpuscale.export.accelerate import export_accelerate
from gpuscale.export.deepspeed import export_deepspeed
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob, job_from_document
from gpuscale.export.kueue import export_kueue
from gpuscale.export.megatron import export_megatron
from gpuscale.export.slurm import export_slurm
from gpuscale.export.torchtitan import export_torchtitan
from gpuscale.export.volcano import export_volcano

EXPORTERS: dict[str, Callable[..., Export]] = {
    "torchtitan": export_torchtitan,
    "megatron": export_megatron,
    "deepspeed": export_deepspeed,
    "accelerate": export_accelerate,
    "slurm": export_slurm,
    "kueue": export_kueue,
    "volcano": export_volcano,
}


def export(job: TrainingJob, target: str, **options: Any) -> Export:
    """``options``: the target's own keyword arguments (``version`` for torchtitan)."""
    if target not in EXPORTERS:
        raise unknown("export target", target, EXPORTERS)
    return EXPORTERS[target](job, **options)


__all__ = ["EXPORTERS", "Export", "ExportedFile", "TrainingJob", "export", "job_from_document"]
