"""torchtitan: the ``torchrun -m torchtitan.train`` command line of a plan (0.3.x), or the TOML
job file it reads with ``--job.config_file`` (0.2.x).

torchtitan 0.3 builds its job from ``--module``/``--config`` (a function of the model's
``config_registry``) plus ``--section.key`` overrides parsed by tyro, with activation
checkpointing chosen as a sub-command (``activation-checkpoint:selective|full|none``); the tests
parse the command with torchtitan's own ``ConfigManager`` and check the degrees with its
``ParallelDims``. torchtitan 0.2.x read a TOML job file into its ``JobConfig`` dataclasses
(sections ``[model]`` name/flavor, ``[training]``, ``[parallelism]``, ``[activation_checkpoint]``,
float8 as the ``quantize.linear.float8`` model converter); 0.3's ``ConfigManager`` reads no TOML,
so the tests check that file's sections and keys against 0.2.x's ``JobConfig`` fields and map its
``[training]``/``[parallelism]`` (the same fields in 0.3) onto 0.3's dataclasses and ``ParallelDims``.
"""

from __future__ import annotations

import json
import shlex

from gpuscale.costmodel.pipeline import stage_layers
from gpuscale.errors import require
from gpuscale.export.files import Export, ExportedFile
from gpuscale.export.job import TrainingJob, megatron_only
from gpuscale.specs import PlanBatch

CONFIGS: dict[str, tuple[str, str, int]] = {
    # gpuscale catalog id -> (torchtitan module, config_registry function, the longest sequence
    # its RoPE table covers: the model config's max_seq_len, beyond which decoder.py refuses),
    # as torchtitan 0.3.0 ships them; each builds, on the meta device, the parameters gpuscale
    # counts (tests).
    "llama3.1-8b": ("llama3", "llama3_8b", 131072),
    "llama3.1-70b": ("llama3", "llama3_70b", 131072),
    "llama3.1-405b": ("llama3", "llama3_405b", 131072),
    "qwen3-32b": ("qwen3", "qwen3_32b", 40960),
    "qwen3-30b-a3b": ("qwen3", "qwen3_30b_a3b", 40960),
    "gpt-oss-20b": ("gpt_oss", "gpt_oss_20b", 131072),
    "gpt-oss-120b": ("gpt_oss", "gpt_oss_120b", 131072),
    # DeepSeek-R1 is DeepSeek-V3's architecture (its config.json keys are identical).
    "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b", 16384),
    "deepseek-r1": ("deepseek_v3", "deepseek_v3_671b", 16384),
}
FLAVORS: dict[str, tuple[str, str]] = {
    # gpuscale catalog id -> (torchtitan 0.2.x [model] name, flavor), as torchtitan 0.2 ships
    "llama3.1-8b": ("llama3", "8B"),
    "llama3.1-70b": ("llama3", "70B"),
    "llama3.1-405b": ("llama3", "405B"),
}
VERSIONS = ("0.3", "0.2")
"""torchtitan minor versions with an export (``0.2.x`` and ``0.2.2`` name ``0.2``)."""

_AC = {"none": "none", "selective": "selective", "full": "full"}


def _degrees(job: TrainingJob) -> tuple[int, int, str, int]:
    """(FSDP shard degree, replicate degree, reshard-after-forward, local batch size)."""
    plan = job.plan
    # FSDP2 shards over dp for ZeRO 1-3; ZeRO-0 is plain replication (DDP/HSDP replicate dim).
    shard, replicate = (plan.dp, 1) if plan.zero > 0 else (1, plan.dp)
    reshard = "default" if plan.zero == 3 else "never"
    # Without pipelining, gradient accumulation makes global = local x dp x steps (torchtitan
    # TrainingConfig); with it, the local batch is split into pipeline micro-batches.
    local = plan.micro_batch if plan.pp == 1 else plan.global_batch // plan.dp
    return shard, replicate, reshard, local


def _stage_weights(job: TrainingJob) -> tuple[int, int, int]:
    """(layers per virtual stage, first-stage and last-stage layers less) that make
    torchtitan's split (``_generate_llm_fqn_per_model_part``: every stage the same, the first
    and last ``pipeline_parallel_first/last_stage_less_layers`` fewer) the one the cost model
    priced (:func:`gpuscale.costmodel.pipeline.stage_layers`: per rank, the first and last
    taking the deficit or their explicit counts)."""
    plan = job.plan
    split = stage_layers(job.model, PlanBatch.from_plans([plan]))
    first, middle, last = int(split.first[0]), int(split.middle[0]), int(split.last[0])
    if plan.pp == 2:
        # No middle rank: the stage size that holds the larger end rank.
        middle = plan.vp * -(-max(first, last) // plan.vp)
    require(
        middle % plan.vp == 0,
        f"the middle pipeline ranks hold {middle} layers, which do not split into --vp "
        f"{plan.vp} equal torchtitan stages",
        field="vp",
    )
    per_stage = middle // plan.vp
    less_first, less_last = middle - first, middle - last
    require(
        0 <= less_first <= per_stage and 0 <= less_last <= per_stage,
        f"torchtitan takes at most the {per_stage} layers of one stage off the first and last "
        f"stages; this split (first {first}, middle {middle}, last {last}) needs more",
        field="pp",
    )
    return per_stage, less_first, less_last


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
    module, config, limit = CONFIGS[job.model_id]
    require(
        training.seq_len <= limit,
        f"torchtitan's {config} config covers sequences up to {limit:,} tokens (its RoPE table); "
        f"--seq {training.seq_len:,} needs a config of your own",
        field="seq",
    )
    kv_heads = job.model.num_kv_heads
    require(
        kv_heads % plan.tp == 0,
        f"torchtitan splits the {kv_heads} KV heads over the TP ranks: --tp {plan.tp} must "
        "divide them",
        field="tp",
    )
    require(
        not (job.model.attention_sinks and plan.cp > 1),
        f"torchtitan's {config} config runs varlen attention (its sinks), which has no context "
        "parallelism: use --cp 1",
        field="cp",
    )
    shard, replicate, reshard, local = _degrees(job)
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
        per_stage, less_first, less_last = _stage_weights(job)
        args += [
            "--parallelism.pipeline-parallel-schedule", schedule,
            "--parallelism.pipeline-parallel-microbatch-size", str(plan.micro_batch),
            "--parallelism.pipeline-parallel-first-stage-less-layers", str(less_first),
            "--parallelism.pipeline-parallel-last-stage-less-layers", str(less_last),
        ]  # fmt: skip
        if plan.vp > 1:
            args += ["--parallelism.pipeline-parallel-layers-per-stage", str(per_stage)]
    if plan.pp > 1 or (job.model.is_moe and plan.ep > 1):
        # torchtitan 0.3 refuses CUDA graphs with pipeline parallelism ("not supported yet")
        # and with the all-to-all expert dispatcher its shipped MoE configs use ("CUDA graphs
        # support only expert parallel token dispatcher configurations without CPU
        # synchronization", Trainer config validation).
        args.append("--training.disable-cuda-graphs")
    args.append(f"activation-checkpoint:{_AC[plan.recompute]}")
    return args


def _version(text: str) -> str:
    """``0.2``, ``0.2.x`` or ``0.2.2`` -> ``0.2``."""
    parts = text.strip().lower().split(".")
    minor = ".".join(parts[:2])
    require(
        minor in VERSIONS and all(p == "x" or p.isdigit() for p in parts[2:3]) and len(parts) <= 3,
        f"--torchtitan-version must be one of {', '.join(v + '.x' for v in VERSIONS)} "
        f"(0.3.x: the command line; 0.2.x: a TOML job file), got {text}",
        field="torchtitan_version",
    )
    return minor


def _toml_value(value: str | int | bool | list[str]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(
        value
    )  # a TOML basic string is a JSON string for this text (TOML 1.0 §String)


def torchtitan_toml_sections(
    job: TrainingJob,
) -> dict[str, dict[str, str | int | bool | list[str]]]:
    """The torchtitan 0.2.x ``JobConfig`` sections that set the plan (everything else keeps
    torchtitan's defaults or the user's own file)."""
    plan, training = job.plan, job.training
    require(
        job.model_id in FLAVORS,
        f"torchtitan 0.2 ships flavors for {', '.join(sorted(FLAVORS))}; for '{job.model_id}' "
        "register a model flavor and set [model] by hand",
        field="model",
    )
    name, flavor = FLAVORS[job.model_id]
    shard, replicate, reshard, local = _degrees(job)
    fp8 = training.precision == "fp8"
    model: dict[str, str | int | bool | list[str]] = {"name": name, "flavor": flavor}
    if fp8:
        # torchtitan 0.2 turns Float8 linears on as a model converter (torchao float8)
        model["converters"] = ["quantize.linear.float8"]
    parallelism: dict[str, str | int | bool | list[str]] = {
        "data_parallel_replicate_degree": replicate,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": reshard,
        "tensor_parallel_degree": plan.tp,
        "context_parallel_degree": plan.cp,
        "pipeline_parallel_degree": plan.pp,
    }
    if plan.ep > 1:
        parallelism["expert_parallel_degree"] = plan.ep
    if plan.pp > 1:
        # torchtitan 0.2 splits stages as 0.3 does (first/last stage less layers, default 1).
        per_stage, less_first, less_last = _stage_weights(job)
        parallelism["pipeline_parallel_schedule"] = "Interleaved1F1B" if plan.vp > 1 else "1F1B"
        parallelism["pipeline_parallel_microbatch_size"] = plan.micro_batch
        parallelism["pipeline_parallel_first_stage_less_layers"] = less_first
        parallelism["pipeline_parallel_last_stage_less_layers"] = less_last
        if plan.vp > 1:
            parallelism["pipeline_parallel_layers_per_stage"] = per_stage
    sections: dict[str, dict[str, str | int | bool | list[str]]] = {
        "job": {"description": f"{job.model_id} on {job.gpus}x {job.gpu} (gpuscale plan)"},
        "model": model,
        "training": {
            "local_batch_size": local,
            "global_batch_size": plan.global_batch,
            "seq_len": training.seq_len,
            "mixed_precision_param": "float32" if training.precision == "fp32" else "bfloat16",
        },
        "parallelism": parallelism,
        "activation_checkpoint": {"mode": _AC[plan.recompute]},
    }
    if fp8:
        # tensorwise scaling (the default recipe) can gather FSDP shards in float8
        sections["quantize.linear.float8"] = {"enable_fsdp_float8_all_gather": shard > 1}
    return sections


def _check_expert_layout(job: TrainingJob) -> None:
    """torchtitan's expert layout: without EP the experts split over the TP ranks like the
    dense MLP (``etp = tp``); with EP each expert is whole on its rank (``etp = 1``) and EP
    borrows the FSDP, CP and TP ranks, ``efsdp x ep = dp_shard x cp x tp`` (torchtitan 0.3
    ``moe_sharding``, ``ParallelDims.build_mesh``), so EP must divide those ranks (data-parallel
    replicas under ``--zero 0`` lend none). Another plan is refused, not rewritten."""
    plan = job.plan
    etp = 1 if plan.ep > 1 else plan.tp
    require(
        plan.etp == etp,
        f"torchtitan splits experts over the TP ranks without expert parallelism and keeps them "
        f"whole with it: with --ep {plan.ep} --tp {plan.tp} it runs --etp {etp}, this plan "
        f"--etp {plan.etp}; plan it with --etp {etp}, or export to --to megatron "
        "(--expert-tensor-parallel-size)",
        field="etp",
    )
    shard, _, _, _ = _degrees(job)
    ranks = shard * plan.cp * plan.tp
    require(
        ranks % plan.ep == 0,
        f"torchtitan takes --ep {plan.ep} from the FSDP x CP x TP ranks ({shard} x {plan.cp} x "
        f"{plan.tp} = {ranks}), which it does not divide; with --zero 0 the data-parallel "
        "ranks are replicas and lend none: use --zero 1-3 or an --ep that divides them",
        field="ep",
    )


def _launch(job: TrainingJob, version: str, train_args: str) -> str:
    return (
        "#!/usr/bin/env bash\n"
        f"# torchtitan {version}.x launch for {job.model_id} on {job.gpus}x {job.gpu} ({job.nodes} node(s)),\n"
        "# written by `gpuscale export --to torchtitan`. Run on every node with NODE_RANK and\n"
        "# MASTER_ADDR set (the Slurm export does), from a torchtitan checkout or install.\n"
        "set -euo pipefail\n"
        f"exec torchrun --nnodes {job.nodes} --nproc-per-node {job.procs_per_node} \\\n"
        '    --node-rank "${NODE_RANK:-0}" --master-addr "${MASTER_ADDR:-127.0.0.1}" '
        '--master-port "${MASTER_PORT:-29500}" \\\n'
        f'    -m torchtitan.train {train_args} "$@"\n'
    )


def export_torchtitan(job: TrainingJob, *, version: str = "0.3") -> Export:
    minor = _version(version)
    megatron_only(job, "torchtitan")
    if job.model.is_moe:
        _check_expert_layout(job)
    notes: tuple[str, ...] = ()
    if job.plan.zero in (1, 2):
        notes = (
            f"FSDP2 has no ZeRO-{job.plan.zero} mode: written as FSDP with reshard-after-forward "
            "never (parameters stay gathered between forward and backward)",
        )
    launch_purpose = "torchrun launch of torchtitan.train with the plan's overrides"
    if minor == "0.3":
        files: tuple[ExportedFile, ...] = ()
        train_args = shlex.join(torchtitan_args(job))
    else:
        sections = torchtitan_toml_sections(job)
        lines = [
            f"# torchtitan 0.2.x job file for {job.model_id} on {job.gpus}x {job.gpu}, written by",
            "# `gpuscale export --to torchtitan --torchtitan-version 0.2.x`: the plan's settings;",
            "# add your dataset, optimizer and checkpoint sections.",
        ]
        for section, values in sections.items():
            lines += ["", f"[{section}]", *(f"{k} = {_toml_value(v)}" for k, v in values.items())]
        files = (
            ExportedFile(
                name="torchtitan_job.toml",
                content="\n".join(lines) + "\n",
                purpose="torchtitan 0.2.x TOML job file with the plan's parallelism and batch",
            ),
        )
        train_args = '--job.config_file "$(dirname "$0")/torchtitan_job.toml"'
        launch_purpose = "torchrun launch of torchtitan.train with the job file"
    launch = ExportedFile(
        name="launch_torchtitan.sh",
        content=_launch(job, minor, train_args),
        purpose=launch_purpose,
        executable=True,
    )
    return Export(target="torchtitan", files=(launch, *files), notes=notes)
