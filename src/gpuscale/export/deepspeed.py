"""DeepSpeed: the JSON config of a data-parallel/ZeRO plan.

Keys follow DeepSpeed's config reference (deepspeed.ai/docs/config-json); DeepSpeed's own
``DeepSpeedConfig`` checks the batch arithmetic (train_batch_size = micro x accumulation x dp).
"""

from __future__ import annotations

import json
from typing import Any

from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob, megatron_only


def deepspeed_config(job: TrainingJob) -> dict[str, Any]:
    plan, training = job.plan, job.training
    megatron_only(job, "the DeepSpeed JSON")
    require(
        plan.pp == 1 and plan.cp == 1,
        "the DeepSpeed JSON holds data parallelism and ZeRO; a plan with --pp or --cp > 1 "
        "exports to --to megatron or torchtitan",
        field="pp",
    )
    require(
        plan.etp == plan.tp,
        "the DeepSpeed JSON has no expert tensor-parallel setting: a plan with --etp other than "
        "--tp exports to --to megatron",
        field="etp",
    )
    require(
        training.precision != "fp8",
        "DeepSpeed's JSON has no FP8 training mode (FP8 comes from Transformer Engine in the "
        "model); accepted: bf16, fp16, fp32",
        field="precision",
    )
    zero: dict[str, Any] = {"stage": plan.zero}
    if plan.zero >= 2:
        zero.update(overlap_comm=True, contiguous_gradients=True, reduce_scatter=True)
    if plan.zero == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    if training.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if training.offload_params and plan.zero == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, Any] = {
        "train_batch_size": plan.global_batch,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.num_microbatches,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        "bf16": {"enabled": training.precision == "bf16"},
        "fp16": {"enabled": training.precision == "fp16"},
        "wall_clock_breakdown": False,
    }
    if plan.recompute != "none":
        # DeepSpeed checkpoints whole layers (deepspeed.checkpointing): full recompute.
        config["activation_checkpointing"] = {
            "partition_activations": plan.tp > 1,
            "contiguous_memory_optimization": False,
        }
    return config


def export_deepspeed(job: TrainingJob) -> Export:
    config = deepspeed_config(job)
    notes: tuple[str, ...] = ()
    if job.plan.recompute == "selective":
        notes = (
            "DeepSpeed checkpoints whole layers: selective recompute is written as activation "
            "checkpointing of every layer (call deepspeed.checkpointing.checkpoint in the model)",
        )
    if job.plan.tp > 1:
        notes += (
            f"tensor parallelism (--tp {job.plan.tp}) comes from the model code (Megatron-DeepSpeed "
            "or DeepSpeed AutoTP), not from this JSON; its data-parallel size here is "
            f"{job.plan.dp}",
        )
    return Export(
        target="deepspeed",
        files=(
            ExportedFile(
                name="ds_config.json",
                content=json.dumps(config, indent=2) + "\n",
                purpose="DeepSpeed config: ZeRO stage, micro-batch, accumulation, precision",
            ),
        ),
        notes=notes,
    )
