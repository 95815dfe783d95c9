"""Hugging Face accelerate: the ``accelerate launch`` config YAML of a DDP or FSDP plan.

Keys follow accelerate's ``ClusterConfig`` (``accelerate config`` writes the same file);
accelerate's own loader and launch-argument validation check it in the tests.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob, megatron_only


def accelerate_config(job: TrainingJob) -> dict[str, Any]:
    megatron_only(job, "the accelerate config")
    plan, training = job.plan, job.training
    require(
        plan.tp == 1 and plan.pp == 1 and plan.cp == 1 and plan.ep == 1,
        "an accelerate config describes DDP or FSDP; a plan with --tp, --pp, --cp or --ep > 1 "
        "exports to --to megatron or torchtitan",
        field="tp",
    )
    precision = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "fp32": "no"}[training.precision]
    config: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "debug": False,
        "downcast_bf16": "no",
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": precision,
        "num_machines": job.nodes,
        "num_processes": job.gpus,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if plan.zero == 0 or plan.dp == 1:
        config["distributed_type"] = "MULTI_GPU" if job.gpus > 1 else "NO"
        return config
    config["distributed_type"] = "FSDP"
    # FSDP2: ZeRO-3 reshards parameters after forward; ZeRO-1/2 keep them (SHARD_GRAD_OP-like).
    config["fsdp_config"] = {
        "fsdp_version": 2,
        "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        "fsdp_reshard_after_forward": plan.zero == 3,
        "fsdp_activation_checkpointing": plan.recompute != "none",
        "fsdp_cpu_ram_efficient_loading": True,
        "fsdp_offload_params": training.offload_params,
        "fsdp_state_dict_type": "SHARDED_STATE_DICT",
    }
    return config


def export_accelerate(job: TrainingJob) -> Export:
    config = accelerate_config(job)
    notes: tuple[str, ...] = ()
    if job.plan.recompute == "selective":
        notes = (
            "accelerate checkpoints whole transformer blocks: selective recompute is written as "
            "fsdp_activation_checkpointing (full recompute of each block)",
        )
    if config["distributed_type"] == "FSDP" and job.plan.zero in (1, 2):
        notes += (
            f"FSDP2 has no ZeRO-{job.plan.zero} mode: written as FSDP with "
            "reshard_after_forward false (parameters stay gathered between forward and backward)",
        )
    launch = (
        "#!/usr/bin/env bash\n"
        f"# accelerate launch for {job.model_id} on {job.gpus}x {job.gpu}; run on every node with\n"
        "# MACHINE_RANK and MAIN_PROCESS_IP set. TRAIN_SCRIPT is your training script.\n"
        "set -euo pipefail\n"
        ': "${TRAIN_SCRIPT:?set TRAIN_SCRIPT to your training script}"\n'
        'exec accelerate launch --config_file "$(dirname "$0")/accelerate_config.yaml" \\\n'
        '    --machine_rank "${MACHINE_RANK:-0}" --main_process_ip "${MAIN_PROCESS_IP:-127.0.0.1}" \\\n'
        '    --main_process_port "${MAIN_PROCESS_PORT:-29500}" "$TRAIN_SCRIPT" "$@"\n'
    )
    return Export(
        target="accelerate",
        files=(
            ExportedFile(
                name="accelerate_config.yaml",
                content=yaml.safe_dump(config, sort_keys=False),
                purpose="accelerate config: DDP/FSDP2, sharding, checkpointing, precision",
            ),
            ExportedFile(
                name="launch_accelerate.sh",
                content=launch,
                purpose="accelerate launch with that config",
                executable=True,
            ),
        ),
        notes=notes,
    )
