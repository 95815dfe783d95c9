"""Every export is read back by the real tool's own parser, and a wrong plan is refused by it.

The parsers are test-only dependencies (the ``test`` extra): megatron-core, DeepSpeed,
accelerate, kubernetes-validate, and bash itself.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuscale import catalog
from gpuscale.errors import InputError
from gpuscale.export import TrainingJob, export, job_from_document
from gpuscale.specs import Plan, Training
from tests.launch_args import script_args


def _job(
    model: str = "llama3.1-70b", *, gpus_per_node: int = 8, precision: str = "bf16", **plan: Any
) -> TrainingJob:
    p = Plan(**plan)
    return TrainingJob(
        model_id=model,
        model=catalog.model(model),
        gpu="h100-sxm",
        gpus=p.num_gpus,
        gpus_per_node=gpus_per_node,
        plan=p,
        training=Training(seq_len=4096, precision=precision),
    )


MEGATRON_PLAN = {"tp": 8, "pp": 2, "dp": 4, "vp": 5, "micro_batch": 1, "global_batch": 256}


# --- Megatron: megatron-core's TransformerConfig and its rank generator ----------------------


def _transformer_config(args: dict[str, str | bool]) -> Any:
    import torch
    from megatron.core.transformer import TransformerConfig

    vp_layers = args.get("num_layers_per_virtual_pipeline_stage")
    pp = int(args["pipeline_model_parallel_size"])
    vp = int(args["num_layers"]) // (pp * int(vp_layers)) if vp_layers else None
    return TransformerConfig(
        num_layers=int(args["num_layers"]),
        hidden_size=int(args["hidden_size"]),
        num_attention_heads=int(args["num_attention_heads"]),
        num_query_groups=int(args.get("num_query_groups", args["num_attention_heads"])),
        ffn_hidden_size=int(args["ffn_hidden_size"]),
        tensor_model_parallel_size=int(args["tensor_model_parallel_size"]),
        pipeline_model_parallel_size=pp,
        virtual_pipeline_model_parallel_size=vp,
        context_parallel_size=int(args["context_parallel_size"]),
        sequence_parallel=bool(args.get("sequence_parallel", False)),
        recompute_granularity=args.get("recompute_granularity"),  # type: ignore[arg-type]
        recompute_method=args.get("recompute_method"),  # type: ignore[arg-type]
        recompute_num_layers=int(args["recompute_num_layers"])
        if "recompute_num_layers" in args
        else None,
        bf16="bf16" in args,
        pipeline_dtype=torch.bfloat16 if pp > 1 else None,
        gated_linear_unit="swiglu" in args,
        normalization=str(args["normalization"]),
    )


def test_megatron_launch_is_accepted_by_megatron_core_and_round_trips() -> None:
    from megatron.core.parallel_state import RankGenerator

    job = _job(**MEGATRON_PLAN, recompute="full", zero=1)
    script = export(job, "megatron").files[0].content
    args = script_args(script)
    config = _transformer_config(args)
    assert config.tensor_model_parallel_size == 8
    assert config.pipeline_model_parallel_size == 2
    assert config.virtual_pipeline_model_parallel_size == 5
    assert config.num_query_groups == 8
    assert config.recompute_granularity == "full"
    assert int(args["micro_batch_size"]) == 1 and int(args["global_batch_size"]) == 256
    assert "use_distributed_optimizer" in args
    ranks = RankGenerator(tp=8, ep=1, dp=4, pp=2, cp=1, order="tp-cp-ep-dp-pp")
    assert ranks.world_size == job.gpus
    # Tensor-parallel groups are consecutive ranks: one node of 8 each.
    assert all(g == list(range(g[0], g[0] + 8)) for g in ranks.get_ranks("tp"))


def test_megatron_launch_states_the_recompute_modules_loss_and_gradient_word() -> None:
    """What the plan was priced with reaches Megatron: megatron-core's TransformerConfig takes
    the module list and the TE cross-entropy (it refuses an unknown module or a TE loss it
    cannot build); --grad-reduce-in-bf16 is Megatron-LM's own flag."""
    import torch
    from megatron.core.transformer import TransformerConfig

    p = Plan(**MEGATRON_PLAN, recompute="selective")
    job = dataclasses.replace(
        _job(**MEGATRON_PLAN, recompute="selective"),
        plan=p,
        training=Training(
            seq_len=4096,
            recompute_modules=("core_attn", "mlp"),
            loss="te",
            grad_reduce_in_bf16=True,
        ),
    )
    script = export(job, "megatron").files[0].content
    tokens = shlex.split(script.split("PLAN_ARGS=(", 1)[1].split(")", 1)[0])
    modules = tokens[
        tokens.index("--recompute-modules") + 1 : tokens.index("--recompute-modules") + 3
    ]
    assert modules == ["core_attn", "mlp"] and "--grad-reduce-in-bf16" in tokens
    impl = tokens[tokens.index("--cross-entropy-fusion-impl") + 1]
    args = script_args(script)
    config = TransformerConfig(
        num_layers=int(args["num_layers"]),
        hidden_size=int(args["hidden_size"]),
        num_attention_heads=int(args["num_attention_heads"]),
        tensor_model_parallel_size=8,
        pipeline_model_parallel_size=2,
        pipeline_dtype=torch.bfloat16,
        recompute_granularity="selective",
        recompute_modules=modules,
        cross_entropy_loss_fusion="cross_entropy_loss_fusion" in args,
        cross_entropy_fusion_impl=impl,  # type: ignore[arg-type]
    )
    assert config.recompute_modules == ["core_attn", "mlp"]
    assert config.cross_entropy_fusion_impl == "te"


def test_megatron_launch_offloads_the_priced_layers() -> None:
    """--cpu-offloading-num-layers is what Megatron-LM reads (a positive count turns
    --cpu-offloading on, arguments.py); megatron-core's TransformerConfig takes it without
    pipeline parallelism or recompute and refuses as many layers as the model has."""
    from megatron.core.transformer import TransformerConfig

    plan = {"tp": 8, "dp": 8, "micro_batch": 1, "global_batch": 64}
    job = dataclasses.replace(
        _job(**plan), training=Training(seq_len=4096, activation_offload_layers=40)
    )
    args = script_args(export(job, "megatron").files[0].content)
    layers = int(args["cpu_offloading_num_layers"])
    kw = dict(
        num_layers=int(args["num_layers"]),
        hidden_size=int(args["hidden_size"]),
        num_attention_heads=int(args["num_attention_heads"]),
        tensor_model_parallel_size=8,
        cpu_offloading=layers > 0,
    )
    config = TransformerConfig(cpu_offloading_num_layers=layers, **kw)  # type: ignore[arg-type]
    assert config.cpu_offloading and config.cpu_offloading_num_layers == 40
    with pytest.raises(ValueError, match="CPU offloading can be done only for layers less than"):
        TransformerConfig(cpu_offloading_num_layers=80, **kw)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="has no setting for --activation-offload-layers 40"):
        export(job, "torchtitan")


@pytest.mark.parametrize("target", ["torchtitan", "deepspeed", "accelerate"])
def test_other_trainers_refuse_what_only_megatron_can_state(target: str) -> None:
    job = dataclasses.replace(
        _job(dp=8, micro_batch=1, global_batch=64), training=Training(seq_len=4096, loss="te")
    )
    with pytest.raises(InputError, match="has no setting for --loss te"):
        export(job, target)


def test_megatron_core_refuses_a_wrong_plan_too() -> None:
    job = _job(**MEGATRON_PLAN)
    args = script_args(export(job, "megatron").files[0].content)
    args["tensor_model_parallel_size"] = "3"  # 64 heads do not split 3 ways
    with pytest.raises(ValueError, match="tensor_model_parallel_size"):
        _transformer_config(args)


def test_megatron_script_is_valid_bash(tmp_path: Path) -> None:
    path = tmp_path / "launch.sh"
    path.write_text(export(_job(**MEGATRON_PLAN), "megatron").files[0].content)
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)


def test_megatron_refuses_what_it_cannot_run() -> None:
    with pytest.raises(InputError, match="ZeRO-3"):
        export(_job(dp=8, micro_batch=1, global_batch=64, zero=3), "megatron")


# --- DeepSpeed: DeepSpeedConfig checks the batch arithmetic -----------------------------------


class _DataParallel:
    """The one question DeepSpeedConfig asks its model-parallel unit."""

    def __init__(self, dp: int) -> None:
        self.dp = dp

    def get_data_parallel_world_size(self) -> int:
        return self.dp


def _deepspeed_config(config: dict[str, Any], dp: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    # DeepSpeedConfig asks for the rank first; one process stands for the whole job.
    monkeypatch.setattr(deepspeed.comm, "get_rank", lambda *a, **k: 0)
    return DeepSpeedConfig(config, mpu=_DataParallel(dp))


def test_deepspeed_config_is_accepted_and_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job("llama3.1-8b", dp=16, micro_batch=2, global_batch=512, zero=3, recompute="full")
    config = json.loads(export(job, "deepspeed").files[0].content)
    parsed = _deepspeed_config(config, 16, monkeypatch)
    assert parsed.train_batch_size == 512
    assert parsed.train_micro_batch_size_per_gpu == 2
    assert parsed.gradient_accumulation_steps == 16
    assert parsed.zero_optimization_stage == 3
    assert parsed.bfloat16_config.enabled


def test_deepspeed_refuses_a_wrong_plan_too(monkeypatch: pytest.MonkeyPatch) -> None:
    job = _job("llama3.1-8b", dp=16, micro_batch=2, global_batch=512, zero=3)
    config = json.loads(export(job, "deepspeed").files[0].content)
    with pytest.raises(AssertionError, match="train_batch_size"):
        _deepspeed_config(config, 12, monkeypatch)  # run on 12 GPUs instead of 16


# --- accelerate: its config loader and launch-argument validation -----------------------------


def _accelerate(tmp_path: Path, content: str) -> Any:
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    path = tmp_path / "accelerate_config.yaml"
    path.write_text(content)
    load_config_from_file(str(path))
    args = launch_command_parser().parse_args(["--config_file", str(path), "train.py"])
    return _validate_launch_command(args)[0]


def test_accelerate_config_is_accepted_and_round_trips(tmp_path: Path) -> None:
    job = _job("llama3.1-8b", dp=16, micro_batch=2, global_batch=512, zero=3, recompute="full")
    files = {f.name: f.content for f in export(job, "accelerate").files}
    args = _accelerate(tmp_path, files["accelerate_config.yaml"])
    assert args.num_processes == 16 and args.num_machines == 2
    assert args.use_fsdp
    assert str(args.fsdp_version) == "2"
    assert args.mixed_precision == "bf16"
    launch = tmp_path / "launch.sh"
    launch.write_text(files["launch_accelerate.sh"])
    subprocess.run(["bash", "-n", str(launch)], check=True, timeout=30)


def test_accelerate_refuses_a_wrong_config_too(tmp_path: Path) -> None:
    job = _job("llama3.1-8b", dp=16, micro_batch=2, global_batch=512, zero=3)
    config = yaml.safe_load(export(job, "accelerate").files[0].content)
    config["distributed_type"] = "TENSOR_PARALLEL_PIPELINE"  # no such accelerate mode
    with pytest.raises(ValueError):
        _accelerate(tmp_path, yaml.safe_dump(config))


def test_accelerate_refuses_model_parallel_plans() -> None:
    with pytest.raises(InputError, match="megatron or torchtitan"):
        export(_job(**MEGATRON_PLAN), "accelerate")


# --- Slurm: bash syntax and the #SBATCH header -----------------------------------------------


def test_sbatch_is_valid_bash_with_one_launcher_per_node(tmp_path: Path) -> None:
    job = _job(**MEGATRON_PLAN)
    script = export(job, "slurm").files[0].content
    path = tmp_path / "train.sbatch"
    path.write_text(script)
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)
    header = dict(
        line.removeprefix("#SBATCH --").split("=", 1)
        for line in script.splitlines()
        if line.startswith("#SBATCH --") and "=" in line
    )
    assert int(header["nodes"]) * int(header["gpus-per-node"]) == job.gpus
    assert header["ntasks-per-node"] == "1"


# --- Kubernetes + Kueue: the Kubernetes schema of the built-in kinds --------------------------


def test_kueue_manifests_pass_the_kubernetes_schema() -> None:
    import kubernetes_validate

    job = _job(**MEGATRON_PLAN)
    documents = list(yaml.safe_load_all(export(job, "kueue").files[0].content))
    for document in documents:
        kubernetes_validate.validate(document, "1.32", strict=True)
    batch = next(d for d in documents if d["kind"] == "Job")
    assert batch["spec"]["completions"] * 8 == job.gpus
    assert batch["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    annotations = batch["spec"]["template"]["metadata"]["annotations"]
    assert any(key.startswith("kueue.x-k8s.io/podset-") for key in annotations)


def test_kubernetes_schema_refuses_a_wrong_manifest_too() -> None:
    import kubernetes_validate

    job = _job(**MEGATRON_PLAN)
    documents = list(yaml.safe_load_all(export(job, "kueue").files[0].content))
    batch = next(d for d in documents if d["kind"] == "Job")
    batch["spec"]["completions"] = "eight"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(batch, "1.32", strict=True)


# --- From a plan or estimate document ---------------------------------------------------------


def test_job_from_an_estimate_document_round_trips() -> None:
    doc = {
        "model": "llama3.1-70b",
        "gpu": "h100-sxm",
        "gpus": 64,
        "plan": {"tp": 8, "pp": 2, "dp": 4, "cp": 1, "vp": 1, "mbs": 1, "gbs": 256, "zero": 1},
        "seq": 4096,
    }
    job = job_from_document(doc)
    assert (job.plan.tp, job.plan.pp, job.plan.dp) == (8, 2, 4)
    assert job.plan.global_batch == 256 and job.training.seq_len == 4096
    with pytest.raises(InputError, match="--seq"):
        job_from_document({k: v for k, v in doc.items() if k != "seq"})


# --- torchtitan 0.3: its ConfigManager and ParallelDims -----------------------------------------


def _torchtitan(args: list[str]) -> Any:
    from torchtitan.config.manager import ConfigManager

    return ConfigManager().parse_args(args)


def _launch_args(script: str) -> list[str]:
    line = next(ln for ln in script.splitlines() if "-m torchtitan.train" in ln)
    tokens = shlex.split(line.split("-m torchtitan.train", 1)[1])
    return [t for t in tokens if t != "$@"]


def test_torchtitan_command_is_accepted_and_round_trips() -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims

    job = _job(tp=8, pp=2, dp=4, vp=5, micro_batch=1, global_batch=256, zero=3, recompute="full")
    script = export(job, "torchtitan").files[0].content
    config = _torchtitan(_launch_args(script))
    par = config.parallelism
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (8, 2)
    assert (
        par.data_parallel_shard_degree == 4 and par.pipeline_parallel_schedule == "Interleaved1F1B"
    )
    assert par.pipeline_parallel_layers_per_stage == 8
    assert config.training.global_batch_size == 256 and config.training.seq_len == 4096
    assert type(config.activation_checkpoint).__qualname__ == "FullAC.Config"
    ParallelDims.from_config(par, world_size=job.gpus)  # torchtitan's own degree check


@pytest.mark.parametrize(
    "model", ["qwen3-32b", "qwen3-30b-a3b", "gpt-oss-20b", "gpt-oss-120b", "deepseek-v3"]
)
def test_torchtitan_builds_the_model_gpuscale_priced(model: str) -> None:
    """The shipped torchtitan config a catalog model exports to builds, on the meta device,
    the parameters gpuscale counts (to the mean-block rounding), and an MoE plan with experts
    whole (etp 1) and EP taken from the FSDP x TP ranks passes torchtitan's degree check."""
    import torch
    from torchtitan.distributed.parallel_dims import ParallelDims

    from gpuscale.costmodel.params import total_params

    spec = catalog.model(model)
    moe = {"ep": 8, "etp": 1} if spec.is_moe else {}
    job = _job(model, tp=2, dp=8, zero=3, micro_batch=1, global_batch=64, **moe)
    config = _torchtitan(_launch_args(export(job, "torchtitan").files[0].content))
    par = config.parallelism
    assert par.expert_parallel_degree == (8 if spec.is_moe else 1)
    ParallelDims.from_config(par, world_size=job.gpus)
    with torch.device("meta"):
        built = config.model_spec.model.build()
    n = sum(p.numel() for p in built.parameters())
    assert abs(n - total_params(spec)) <= spec.num_layers


@pytest.mark.parametrize(
    ("model", "pp", "vp", "first"),
    [
        ("llama3.1-70b", 2, 5, 0),
        ("qwen3-32b", 4, 2, 0),
        ("qwen3-32b", 4, 1, 0),
        ("gpt-oss-120b", 4, 3, 0),
        ("deepseek-v3", 8, 1, 0),
        ("llama3.1-8b", 4, 1, 5),
    ],
)
def test_torchtitan_pipeline_split_is_the_priced_one(
    model: str, pp: int, vp: int, first: int
) -> None:
    """torchtitan's own stage metadata and layer split (_get_pipeline_metadata,
    _generate_llm_fqn_per_model_part; virtual stage s on rank s mod pp) put on each rank the
    layers gpuscale priced (costmodel.pipeline.stage_layers), uneven and interleaved splits
    and explicit first-rank counts included."""
    from torchtitan.distributed.parallel_dims import ParallelDims
    from torchtitan.distributed.pipeline_parallel import (
        _generate_llm_fqn_per_model_part,
        _get_pipeline_metadata,
    )

    from gpuscale.costmodel.pipeline import stage_layers
    from gpuscale.specs import PlanBatch

    spec = catalog.model(model)
    moe = {"ep": 2, "etp": 1} if spec.is_moe else {}
    plan = {"tp": 1, "pp": pp, "vp": vp, "dp": 2, "zero": 1, "micro_batch": 1,
            "global_batch": 64, "first_stage_layers": first}  # fmt: skip
    job = _job(model, **plan, **moe)
    config = _torchtitan(_launch_args(export(job, "torchtitan").files[0].content))
    dims = ParallelDims.from_config(config.parallelism, world_size=job.gpus)
    stages, layers, less_first, less_last = _get_pipeline_metadata(
        dims, config.parallelism, config.model_spec.model
    )
    parts = _generate_llm_fqn_per_model_part(stages, layers, less_first, less_last)
    per_rank = [0] * pp
    for stage, names in enumerate(parts):
        per_rank[stage % pp] += sum(n.startswith("layers.") for n in names)
    split = stage_layers(spec, PlanBatch.from_plans([job.plan]))
    assert per_rank[0] == int(split.first[0]) and per_rank[-1] == int(split.last[0])
    assert all(n == int(split.middle[0]) for n in per_rank[1:-1])
    assert sum(per_rank) == spec.num_layers


def test_torchtitan_moe_expert_split_follows_expert_parallelism() -> None:
    """Without EP torchtitan splits experts over TP (etp = tp); with EP it keeps them whole."""
    plan = {"tp": 2, "dp": 8, "zero": 3, "micro_batch": 1, "global_batch": 64}
    export(_job("qwen3-30b-a3b", **plan), "torchtitan")  # etp defaults to tp
    with pytest.raises(InputError, match="--etp 2"):
        export(_job("qwen3-30b-a3b", **plan, etp=1), "torchtitan")


@pytest.mark.parametrize(
    ("model", "plan", "seq", "words"),
    [
        ("qwen3-30b-a3b", {"tp": 8, "ep": 8, "etp": 1}, 4096, "4 KV heads"),
        ("gpt-oss-20b", {"tp": 2, "cp": 2, "ep": 4, "etp": 1}, 4096, "varlen"),
        ("deepseek-v3", {"tp": 2, "ep": 8, "etp": 1}, 32768, "16,384"),
    ],
)
def test_torchtitan_refuses_what_its_shipped_config_would_refuse(
    model: str, plan: dict[str, int], seq: int, words: str
) -> None:
    spec = catalog.model(model)
    p = Plan(dp=8, zero=3, micro_batch=1, global_batch=64, **plan)
    job = TrainingJob(
        model_id=model, model=spec, gpu="h100-sxm", gpus=p.num_gpus, gpus_per_node=8, plan=p,
        training=Training(seq_len=seq, precision="bf16"),
    )  # fmt: skip
    with pytest.raises(InputError, match=words):
        export(job, "torchtitan")


def test_torchtitan_takes_expert_parallelism_from_sharded_ranks_only() -> None:
    """With --zero 0 the data-parallel ranks replicate; EP 8 cannot come from TP 2 alone."""
    job = _job("gpt-oss-20b", tp=2, dp=8, ep=8, etp=1, micro_batch=1, global_batch=64)
    with pytest.raises(InputError, match="lend none"):
        export(job, "torchtitan")


def test_torchtitan_refuses_a_wrong_plan_too() -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims

    job = _job(tp=8, pp=2, dp=4, micro_batch=1, global_batch=256, zero=3)
    config = _torchtitan(_launch_args(export(job, "torchtitan").files[0].content))
    with pytest.raises((AssertionError, ValueError)):
        ParallelDims.from_config(config.parallelism, world_size=48)  # 64 GPUs' plan on 48


def test_megatron_uneven_stages_are_accepted_by_megatron_core() -> None:
    """Llama 3.1 405B (126 layers) at PP=8 x VP=8, a published Megatron-Bridge recipe: the
    embedding and the loss count as layers, so the first and last ranks take 15 layers and the
    others 16, the split the cost model priced; megatron-core accepts it."""
    import torch
    from megatron.core.transformer import TransformerConfig

    job = _job("llama3.1-405b", tp=8, pp=8, vp=8, dp=2, micro_batch=1, global_batch=128)
    args = script_args(export(job, "megatron").files[0].content)
    assert "account_for_embedding_in_pipeline_split" in args
    assert "account_for_loss_in_pipeline_split" in args
    assert args["num_virtual_stages_per_pipeline_rank"] == "8"
    config = TransformerConfig(
        num_layers=126,
        hidden_size=16384,
        num_attention_heads=128,
        num_query_groups=8,
        tensor_model_parallel_size=8,
        pipeline_model_parallel_size=8,
        virtual_pipeline_model_parallel_size=8,
        account_for_embedding_in_pipeline_split=True,
        account_for_loss_in_pipeline_split=True,
        bf16=True,
        pipeline_dtype=torch.bfloat16,
    )
    assert config.pipeline_model_parallel_size == 8
    # Explicit first/last counts that are not multiples of vp are refused by megatron-core too.
    with pytest.raises(ValueError, match="divisible by virtual pipeline"):
        TransformerConfig(
            num_layers=126,
            hidden_size=16384,
            num_attention_heads=128,
            tensor_model_parallel_size=8,
            pipeline_model_parallel_size=8,
            virtual_pipeline_model_parallel_size=8,
            num_layers_in_first_pipeline_stage=15,
            num_layers_in_last_pipeline_stage=15,
            bf16=True,
            pipeline_dtype=torch.bfloat16,
        )


def test_torchtitan_version_names_its_release_line() -> None:
    job = _job(tp=8, pp=2, dp=4, micro_batch=1, global_batch=256, zero=3)
    assert export(job, "torchtitan", version="0.3.x") == export(job, "torchtitan")
    with pytest.raises(InputError, match=r"0\.3\.x, 0\.2\.x"):
        export(job, "torchtitan", version="0.1")


# --- torchtitan 0.2.x: the TOML job file ---------------------------------------------------------
# torchtitan 0.3's ConfigManager reads no TOML (--module/--config and tyro overrides only), so the
# 0.2.x file is checked structurally: every key is a field of 0.2.x's JobConfig (the field names
# below are those of torchtitan 0.2.0-0.2.2's torchtitan/config/job_config.py for the sections the
# export writes), and [training]/[parallelism], whose fields 0.3 kept, build 0.3's own dataclasses
# and pass its ParallelDims check.

TORCHTITAN_02_FIELDS: dict[str, set[str]] = {
    "job": {"config_file", "dump_folder", "description", "print_config", "custom_config_module"},
    "model": {"name", "flavor", "hf_assets_path", "tokenizer_path", "converters"},
    "training": {
        "dataset", "dataset_path", "local_batch_size", "global_batch_size", "seq_len",
        "max_norm", "steps", "enable_cpu_offload", "dtype", "mixed_precision_param",
        "mixed_precision_reduce", "gc_freq", "gc_debug",
    },
    "parallelism": {
        "data_parallel_replicate_degree", "data_parallel_shard_degree",
        "fsdp_reshard_after_forward", "tensor_parallel_degree", "disable_loss_parallel",
        "enable_async_tensor_parallel", "pipeline_parallel_degree", "module_fqns_per_model_part",
        "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
        "pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
        "pipeline_parallel_schedule_csv", "pipeline_parallel_microbatch_size",
        "context_parallel_degree", "context_parallel_rotate_method", "expert_parallel_degree",
        "expert_tensor_parallel_degree",
    },
    "activation_checkpoint": {"mode", "selective_ac_option", "memory_budget", "early_stop"},
    "quantize.linear.float8": {
        "enable_fsdp_float8_all_gather", "precompute_float8_dynamic_scale_for_fsdp",
        "recipe_name", "filter_fqns", "emulate",
    },
}  # fmt: skip
TORCHTITAN_02_AC_MODES = {"selective", "full", "memory_budget", "none"}
TORCHTITAN_02_FLAVORS = {"llama3": {"debugmodel", "8B", "70B", "405B"}}
TORCHTITAN_02_CONVERTERS = {"quantize.linear.float8", "quantize.linear.mx"}


def _toml(text: str) -> dict[str, Any]:
    import tomllib  # Python 3.11+, which the test extra's torch build requires

    return tomllib.loads(text)


def _torchtitan_02(job: TrainingJob) -> tuple[dict[str, Any], Any, Any]:
    """The job file's tables (dotted sections flattened), and torchtitan 0.3's training and
    parallelism dataclasses built from them."""
    from torchtitan.config.configs import ParallelismConfig, TrainingConfig

    files = {f.name: f.content for f in export(job, "torchtitan", version="0.2.x").files}
    assert (
        '--job.config_file "$(dirname "$0")/torchtitan_job.toml"' in files["launch_torchtitan.sh"]
    )
    doc = _toml(files["torchtitan_job.toml"])
    tables = {k: v for k, v in doc.items() if k != "quantize"}
    if "quantize" in doc:
        tables["quantize.linear.float8"] = doc["quantize"]["linear"]["float8"]
    for section, values in tables.items():
        assert section in TORCHTITAN_02_FIELDS, f"no [{section}] in torchtitan 0.2's JobConfig"
        unknown = set(values) - TORCHTITAN_02_FIELDS[section]
        assert not unknown, f"[{section}] {unknown} are no torchtitan 0.2 fields"
    assert tables["activation_checkpoint"]["mode"] in TORCHTITAN_02_AC_MODES
    assert tables["model"]["flavor"] in TORCHTITAN_02_FLAVORS[tables["model"]["name"]]
    assert set(tables["model"].get("converters", [])) <= TORCHTITAN_02_CONVERTERS
    return tables, TrainingConfig(**tables["training"]), ParallelismConfig(**tables["parallelism"])


def test_torchtitan_02_job_file_maps_onto_torchtitan_and_round_trips() -> None:
    from torchtitan.distributed.parallel_dims import ParallelDims

    job = _job(tp=8, pp=2, dp=4, vp=5, micro_batch=1, global_batch=256, zero=3, recompute="full")
    tables, training, par = _torchtitan_02(job)
    assert (par.tensor_parallel_degree, par.pipeline_parallel_degree) == (8, 2)
    assert par.data_parallel_shard_degree == 4 and par.fsdp_reshard_after_forward == "default"
    assert par.pipeline_parallel_schedule == "Interleaved1F1B"
    assert par.pipeline_parallel_layers_per_stage == 8  # 80 layers / (PP 2 x VP 5)
    # ... and 0.2, which splits stages as 0.3 does, builds the 10 stages of 8 priced (the
    # default one layer less on the first and last stage made 11 before).
    from torchtitan.distributed.pipeline_parallel import _get_pipeline_metadata

    model_config = _torchtitan(["--module", "llama3", "--config", "llama3_70b"]).model_spec.model
    dims = ParallelDims.from_config(par, world_size=job.gpus)
    assert _get_pipeline_metadata(dims, par, model_config) == (10, 80, 0, 0)
    assert training.global_batch_size == 256 and training.seq_len == 4096
    assert tables["activation_checkpoint"]["mode"] == "full"
    assert tables["model"] == {"name": "llama3", "flavor": "70B"}
    ParallelDims.from_config(par, world_size=job.gpus)  # torchtitan's own degree check
    # the same settings as the 0.3 command line
    args = _launch_args(export(job, "torchtitan").files[0].content)
    config = _torchtitan(args)
    for key in tables["parallelism"]:
        assert getattr(config.parallelism, key) == getattr(par, key), key


def test_torchtitan_02_refuses_a_wrong_plan_too() -> None:
    from torchtitan.config.configs import ParallelismConfig
    from torchtitan.distributed.parallel_dims import ParallelDims

    job = _job(tp=8, pp=2, dp=4, micro_batch=1, global_batch=256, zero=1, precision="fp8")
    tables, _, par = _torchtitan_02(job)
    assert tables["model"]["converters"] == ["quantize.linear.float8"]
    assert tables["quantize.linear.float8"] == {"enable_fsdp_float8_all_gather": True}
    with pytest.raises((AssertionError, ValueError)):
        ParallelDims.from_config(par, world_size=48)  # 64 GPUs' plan on 48
    with pytest.raises(TypeError):  # a key torchtitan does not have
        ParallelismConfig(**{**tables["parallelism"], "tensor_parallel_size": 8})


# --- Volcano: the Kubernetes schema for the pods, the Job CRD's schema for Volcano's fields ------
# The Volcano Job is a custom resource, so kubernetes-validate checks its pod templates (as the
# built-in v1 PodTemplate) and this schema checks the rest: the constraints of the
# batch.volcano.sh/v1alpha1 Job CRD (volcano-sh/volcano config/crd/volcano/bases/
# batch.volcano.sh_jobs.yaml) for the fields the export writes; unknown fields are refused, as
# the API server's structural-schema pruning would drop them.

_DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_VOLCANO_EVENTS = [
    "*", "PodPending", "PodRunning", "PodFailed", "PodEvicted", "Unknown", "TaskCompleted",
    "OutOfSync", "CommandIssued", "JobUpdated", "TaskFailed",
]  # fmt: skip
_NETWORK_TOPOLOGY = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "mode": {"enum": ["hard", "soft"]},
        "highestTierAllowed": {"type": "integer", "minimum": 0},
        "highestTierName": {"type": "string", "maxLength": 253},
    },
}
VOLCANO_JOB_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "batch.volcano.sh/v1alpha1"},
        "kind": {"const": "Job"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": _DNS_SUBDOMAIN}},
        },
        "spec": {
            "type": "object",
            "required": ["tasks"],
            "additionalProperties": False,
            "properties": {
                "schedulerName": {"type": "string", "maxLength": 63},
                "queue": {"type": "string", "maxLength": 253, "pattern": _DNS_SUBDOMAIN},
                "minAvailable": {"type": "integer", "minimum": 0},
                "maxRetry": {"type": "integer", "minimum": 0},
                "networkTopology": _NETWORK_TOPOLOGY,
                "plugins": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                },
                "policies": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "event": {"enum": _VOLCANO_EVENTS},
                            "action": {"type": "string"},
                        },
                    },
                },
                "tasks": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "replicas", "template"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "maxLength": 63, "pattern": _DNS_LABEL},
                            "replicas": {"type": "integer", "minimum": 0},
                            "template": {"type": "object"},  # kubernetes-validate checks it
                        },
                    },
                },
            },
        },
    },
}


def _volcano(job: TrainingJob, **options: Any) -> dict[str, Any]:
    import jsonschema
    import kubernetes_validate

    manifest = yaml.safe_load(export(job, "volcano", **options).files[0].content)
    jsonschema.validate(manifest, VOLCANO_JOB_SCHEMA)
    for task in manifest["spec"]["tasks"]:
        pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": task["name"]}}
        kubernetes_validate.validate({**pod, "template": task["template"]}, "1.32", strict=True)
    return manifest


def test_volcano_job_passes_both_schemas_and_round_trips() -> None:
    job = _job(**MEGATRON_PLAN)
    manifest = _volcano(job)
    spec = manifest["spec"]
    pods = sum(t["replicas"] for t in spec["tasks"])
    gpus = {
        t["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        for t in spec["tasks"]
    }
    assert pods == spec["minAvailable"] == job.nodes and pods * gpus.pop() == job.gpus
    assert spec["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}
    assert [t["name"] for t in spec["tasks"]] == ["master", "worker"]
    assert spec["plugins"]["pytorch"][:2] == ["--master=master", "--worker=worker"]
    one_node = _volcano(_job(tp=8, pp=1, dp=1, micro_batch=1, global_batch=8))["spec"]
    assert one_node["networkTopology"]["mode"] == "hard" and len(one_node["tasks"]) == 1


def test_volcano_schemas_refuse_a_wrong_job_too() -> None:
    import jsonschema
    import kubernetes_validate

    job = _job(**MEGATRON_PLAN)
    manifest = yaml.safe_load(export(job, "volcano").files[0].content)
    wrong = {**manifest, "spec": {**manifest["spec"], "networkTopology": {"mode": "strict"}}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, VOLCANO_JOB_SCHEMA)
    wrong = {**manifest, "spec": {**manifest["spec"], "minAvailable": -1}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, VOLCANO_JOB_SCHEMA)
    template = manifest["spec"]["tasks"][0]["template"]
    template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = [8]
    pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "master"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate({**pod, "template": template}, "1.32", strict=True)
    with pytest.raises(InputError, match="tier must be >= 1"):
        export(job, "volcano", highest_tier=0)


# --- a cluster file: its topology with the Slurm and Volcano exports ----------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_slurm_export_with_a_cluster_writes_its_topology(tmp_path: Path) -> None:
    from gpuscale.api import export_plan
    from gpuscale.cluster.spec import load_cluster

    job = _job(tp=8, pp=2, dp=2, micro_batch=1, global_batch=64)  # 4 nodes: one leaf of lab-64
    result = export_plan(job, to="slurm", cluster=EXAMPLES / "lab-64.yaml", output=tmp_path / "j")
    names = sorted(Path(p).name for p in result.written)
    assert names == ["topology.conf", "topology.yaml", "train.sbatch"]
    sbatch = (tmp_path / "j" / "train.sbatch").read_text()
    subprocess.run(["bash", "-n", str(tmp_path / "j" / "train.sbatch")], check=True, timeout=30)
    assert "#SBATCH --switches=1\n" in sbatch  # 4 nodes fit under one leaf switch
    conf = (tmp_path / "j" / "topology.conf").read_text().splitlines()
    switches = [dict(f.split("=", 1) for f in ln.split()) for ln in conf if ln.startswith("Switch")]
    assert {s["SwitchName"] for s in switches} >= {"leaf0", "leaf1", "spine0"}
    assert all("Nodes" in s or "Switches" in s for s in switches)
    tree = yaml.safe_load((tmp_path / "j" / "topology.yaml").read_text())
    assert tree[0]["topology"] == "lab-64" and tree[0]["tree"]["switches"]
    assert load_cluster(EXAMPLES / "lab-64.yaml").num_nodes == 8
    wide = _job(tp=8, pp=2, dp=4, micro_batch=1, global_batch=64)  # 8 nodes: 4 are H100s
    with pytest.raises(InputError, match=r"4 node.* the plan needs 8"):
        export_plan(wide, to="slurm", cluster=EXAMPLES / "lab-64.yaml")
    with pytest.raises(InputError, match="--cluster applies to --to slurm or volcano"):
        export_plan(job, to="megatron", cluster=EXAMPLES / "lab-64.yaml")


def test_volcano_export_with_a_cluster_asks_for_the_lowest_tier_that_holds_it() -> None:
    from gpuscale.api import export_plan

    cluster = EXAMPLES / "fat-tree-512.yaml"
    small = export_plan(_job(**MEGATRON_PLAN), to="volcano", cluster=cluster).export
    files = {f.name: f.content for f in small.files}
    manifest = yaml.safe_load(files["volcano-job.yaml"])
    assert manifest["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    hypernodes = list(yaml.safe_load_all(files["hypernodes.yaml"]))
    leaf = max(len(h["spec"]["members"]) for h in hypernodes if h["spec"]["tier"] == 1)
    assert leaf >= 8  # the 8-node job fits one leaf
    big = _job(tp=8, pp=2, dp=16, micro_batch=1, global_batch=256)  # 32 nodes
    manifest = yaml.safe_load(
        export_plan(big, to="volcano", cluster=cluster).export.files[0].content
    )
    assert manifest["spec"]["networkTopology"]["highestTierAllowed"] >= 2


def test_folded_moe_plan_exports_its_expert_split_to_megatron_core() -> None:
    """A plan whose experts fold over the tensor-parallel ranks (EP 32 > dp 16 with TP 2,
    etp 1) is written with --expert-tensor-parallel-size, and megatron-core's own rank generator
    lays out its expert mesh (etp x ep x edp x pp) over the job's GPUs."""
    from megatron.core.parallel_state import RankGenerator

    plan = {"tp": 2, "pp": 8, "dp": 16, "ep": 32, "micro_batch": 1, "global_batch": 2048}
    job = _job("qwen3-235b-a22b", **plan, etp=1)
    args = script_args(export(job, "megatron").files[0].content)
    assert args["expert_model_parallel_size"] == "32"
    assert args["expert_tensor_parallel_size"] == "1"
    edp = 2 * 16 // 32
    experts = RankGenerator(tp=1, ep=32, dp=edp, pp=8, cp=1, order="tp-ep-dp-pp")
    dense = RankGenerator(tp=2, ep=1, dp=16, pp=8, cp=1, order="tp-cp-ep-dp-pp")
    assert experts.world_size == dense.world_size == job.gpus
    # Each expert-parallel group is one pipeline stage's 32 ranks, consecutive.
    assert all(len(g) == 32 for g in experts.get_ranks("ep"))
    unfolded = _job("qwen3-235b-a22b", **{**plan, "ep": 16})
    assert "expert_tensor_parallel_size" not in script_args(
        export(unfolded, "megatron").files[0].content
    )
    # torchtitan keeps experts whole: the plan that splits them over TP is refused there.
    with pytest.raises(InputError, match="keeps them whole"):
        export(unfolded, "torchtitan")


@pytest.mark.parametrize(
    ("model", "moe_layers", "dense_width", "shared"),
    [("llama4-maverick", 24, 16384, 8192), ("deepseek-v3", 58, 18432, 2048)],
)
def test_megatron_launch_states_dense_layers_and_shared_experts(
    model: str, moe_layers: int, dense_width: int, shared: int
) -> None:
    """An MoE model with dense blocks exports its layer pattern (megatron arguments.py
    ``moe_freq_type`` evaluates a list expression) and its widths, which megatron-core's
    TransformerConfig takes; without them Megatron would build every block as MoE."""
    import torch
    from megatron.core.transformer import TransformerConfig

    spec = catalog.model(model)
    job = _job(model, tp=8, pp=1, dp=4, micro_batch=1, global_batch=64)
    args = script_args(export(job, "megatron").files[0].content)
    pattern = eval(str(args["moe_layer_freq"]), {"__builtins__": {}})  # as moe_freq_type does
    assert len(pattern) == spec.num_layers and sum(pattern) == moe_layers
    if model == "llama4-maverick":
        assert pattern[:4] == [0, 1, 0, 1]  # interleave_moe_layer_step 2: the odd layers
    else:
        assert pattern[:4] == [0, 0, 0, 1]  # first_k_dense_replace 3
    assert int(args["ffn_hidden_size"]) == dense_width
    assert int(args["moe_ffn_hidden_size"]) == spec.ffn_hidden_size
    assert int(args["moe_shared_expert_intermediate_size"]) == shared
    config = TransformerConfig(
        num_layers=spec.num_layers,
        hidden_size=spec.hidden_size,
        num_attention_heads=spec.num_heads,
        ffn_hidden_size=int(args["ffn_hidden_size"]),
        num_moe_experts=int(args["num_experts"]),
        moe_router_topk=int(args["moe_router_topk"]),
        moe_ffn_hidden_size=int(args["moe_ffn_hidden_size"]),
        moe_shared_expert_intermediate_size=int(args["moe_shared_expert_intermediate_size"]),
        moe_layer_freq=pattern,
        moe_router_pre_softmax="moe_router_pre_softmax" in args,
        moe_router_score_function=str(args.get("moe_router_score_function", "softmax")),
        add_bias_linear="disable_bias_linear" not in args,
        tensor_model_parallel_size=8,
        params_dtype=torch.bfloat16,
    )
    assert config.moe_layer_freq == pattern
