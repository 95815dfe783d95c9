"""Volcano: a ``batch.volcano.sh/v1alpha1`` Job with ``networkTopology``, one pod per node.

Volcano's network-topology-aware scheduling (volcano.sh docs, "Network Topology Aware
Scheduling"; the Job CRD's ``spec.networkTopology``) places the job's pods under one HyperNode of
at most ``highestTierAllowed``: tier 1 is a leaf switch in the HyperNodes ``gpuscale cluster
export --format volcano`` writes, tier 2 a pod of leaves, tier 3 the core. Volcano's ``pytorch``
plugin sets ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` (pods) and ``RANK`` (pod index,
the master first) in every pod, and ``svc`` gives the pods stable host names; torchrun reads them.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob
from gpuscale.export.kueue import _name, trainer_container

MASTER_PORT = 23456
"""The ``pytorch`` plugin's default port (Volcano's pytorch plugin docs)."""


def _pod(job: TrainingJob, image: str) -> dict[str, Any]:
    torchrun = (
        f"torchrun --nnodes $WORLD_SIZE --nproc-per-node {job.procs_per_node} "
        "--node-rank $RANK --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
        '"$TRAIN_SCRIPT" $TRAIN_ARGS'
    )
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [trainer_container(job, image, torchrun)],
        }
    }


def volcano_manifest(
    job: TrainingJob,
    *,
    queue: str = "default",
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3",
    highest_tier: int | None = None,
    required: bool | None = None,
) -> dict[str, Any]:
    """``highest_tier``: the highest HyperNode tier the pods may span (default 1, one leaf
    switch); ``required``: ``mode: hard`` (wait for such a placement) rather than ``soft`` (prefer
    it). Default: hard for a one-node job, soft otherwise, as the Kueue export does."""
    require(bool(queue), "--queue must not be empty", field="queue")
    tier = 1 if highest_tier is None else highest_tier
    require(tier >= 1, f"the highest HyperNode tier must be >= 1, got {tier}", field="highest_tier")
    hard = job.nodes == 1 if required is None else required
    name = _name(job)
    workers = job.nodes - 1
    tasks = [{"name": "master", "replicas": 1, "template": _pod(job, image)}]
    if workers:
        tasks.append({"name": "worker", "replicas": workers, "template": _pod(job, image)})
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": job.nodes,  # gang: all nodes start together or none does
            "networkTopology": {
                "mode": "hard" if hard else "soft",
                "highestTierAllowed": tier,
            },
            "plugins": {
                "pytorch": ["--master=master", "--worker=worker", f"--port={MASTER_PORT}"],
                "svc": [],
            },
            "policies": [{"event": "PodEvicted", "action": "RestartJob"}],
            "maxRetry": 3,
            "tasks": tasks,
        },
    }


def export_volcano(job: TrainingJob, **options: Any) -> Export:
    manifest = volcano_manifest(job, **options)
    topology = manifest["spec"]["networkTopology"]
    return Export(
        target="volcano",
        files=(
            ExportedFile(
                name="volcano-job.yaml",
                content=yaml.safe_dump(manifest, sort_keys=False),
                purpose="Volcano Job (gang of one pod per node) with networkTopology "
                f"{topology['mode']} up to HyperNode tier {topology['highestTierAllowed']}",
            ),
        ),
        notes=(
            "one pod per node holds all of its GPUs, so every tensor-parallel group of at most "
            f"{job.gpus_per_node} GPUs stays inside one node; HyperNodes for the cluster: "
            "`gpuscale cluster export --format volcano`",
        ),
    )
