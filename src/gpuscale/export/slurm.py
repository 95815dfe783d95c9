"""Slurm: an sbatch script that starts one launcher per node, node ranks from Slurm.

Ranks are laid out node by node (torchrun numbers a node's GPUs consecutively), and Megatron,
torchtitan and accelerate put tensor parallelism on consecutive ranks, so a TP group of at
most ``gpus_per_node`` stays inside one node's NVLink domain.
"""

from __future__ import annotations

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob

_SBATCH = """#!/usr/bin/env bash
#SBATCH --job-name={name}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node={per_node}
#SBATCH --exclusive
{switches}# Written by `gpuscale export --to slurm` for {model} on {gpus}x {gpu}:
# TP={tp} PP={pp} CP={cp} DP={dp}, micro-batch {mbs}, global batch {gbs}.
# LAUNCH is the per-node launcher from `gpuscale export --to megatron|accelerate|torchtitan`;
# it reads NODE_RANK, MASTER_ADDR and MASTER_PORT.
set -euo pipefail
: "${{LAUNCH:?set LAUNCH to the per-node launch script}}"
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR MASTER_PORT=${{MASTER_PORT:-29500}}
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1  # a failed collective ends the job instead of hanging
srun --ntasks-per-node=1 --kill-on-bad-exit=1 \\
    bash -c 'NODE_RANK=$SLURM_NODEID exec bash "$LAUNCH"'
"""


def export_slurm(job: TrainingJob, *, switches: int | None = None) -> Export:
    """``switches``: ask Slurm's topology plugin for at most that many leaf switches
    (``--switches``); ``None`` leaves placement to the scheduler."""
    plan = job.plan
    require(switches is None or switches >= 1, "--switches must be >= 1", field="switches")
    notes: tuple[str, ...] = ()
    if plan.tp > job.gpus_per_node:
        notes = (
            f"TP={plan.tp} is larger than a node ({job.gpus_per_node} GPUs): tensor-parallel "
            "traffic crosses the network",
        )
    name = f"{job.model_id.rsplit('/', 1)[-1][:40]}-{job.gpus}g".replace(" ", "_")
    script = _SBATCH.format(
        name=name,
        nodes=job.nodes,
        per_node=job.procs_per_node,
        switches=f"#SBATCH --switches={switches}\n" if switches else "",
        model=job.model_id,
        gpus=job.gpus,
        gpu=job.gpu,
        tp=plan.tp,
        pp=plan.pp,
        cp=plan.cp,
        dp=plan.dp,
        mbs=plan.micro_batch,
        gbs=plan.global_batch,
    )
    return Export(
        target="slurm",
        files=(
            ExportedFile(
                name="train.sbatch",
                content=script,
                purpose="sbatch script: one launcher per node, node rank and master from Slurm",
                executable=True,
            ),
        ),
        notes=notes,
    )
