"""torchtitan 0.3.x: the ``torchrun -m torchtitan.train`` command line of a plan.

torchtitan 0.3 builds its job from ``--module``/``--config`` (a function of the model's
``config_registry``) plus ``--section.key`` overrides parsed by tyro, with activation
checkpointing chosen as a sub-command (``activation-checkpoint:selective|full|none``); the tests
parse the command with torchtitan's own ``ConfigManager`` and check the degrees with its
``ParallelDims``.
"""

from __future__ import annotations

import shlex

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob

CONFIGS: dict[str, tuple[str, str]] = {
    # gpuscale catalog id -> (torchtitan module, config_registry function), as torchtitan ships
    "llama3.1-8b": ("llama3", "llama3_8b"),
    "llama3.1-70b": ("llama3", "llama3_70b"),
    "llama3.1-405b": ("llama3", "llama3_405b"),
}
VERSIONS = ("0.3",)

_AC = {"none": "none", "selective": "selective", "full": "full"}


def torchtitan_args(job: TrainingJob) -> list[str]:
    """``--module``/``--config`` and the overrides that set the plan, sub-command last."""
    plan, training = job.plan, job.training
    require(
        job.model_id in CONFIGS,
        f"torchtitan ships configs for {', '.join(sorted(CONFIGS))}; for '{job.model_id}' "
        "write a config_registry function and pass its overrides by hand",
        field="model",
    )
    require(
        training.precision in ("bf16", "fp32"),
        "torchtitan 0.3 turns Float8 on through a model converter in a config_registry "
        f"function, not a flag; accepted here: bf16, fp32 (got {training.precision})",
        field="precision",
    )
    module, config = CONFIGS[job.model_id]
    # FSDP2 shards over dp for ZeRO 1-3; ZeRO-0 is plain replication (DDP/HSDP replicate dim).
    shard, replicate = (plan.dp, 1) if plan.zero > 0 else (1, plan.dp)
    reshard = "default" if plan.zero == 3 else "never"
    # Without pipelining, gradient accumulation makes global = local x dp x steps (torchtitan
    # TrainingConfig); with it, the local batch is split into pipeline micro-batches.
    local = plan.micro_batch if plan.pp == 1 else plan.global_batch // plan.dp
    args = [
        "--module", module,
        "--config", config,
        "--training.seq-len", str(training.seq_len),
        "--training.local-batch-size", str(local),
        "--training.global-batch-size", str(plan.global_batch),
        "--training.mixed-precision-param", "bfloat16" if training.precision == "bf16" else "float32",
        "--parallelism.data-parallel-shard-degree", str(shard),
        "--parallelism.data-parallel-replicate-degree", str(replicate),
        "--parallelism.fsdp-reshard-after-forward", reshard,
        "--parallelism.tensor-parallel-degree", str(plan.tp),
        "--parallelism.context-parallel-degree", str(plan.cp),
        "--parallelism.pipeline-parallel-degree", str(plan.pp),
    ]  # fmt: skip
    if plan.ep > 1:
        args += ["--parallelism.expert-parallel-degree", str(plan.ep)]
    if plan.pp > 1:
        schedule = "Interleaved1F1B" if plan.vp > 1 else "1F1B"
        args += [
            "--parallelism.pipeline-parallel-schedule", schedule,
            "--parallelism.pipeline-parallel-microbatch-size", str(plan.micro_batch),
            # torchtitan 0.3 refuses CUDA graphs with pipeline parallelism ("not supported yet").
            "--training.disable-cuda-graphs",
        ]  # fmt: skip
        if plan.vp > 1:
            require(
                job.model.num_layers % (plan.pp * plan.vp) == 0,
                f"{job.model.num_layers} layers do not split into --pp {plan.pp} x --vp {plan.vp} stages",
                field="vp",
            )
            per_stage = job.model.num_layers // (plan.pp * plan.vp)
            args += ["--parallelism.pipeline-parallel-layers-per-stage", str(per_stage)]
    args.append(f"activation-checkpoint:{_AC[plan.recompute]}")
    return args


def export_torchtitan(job: TrainingJob, *, version: str = "0.3") -> Export:
    require(
        version in VERSIONS,
        f"--torchtitan-version must be one of {', '.join(VERSIONS)} (0.3.x command line), got {version}",
        field="torchtitan_version",
    )
    args = torchtitan_args(job)
    script = (
        "#!/usr/bin/env bash\n"
        f"# torchtitan 0.3.x launch for {job.model_id} on {job.gpus}x {job.gpu} ({job.nodes} node(s)),\n"
        "# written by `gpuscale export --to torchtitan`. Run on every node with NODE_RANK and\n"
        "# MASTER_ADDR set (the Slurm export does), from a torchtitan checkout or install.\n"
        "set -euo pipefail\n"
        f"exec torchrun --nnodes {job.nodes} --nproc-per-node {job.procs_per_node} \\\n"
        '    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-127.0.0.1}" '
        '--master-port "${MASTER_PORT:-29500}" \\\n'
        f'    -m torchtitan.train {shlex.join(args)} "$@"\n'
    )
    notes: tuple[str, ...] = ()
    if job.plan.zero in (1, 2):
        notes = (
            f"FSDP2 has no ZeRO-{job.plan.zero} mode: written as FSDP with reshard-after-forward "
            "never (parameters stay gathered between forward and backward)",
        )
    return Export(
        target="torchtitan",
        files=(
            ExportedFile(
                name="launch_torchtitan.sh",
                content=script,
                purpose="torchrun launch of torchtitan.train with the plan's overrides",
                executable=True,
            ),
        ),
        notes=notes,
    )
