"""Map rows of ``published_runs.csv`` and ``published_runs_more.csv`` to specs, predict them,
and measure the error.

Both files go through the same code; each row's source key (:func:`source_of`) names the
publication (and table set) it came from, which is the unit of leave-one-source-out validation
(:mod:`gpuscale.validation.loso`). Every metric is converted to tokens/s per GPU with the
*source's own* FLOP definition (see the validation README), so that no source's accounting
leaks into the comparison. Each assumption for a field a source leaves blank is written next to
the code that makes it; what a row ran that cannot be expressed yet is recorded as a limitation.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.flops import model_flops_per_token
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.costmodel.uncertainty import parallelism_mix, regime_key
from gpuscale.specs import Cluster, ModelSpec, Plan, Training
from gpuscale.specs.plan import Recompute

RUN_FILES = ("published_runs.csv", "published_runs_more.csv")
"""The measured-throughput tables in ``data/validation`` (the second was published later and
was not used to shape the model; see its README section 'Added later')."""

BASELINE_MFU = 0.40
"""The naive guess every prediction must beat: 40% MFU on the precision's dense peak."""


@dataclass(frozen=True, slots=True)
class Case:
    """One row turned into gpuscale inputs, plus how to read its measured value."""

    id: str
    source: str
    model: ModelSpec
    cluster: Cluster
    training: Training
    plan: Plan
    framework: str
    measured_tokens_per_s_per_gpu: float
    assumptions: tuple[str, ...]
    limitations: tuple[str, ...] = ()
    """What the row ran that gpuscale cannot express yet (predicted as the nearest expressible
    run); empty when the row is fully expressed."""
    overrides: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    """Profile entries the row's stated configuration sets (``{"constants": {...},
    "overlap": {...}}``), each with its reason in ``assumptions``."""


@dataclass(slots=True)
class Result:
    id: str
    source: str
    measured: float
    predicted: float | None = None
    baseline: float | None = None
    skip_reason: str = ""
    framework: str = ""
    gpu_generation: str = ""
    num_gpus: int = 0
    regime: str = ""
    mix: str = ""
    params_b: float = 0.0
    fabric: str = ""
    assumptions: tuple[str, ...] = field(default=())
    limitations: tuple[str, ...] = field(default=())

    @property
    def error(self) -> float:
        assert self.predicted is not None
        return self.predicted / self.measured - 1.0

    @property
    def baseline_error(self) -> float:
        assert self.baseline is not None
        return self.baseline / self.measured - 1.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "measured": self.measured,
            "predicted": self.predicted,
            "framework": self.framework,
        }
        if self.predicted is not None:
            out.update(
                error=self.error,
                baseline_error=self.baseline_error,
                assumptions=list(self.assumptions),
                limitations=list(self.limitations),
            )
        else:
            out["skipped"] = self.skip_reason
        return out


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def load_all(data_dir: Path) -> list[dict[str, str]]:
    """Every row of every measured-throughput table (:data:`RUN_FILES`), in file order."""
    return [row for name in RUN_FILES for row in load_rows(data_dir / name)]


SOURCE_PREFIXES = (
    # llm-foundry's README has an A100 table set (published_runs.csv, key 'llmfoundry') and an
    # H100 table set measured on other machines at another time (published_runs_more.csv).
    ("llmfoundry-h100-", "llmfoundry-h100"),
    # The torchtitan paper (Liang et al. 2024) is another publication than torchtitan's
    # docs/performance.md A100 table (key 'torchtitan').
    ("torchtitan-paper-", "torchtitan-paper"),
    ("megascale-", "megascale"),
)


def source_of(row_id: str) -> str:
    """Stable source key of a row: one publication (or one table set of it) per key."""
    for prefix, key in SOURCE_PREFIXES:
        if row_id.startswith(prefix):
            return key
    return re.sub(r"-.*", "", row_id)


def _int(value: str, default: int | None = None) -> int | None:
    value = value.strip()
    if not value:
        return default
    return int(float(value))


# --- hardware -------------------------------------------------------------------------------


POWER_CAPPED_H100 = "h100-sxm-500w"
"""Catalog id of the 500 W HBM2e H100 (the cost-model side adds it); until it exists, those rows
are predicted on h100-sxm and say so."""


def _gpu_id(text: str, notes: list[str], limits: list[str]) -> str:
    t = text.upper()
    if "H100" in t and "500W" in t:
        # torchtitan paper (Liang et al. 2024, Sec. 3.1) and torchtitan's
        # benchmarks/llama3_h100_202412_torchtitan.md: H100 with 95 GiB HBM2e, capped at 500 W.
        if POWER_CAPPED_H100 in catalog.gpus():
            return POWER_CAPPED_H100
        limits.append(
            "H100 at a 500 W power cap with 95 GiB HBM2e is not in the catalog: predicted on "
            "h100-sxm (700 W, 80 GB HBM3 at 3.35 TB/s)"
        )
        return "h100-sxm"
    if "H100" in t:
        return "h100-sxm"  # DGX-H100 or unstated variant: NVIDIA's tables use HGX/DGX (SXM5)
    if "A100" in t and "40GB" in t:
        return "a100-sxm-40gb"
    if "A100" in t and "80GB" not in t:
        # MegaScale (Jiang et al. 2024) names only 'NVIDIA Ampere GPUs' in 8-GPU NVLink servers.
        notes.append("GPU given as Ampere/A100 without memory size: A100-SXM4-80GB assumed")
        return "a100-sxm-80gb"
    if "A100" in t:
        return "a100-sxm-80gb"
    raise KeyError(text)


def _fabric(row: dict[str, str], notes: list[str]) -> tuple[str, int]:
    text = row["inter_node_link"]
    if "HDR" in text:
        return "ib-hdr200", 8
    if "1600 Gbps" in text and "RoCE" in text:
        return "roce-200", 8
    if "8x200G RoCE" in text:
        return "roce-200", 8  # MegaScale Sec. 6: 8 x 200G RoCE NICs per server, multi-rail
    if "400 Gb/s per GPU" in text:
        # torchtitan benchmarks md: 400 Gb/s per GPU over the backend RDMA network; Meta's
        # H100 training fabric is RoCE (Gangidi et al. 2024, SIGCOMM, 'RDMA over Ethernet for
        # Distributed AI Training at Meta Scale').
        notes.append("backend RDMA network at 400 Gb/s per GPU: RoCE 400G, 8 NICs per node")
        return "roce-400", 8
    if "Omni-Path" in text:
        return "opa-100", 4
    if "H100" in row["gpu"]:
        notes.append("network not stated: DGX H100 reference design, 8x InfiniBand NDR400 per node")
        return "ib-ndr400", 8
    notes.append("network not stated: DGX A100 reference design, 8x InfiniBand HDR200 per node")
    return "ib-hdr200", 8


# --- model ----------------------------------------------------------------------------------


def _model(row: dict[str, str], notes: list[str]) -> ModelSpec:
    name = row["model"]
    hidden = int(row["hidden"])
    ffn = _int(row["ffn_hidden"])
    if ffn is None:
        ffn = 4 * hidden
        notes.append("ffn_hidden not stated: 4h (standard GPT)")
    llama = "llama" in name.lower()
    mpt = name.lower().startswith("mpt")
    seq = _int(row["seq_len"]) or _TORCHTITAN_SEQ  # see _plan_and_training for the note
    return ModelSpec(
        name=name,
        num_layers=int(row["layers"]),
        hidden_size=hidden,
        num_heads=int(row["heads"]),
        num_kv_heads=int(row["kv_heads"]),
        ffn_hidden_size=ffn,
        vocab_size=int(row["vocab"]),
        max_seq_len=seq,
        mlp="gated" if llama else "plain",
        norm="rmsnorm" if llama else "layernorm",
        position="rope" if llama else "learned",
        tied_embeddings=mpt,
        qkv_bias=not (llama or mpt),
        linear_bias=not (llama or mpt),
        source=row["source"],
    )


# --- plan -----------------------------------------------------------------------------------

# Models of llm-foundry's large-scale H100 sweep that ran attn_impl 'flash' (see _plan_and_training).
_LLMFOUNDRY_LS_FLASH = frozenset({"mpt-1b", "mpt-3b", "mpt-7b", "mpt-70b"})

FRAMEWORK_BY_SOURCE = {
    "narayanan21": "megatron-lm-2021",
    "korthikanti22": "megatron-lm-2021",
    "megatron": "megatron",
    "nemo2407": "nemo",
    "torchtitan": "torchtitan",
    "llmfoundry": "llm-foundry",
    "bloom176b": "deepspeed",
    "llmfoundry-h100": "llm-foundry",
    # MegaScale's baseline is Megatron-LM @285068c8 (2023) with the paper's networking
    # optimizations on; its overlap flags are not stated: the Megatron-Core profile (every
    # overlap on) is the closest named stack. MegaScale's own rows are its Megatron fork.
    # Their TP overlap is the megatron profile's (Transformer Engine userbuffers, 15/16; 11/12
    # with full recompute), a reading, not MegaScale's own count: its Sec. 3.2 (Fig. 5) fuses
    # the sequence-parallel all-gather and reduce-scatter with the adjacent FFN linears, the
    # GEMM split into chunks pipelined with the collective, forward and backward, the same
    # decomposition TE runs, but states no chunk count, so no exposed share of its own can be
    # sourced. A pipelined all-gather waits for its first chunk, which TE's ring exchange has
    # locally, so if anything MegaScale exposes more than TE's share; these rows are predicted
    # as a Megatron-LM run of the same plan anyway (serial block, no LAMB: the limits below).
    "megascale": "megatron",
    "torchtitan-paper": "torchtitan",
    # layout_sweeps.csv: BigScience's Megatron-DeepSpeed trials, the stack of bloom176b.
    "bloomsweep": "deepspeed",
}

_ASYNC_TP_OVERLAP = 0.70
"""Share of the TP traffic that PyTorch's AsyncTP (torch.distributed._symmetric_memory
micro-pipelining, as torchtitan enables it) hides under its matmuls: the decomposed
collective-matmul overlap of Wang et al. 2023 (ASPLOS, 'Overlap communication with dependent
computation via decomposition', Fig. 9), the figure the megatron profile used before it was
counted from Transformer Engine's userbuffers defaults."""

_TORCHTITAN_SEQ = 8192
"""torchtitan's Llama 3 training configs (train_configs/llama3_*.toml, 2024) use seq_len 8192."""


def _zero_stage(sharding: str, source: str, notes: list[str]) -> int:
    if source == "megascale" and "ZeRO-2" in sharding:
        # MegaScale Sec. 3.2: one all-gather of parameters before the forward and one
        # reduce-scatter of gradients after the backward per step, i.e. Megatron's distributed
        # optimizer; gpuscale's zero 2 reduce-scatters after every micro-batch (DeepSpeed).
        notes.append("ZeRO-2-style DP with one gather/scatter per step: distributed optimizer")
        return 1
    if "ZeRO-3" in sharding or ("FSDP" in sharding and "SHARD_GRAD_OP" not in sharding):
        return 3
    if "SHARD_GRAD_OP" in sharding or "ZeRO-2" in sharding:
        return 2
    if "ZeRO-1" in sharding:
        return 1
    if sharding.lower().startswith("distributed optimizer"):
        # Megatron's distributed optimizer (ZeRO-1-like: optimizer state and fp32 main params
        # sharded, one reduce-scatter and one all-gather per step), stated or implied by a
        # stated flag (the row's sharding column says which).
        notes.append(f"sharding: {sharding}")
        return 1
    if source in ("megatron", "nemo2407", "megascale"):
        notes.append("distributed optimizer assumed (Megatron-Core/NeMo default for these recipes)")
        return 1
    return 0


def _recompute(row: dict[str, str], source: str, notes: list[str]) -> Recompute:
    rc = row["recompute"].lower()
    if rc.startswith("full"):
        return "full"
    if rc.startswith("selective"):
        return "selective"
    if rc.startswith("none"):
        return "none"
    if source == "megascale":
        # Selective recompute with sequence parallelism is Megatron-LM's setting for GPT-3
        # 175B since Korthikanti et al. 2022 (Sec. 6: 'selective' is the recommended mode), and
        # MegaScale's text names sequence parallelism among the overlapped collectives (Sec. 3.2).
        notes.append("recompute not stated: selective with sequence parallelism (Megatron-LM)")
        return "selective"
    recompute: Recompute = "full" if source == "narayanan21" else "none"
    notes.append(
        f"recompute not stated: {recompute}"
        + (
            " (Table-1 FLOP formula and run scripts use full recompute)"
            if recompute == "full"
            else ""
        )
    )
    return recompute


def _plan_and_training(
    row: dict[str, str], model: ModelSpec, source: str, notes: list[str], limits: list[str]
) -> tuple[Plan, Training, str, dict[str, dict[str, float]]]:
    n = int(row["n_gpus"])
    tp, pp = _int(row["tp"]), _int(row["pp"])
    sharding = row["sharding"]
    framework = FRAMEWORK_BY_SOURCE[source]
    overrides: dict[str, dict[str, float]] = {}
    compiled = False
    if "ZeRO-3" in sharding and "DeepSpeed" in sharding:
        # ZeRO-3 shipped in DeepSpeed v0.3.13 (March 2021); the SC21 paper's runs (arXiv v1
        # April 2021) used a release of that year, before _all_gather_base (v0.5.5).
        framework = "deepspeed-2021" if source == "narayanan21" else "deepspeed"
    if tp is None or pp is None:
        mp = re.search(r"model-parallel size \(t\*p\) = (\d+)", row["notes"])
        if mp is None:
            raise LookupError("tp/pp not stated and not derivable")
        tp, pp = 8, int(mp.group(1)) // 8
        notes.append(
            f"t*p = {mp.group(1)} given, t = 8 assumed (one DGX node, as in the paper's Table 1)"
        )
    cp = _int(row["cp"], 1) or 1
    dp = _int(row["dp"]) or n // (tp * pp * cp)
    vp = _int(row["vp"], 1) or 1
    seq = _int(row["seq_len"])
    if seq is None:
        seq = _TORCHTITAN_SEQ
        notes.append(f"seq_len not stated: {seq} (torchtitan's Llama 3 training configs)")
    mb = _int(row["micro_batch"])
    gb = _int(row["global_batch"])
    if source == "torchtitan-paper":
        # torchtitan's 'local batch size' is per data-parallel rank. Without PP it runs as one
        # micro-batch; with PP torchtitan splits it into pipeline_parallel_microbatches, which
        # defaults to the PP degree (torchtitan parallelisms/pipeline_llama.py, 2024).
        local = mb or 1
        if gb is None:
            gb = local * dp
            notes.append(
                "global batch not stated: local batch x FSDP degree (one step, no accumulation)"
            )
        mb = max(local // pp, 1) if pp > 1 else local
        if pp > 1:
            notes.append(
                f"PP micro-batches: torchtitan default = PP degree ({pp}), {mb} sequence(s) each"
            )
        if "Interleaved" in row["notes"] and row["vp"].strip() == "":
            vp = 2
            notes.append(
                "interleaved 1F1B, stages per rank not stated: 2 assumed (the least interleaving)"
            )
        if "AsyncTP" in row["notes"]:
            # AsyncTP decomposes the TP collectives and overlaps them with the matmuls (Wang et
            # al. 2023, ASPLOS, Fig. 9): its own decomposition, not Transformer Engine's
            # userbuffers (the megatron profile's TP overlap is counted from TE's defaults).
            overrides.setdefault("overlap", {})["tp"] = _ASYNC_TP_OVERLAP
            notes.append("AsyncTP: TP overlap of the loop decomposition (Wang et al. 2023)")
        if "torch.compile" in row["notes"]:
            # The row names the technique; torchtitan compiles each TransformerBlock
            # (parallelize_llama.apply_compile): Inductor's fused kernels (costmodel/fusion.py).
            compiled = True
            notes.append("torch.compile: each block's memory-bound ops fused by Inductor")
    if source == "megascale" and "Megatron-LM baseline" in row["model"]:
        # MegaScale's baseline is Megatron-LM @285068c8 (2023-01-11), which has none of the
        # Megatron-Core overlap flags the megatron profile assumes: the distributed optimizer
        # reduce-scatters gradients after the last backward and all-gathers parameters after
        # the step (training.py: optimizer.reduce_model_grads / gather_model_params), pipeline
        # sends block and end in torch.cuda.synchronize() (p2p_communication.py), and of the
        # four TP all-reduce equivalents per layer (sequence parallel) only the column-parallel
        # backward's reduce-scatter of the input gradient runs async under the weight-gradient
        # GEMM (core/tensor_parallel/layers.py, async_op=True): 1/4 of the TP traffic overlaps.
        overrides["overlap"] = {"dp": 0.0, "zero": 0.0, "pp": 0.0, "tp": 0.25}
        # Its one hidden collective is a backward one: a recompute adds no exposure pattern of
        # TE's userbuffers (megatron.yaml tp_overlap_exposed_in_forward).
        overrides.setdefault("constants", {})["tp_overlap_exposed_in_forward"] = 0.0
        notes.append(
            "Megatron-LM @285068c8 (2023-01): no DP/PP overlap, TP overlap only of the "
            "async input-gradient reduce-scatter (1 of 4 all-reduce equivalents)"
        )
    if (
        source == "llmfoundry-h100"
        and row["id"].endswith("-ls")
        and model.name.lower() in _LLMFOUNDRY_LS_FLASH
    ):
        # The large-scale table came with scripts/train/benchmarking/sweep.py in the same commit
        # (llm-foundry 5e85bd62d, 2024-01-06; its models, micro-batches, sharding and recompute
        # are the table's rows): 13b and 30b ran attn_impl 'triton', 1b, 3b, 7b and 70b ran
        # 'flash', FlashAttention 2.4.2 (setup.py extra 'gpu-flash2', which submit_benchmarks.py
        # installs) through llm-foundry's unpad/varlen/pad path (llmfoundry/models/layers/
        # attention.py flash_attn_fn). The llm-foundry profile prices the Triton kernel.
        # The llm-foundry-flash profile holds that path's physics (FA2's rates and the gather/
        # scatter copies of the unpad/varlen/pad path around it), sourced in its YAML.
        framework = "llm-foundry-flash"
        notes.append(
            "ran FlashAttention-2 2.4.2 (attn_impl flash, sweep.py @5e85bd62d): FA2's rates, "
            "and the unpad/pad copies of llm-foundry's varlen path"
        )
    if mb is None:
        # Not a default: Megatron-LM's --micro-batch-size has none (arguments.py, core_v0.8.0:
        # default=None, then `assert args.micro_batch_size is not None`), so an unstated
        # micro-batch is unknown; 1 is assumed (the smallest, most micro-batches per step).
        mb = 1
        notes.append("micro-batch not stated: 1 assumed (Megatron-LM has no default)")
    if gb is None:
        raise LookupError("global batch not stated and not derivable")

    zero = _zero_stage(sharding, source, notes)
    recompute = _recompute(row, source, notes)
    rc = row["recompute"].lower()

    legacy = source in ("narayanan21", "korthikanti22", "bloom176b", "bloomsweep")
    if "pp-partition-method" in row["notes"]:
        limits.append(
            "embeddings placed as pipeline layers (Megatron-DeepSpeed partition method) are "
            "not expressible: layers split evenly over the stages"
        )
    sequence_parallel = (
        # The Megatron README runs state --tp-comm-overlap, which Megatron-LM accepts only with
        # --sequence-parallel (arguments.py, core_v0.8.0: 'Tensor parallel communication/GEMM
        # overlap can happen only when sequence parallelism is enabled').
        source in ("megatron", "nemo2407", "megascale")
        # Table 5's full-recompute baseline runs without it: "full (no sequence parallelism)".
        or (source == "korthikanti22" and "sequence parallel" in rc and "no sequence" not in rc)
        # torchtitan's TP plan shards norms and dropout over the sequence (SequenceParallel).
        or (source == "torchtitan-paper" and tp > 1)
    )
    text = row["precision"].lower()
    precision = "fp8" if ("fp8" in text or "float8" in text) else "bf16"
    fp8_gather = False
    if "float8" in text:
        notes.append("torchao Float8 linears (tensorwise scaling) modelled as FP8 matmuls")
        if source == "torchtitan-paper":
            # torchtitan docs/float8.md (2024) launches Float8 with
            # --float8.enable_fsdp_float8_all_gather and
            # --float8.precompute_float8_dynamic_scale_for_fsdp.
            fp8_gather = True
            notes.append("FSDP float8 all-gather with precomputed scales (torchtitan float8.md)")
    if not text.strip() or text.strip() == "not stated":
        notes.append("precision not stated: bf16 mixed precision")
    if "mp mode default" in text:
        # Composer FSDP mixed_precision DEFAULT: bf16 parameters, gradients reduced in fp32
        # (composer/distributed/mosaic_fsdp_utils.py get_mixed_precision, 2023-24); the
        # llm-foundry profile describes PURE (bf16 reduction).
        overrides.setdefault("constants", {})["grad_reduce_bytes"] = 4.0
        # FSDP1 casts each unit's unsharded bf16 gradient to the fp32 reduce dtype before the
        # reduce-scatter (torch.distributed.fsdp _runtime_utils._post_backward_hook:
        # param.grad.to(mixed_precision.reduce_dtype)): read 2 + write 4 bytes per parameter,
        # 1.5 passes of the 4-byte reduce-scattered gradient.
        overrides["constants"]["zero3_reduce_copy_passes"] = 1.5
        notes.append("Composer mixed precision DEFAULT: gradients cast to and reduced in fp32")
    if text.startswith("fp16") and framework == "deepspeed" and zero in (1, 2):
        # DeepSpeed's fp16 ZeRO-1/2 reduces the 16-bit gradients it accumulates (ipg buckets in
        # the parameter dtype; communication_data_type defaults to it: deepspeed/runtime/zero/
        # stage_1_and_2.py, DeepSpeed config docs), not an fp32 copy as Megatron's main_grad.
        overrides.setdefault("constants", {})["grad_reduce_bytes"] = 2.0
        notes.append("DeepSpeed fp16 ZeRO-1/2: gradients reduced in fp16")
    if "CUDA_LAUNCH_BLOCKING=1" in row["notes"]:
        # A stated setting of the run (Jean Zay's hang workaround): synchronous launches, so
        # the host's per-layer work adds to the step (costmodel/step.py).
        overrides.setdefault("constants", {})["cuda_launch_blocking"] = 1.0
        notes.append("CUDA_LAUNCH_BLOCKING=1: kernel launches synchronous, host time not hidden")
    if source == "megascale" and "MegaScale" in model.name:
        limits.append(
            "MegaScale's own system (parallel transformer block, sliding-window attention, "
            "LAMB, its fused kernels and overlap) is not expressible: predicted as a "
            "Megatron-LM run of the same plan"
        )
    if not legacy:
        notes.append("flash attention assumed (standard in 2024 stacks)")
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        micro_batch=mb,
        global_batch=gb,
        recompute=recompute,
        zero=zero,
        sequence_parallel=sequence_parallel,
    )
    # The SC21 and MLSys'23 runs keep Megatron-LM's default --attention-dropout 0.1 and
    # --hidden-dropout 0.1 (megatron/arguments.py; sc21 CONFIG.sh sets neither; SC21's ZeRO-3
    # baseline ran the same GPT model and arguments), the dropout whose masks Korthikanti et al.
    # 2022 count (Sec. 4.1); BLOOM trained without dropout.
    dropout = source in ("narayanan21", "korthikanti22")
    training = Training(
        seq_len=seq,
        precision=precision,  # type: ignore[arg-type]
        flash_attention=not legacy,
        dropout=dropout,
        compile=compiled,
        fp8_all_gather=fp8_gather,
    )
    return plan, training, framework, overrides


# --- measured value -------------------------------------------------------------------------


def _measured_tokens_per_gpu(row: dict[str, str], source: str, model: ModelSpec, seq: int) -> float:
    metric, value = row["metric"], float(row["value"])
    L, h, V, s = int(row["layers"]), int(row["hidden"]), int(row["vocab"]), seq
    n = int(row["n_gpus"])
    if metric == "tokens_per_s_per_gpu":
        return value
    if metric == "step_time_s":
        return int(row["global_batch"]) * s / (value * n)
    if metric == "tflops_per_gpu" and source in ("narayanan21", "bloom176b"):
        # Narayanan et al. 2021 Eq. 3 (recompute included), also BLOOM's Megatron-DeepSpeed formula.
        per_token = 96.0 * L * h * h * (1 + s / (6.0 * h) + V / (16.0 * L * h))
        return value * 1e12 / per_token
    if source == "megatron":
        ffn = _int(row["ffn_hidden"]) or 4 * h
        heads, kv = int(row["heads"]), int(row["kv_heads"])
        # Megatron-Core num_floating_point_operations (megatron/training/training.py, r0.8.0).
        per_token = 12.0 * L * h * h * ((1 + kv / heads + s / h) + ffn / h + V / (2.0 * L * h))
        tflops = value if metric == "tflops_per_gpu" else value * 989.0
        return tflops * 1e12 / per_token
    if metric == "mfu" and source == "korthikanti22":
        # Korthikanti et al. 2022 App. A Eq. 7 (model FLOPs, no recompute), A100 peak 312.
        per_token = 72.0 * L * h * h * (1 + s / (6.0 * h) + V / (12.0 * h * L))
        return value * 312e12 / per_token
    if metric == "mfu" and source == "megascale":
        # MegaScale's MFU is model FLOPs 6N + 12*L*h*s per token (PaLM, Chowdhery et al. 2022,
        # App. B; the same definition as gpuscale's) over the A100's 312 TFLOP/s: its Table 2
        # throughput column agrees, e.g. 0.53 x 256 x 312e12 / 39.3k tokens/s = 1.08e12 per
        # token (tests/unit/test_validation_runs.py checks every Table 2 row).
        return value * 312e12 / model_flops_per_token(model, s)
    raise LookupError(f"no FLOP definition for metric {metric} of source {source}")


def to_case(row: dict[str, str]) -> Case:
    """Row -> inputs; raises LookupError with the reason when a row cannot be predicted."""
    source = source_of(row["id"])
    notes: list[str] = []
    limits: list[str] = []
    model = _model(row, notes)
    plan, training, framework, overrides = _plan_and_training(row, model, source, notes, limits)
    fabric, nics = _fabric(row, notes)
    cluster = catalog.cluster(
        _gpu_id(row["gpu"], notes, limits),
        plan.num_gpus,
        gpus_per_node=8,
        inter=fabric,
        nics_per_node=nics,
    )
    return Case(
        id=row["id"],
        source=source,
        model=model,
        cluster=cluster,
        training=training,
        plan=plan,
        framework=framework,
        measured_tokens_per_s_per_gpu=_measured_tokens_per_gpu(
            row, source, model, training.seq_len
        ),
        assumptions=tuple(notes),
        limitations=tuple(limits),
        overrides=overrides,
    )


def with_overrides(profile: Profile, overrides: Mapping[str, Mapping[str, float]]) -> Profile:
    """``profile`` with some ``constants``/``overlap`` entries replaced (no global state)."""
    if not overrides:
        return profile
    return dataclasses.replace(
        profile,
        constants={**profile.constants, **overrides.get("constants", {})},
        overlap={**profile.overlap, **overrides.get("overlap", {})},
        attention_efficiency={
            **profile.attention_efficiency,
            **overrides.get("attention_efficiency", {}),
        },
    )


def predict(case: Case, profile: Profile) -> float:
    """Predicted tokens/s per GPU of ``case`` under ``profile``, the case's overrides on top."""
    est = estimate_plan(
        case.model, case.cluster, case.training, case.plan, with_overrides(profile, case.overrides)
    )
    return float(est.tokens_per_s[0] / case.plan.num_gpus)


def cases(rows: Iterable[dict[str, str]]) -> tuple[list[Case], list[Result]]:
    """Every row mapped to a :class:`Case`, and a skipped :class:`Result` for each row that
    cannot be (with the reason)."""
    mapped: list[Case] = []
    skipped: list[Result] = []
    for row in rows:
        try:
            mapped.append(to_case(row))
        except LookupError as exc:
            skipped.append(
                Result(
                    id=row["id"],
                    source=source_of(row["id"]),
                    measured=float("nan"),
                    skip_reason=str(exc),
                )
            )
    return mapped, skipped


def result_of(case: Case, predicted: float) -> Result:
    device = case.cluster.device
    baseline = (
        BASELINE_MFU
        * device.peak(case.training.precision)
        * 1e12
        / model_flops_per_token(case.model, case.training.seq_len)
    )
    return Result(
        id=case.id,
        source=case.source,
        measured=case.measured_tokens_per_s_per_gpu,
        predicted=predicted,
        baseline=baseline,
        framework=case.framework,
        gpu_generation=device.generation,
        num_gpus=case.plan.num_gpus,
        regime=regime_key(device.generation, case.plan, case.plan.num_gpus),
        mix=parallelism_mix(case.plan),
        params_b=total_params(case.model) / 1e9,
        fabric=case.cluster.inter.kind,
        assumptions=case.assumptions,
        limitations=case.limitations,
    )


def evaluate(
    rows: Iterable[dict[str, str]], profiles: Mapping[str, Profile] | None = None
) -> list[Result]:
    """Predict every row. ``profiles`` replaces built-in framework profiles by name (e.g. with
    refitted values); frameworks it does not name use the built-in profile."""
    rows = list(rows)
    mapped, skipped = cases(rows)
    by_id = {c.id: c for c in mapped}
    skip_by_id = {r.id: r for r in skipped}
    out: list[Result] = []
    for row in rows:
        if row["id"] in skip_by_id:
            out.append(skip_by_id[row["id"]])
            continue
        case = by_id[row["id"]]
        profile = (profiles or {}).get(case.framework) or load_profile(case.framework)
        out.append(result_of(case, predict(case, profile)))
    return out


def _mape(errors: list[float]) -> float:
    return float(np.mean(np.abs(errors))) if errors else float("nan")


def summarize(results: list[Result]) -> dict[str, Any]:
    done = [r for r in results if r.predicted is not None]
    per_source: dict[str, dict[str, Any]] = {}
    for source in dict.fromkeys(r.source for r in done):
        rs = [r for r in done if r.source == source]
        per_source[source] = {
            "rows": len(rs),
            "mape": _mape([r.error for r in rs]),
            "baseline_mape": _mape([r.baseline_error for r in rs]),
        }
    return {
        "per_source": per_source,
        "overall": {
            "rows": len(done),
            "mape": _mape([r.error for r in done]),
            "baseline_mape": _mape([r.baseline_error for r in done]),
        },
        # Rows gpuscale can express fully (no limitation recorded).
        "expressible": {
            "rows": len(full := [r for r in done if not r.limitations]),
            "mape": _mape([r.error for r in full]),
            "baseline_mape": _mape([r.baseline_error for r in full]),
        },
        "skipped": [f"{r.id}: {r.skip_reason}" for r in results if r.predicted is None],
    }
