"""Kubernetes + Kueue: an Indexed Job (one pod per node) and its headless Service, with Kueue's
topology-aware scheduling annotations (kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling).

Built-in kinds only (batch/v1 Job, v1 Service), so the Kubernetes schema checks all of it;
the Kueue part is labels and annotations on those kinds.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
HOSTNAME = "kubernetes.io/hostname"
BLOCK_LABEL = "cloud.provider.com/topology-block"
"""The block level of the example ``Topology`` in Kueue's topology-aware scheduling docs."""


def _name(job: TrainingJob) -> str:
    base = job.model_id.rsplit("/", 1)[-1].lower()
    clean = "".join(c if c.isalnum() else "-" for c in base).strip("-")[:40] or "train"
    return f"{clean}-{job.gpus}g"


def trainer_container(job: TrainingJob, image: str, torchrun: str) -> dict[str, Any]:
    """The one container of every pod: torchrun over the node's GPUs, the training script and
    its arguments from the environment (edit them in the manifest), NCCL errors surfaced."""
    return {
        "name": "trainer",
        "image": image,
        "command": ["bash", "-c", torchrun],
        "env": [
            {"name": "TRAIN_SCRIPT", "value": "train.py"},
            {"name": "TRAIN_ARGS", "value": ""},
            {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
        ],
        "resources": {
            "limits": {"nvidia.com/gpu": job.procs_per_node},
            "requests": {"nvidia.com/gpu": job.procs_per_node},
        },
    }


def kueue_manifests(
    job: TrainingJob,
    *,
    queue: str = "default",
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
    topology_level: str | None = None,
    required: bool = False,
) -> list[dict[str, Any]]:
    """``topology_level``: the node label of the cluster's Kueue ``Topology`` level the job's pods
    should share (a block or rack); default: the hostname for a one-node job (required), else
    Kueue's documented block label (preferred). ``required`` makes it a hard constraint."""
    require(bool(queue), "--queue must not be empty", field="queue")
    name = _name(job)
    nodes = job.nodes
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": {"job-name": name}},
    }
    torchrun = (
        f"torchrun --nnodes {nodes} --nproc-per-node {job.procs_per_node} "
        "--node-rank ${JOB_COMPLETION_INDEX} "
        f"--master-addr {name}-0.{name} --master-port 29500 "
        '"$TRAIN_SCRIPT" $TRAIN_ARGS'
    )
    if topology_level is None:
        topology_level = HOSTNAME if nodes == 1 else BLOCK_LABEL
        required = required or nodes == 1
    pod_annotations = {(REQUIRED_TOPOLOGY if required else PREFERRED_TOPOLOGY): topology_level}
    manifest = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "completionMode": "Indexed",
            "completions": nodes,
            "parallelism": nodes,
            "backoffLimit": 0,
            "suspend": True,  # Kueue admits (un-suspends) the job when its quota and topology fit
            "template": {
                "metadata": {"annotations": pod_annotations},
                "spec": {
                    "subdomain": name,
                    "restartPolicy": "Never",
                    "containers": [trainer_container(job, image, torchrun)],
                },
            },
        },
    }
    return [service, manifest]


def export_kueue(job: TrainingJob, **options: Any) -> Export:
    documents = kueue_manifests(job, **options)
    return Export(
        target="kueue",
        files=(
            ExportedFile(
                name="job.yaml",
                content=yaml.safe_dump_all(documents, sort_keys=False),
                purpose="Indexed Job + headless Service with Kueue queue and topology annotations",
            ),
        ),
        notes=(
            "one pod per node holds all of its GPUs, so every tensor-parallel group of at most "
            f"{job.gpus_per_node} GPUs stays inside one node",
        ),
    )
