"""Megatron-Bridge's published pre-training throughput, predicted as `estimate` calls.

``data/validation/megatron_bridge_pretraining.csv`` holds every pre-training row of
Megatron-Bridge's performance summaries (NVIDIA-NeMo/Megatron-Bridge
``docs/performance-summary.md`` and ``docs/performance-summary-archive.md`` @067f987d,
2026-08-22: NeMo containers 25.09 to 26.08), measured tokens/s per GPU on DGX H100, B200, B300,
GB200 and GB300, dense Llama 3 and MoE models (DeepSeek-V3, gpt-oss-120b, Qwen3). The training
model was never built or checked on them: no mixture-of-experts run and no Blackwell run was in
its validation set before, so every figure here is held out.

How a row becomes a call (one rule each; the reason a row cannot be one is raised as
``LookupError``):

- model: the catalog entry of the table's name (:data:`MODEL_IDS`). Llama 3 8B / 70B have the
  architecture of the catalog's Llama 3.1 models (the same config.json shapes; 3.1 changed the
  RoPE scaling and context, not the FLOPs of an 8k sequence).
- DeepSeek-V3 trains with one multi-token-prediction module in these recipes (Megatron-Bridge
  ``set_deepseek_v3_pipeline_model_parallel_layout``: ``mtp_num_layers`` defaults to 1, placed
  with the loss on the last stage; DeepSeek-V3 report, arXiv:2412.19437, Sec. 2.2: one
  transformer block per depth): priced as a 62nd MoE decoder layer. Its own output head and
  ``eh_proj`` are not priced: Megatron's FLOP count in the tables (model TFLOP/s over tokens/s)
  is 4.3% higher with MTP than without (25.11 GB300 w/o MTP 0.2497 TFLOP per token, 26.08
  0.2600), of which the extra layer is ~1.6%. The 25.11 rows marked "w/o MTP" have 61 layers.
- pipeline split: even when ``pp x vp`` divides the layers; otherwise with the embedding and the
  loss each counted as a layer of the first and last stage (Megatron's account-for-embedding/loss
  split), otherwise not expressible. Megatron-Bridge's DeepSeek-V3 layouts differ in where the
  odd layers go (``Et*4|(t*4|)*14tmL``: embedding plus 4 decoder layers first, 1 decoder layer,
  MTP and loss last, against embedding plus 3 and 2 plus MTP here); the slowest stage holds 4
  layer slots either way at 16 stages.
- GPUs: ``DGX-H100`` -> h100-sxm, ``DGX-B200`` -> b200, ``DGX-B300`` -> b300, ``DGX-GB200`` ->
  gb200, ``DGX-GB300`` -> gb300. NVLink domain of the GB200/GB300 jobs: 64 GPUs of a 72-GPU
  rack, or the whole job when smaller (an allocation assumption: the jobs are 64 or 256 GPUs,
  whole racks of 72 do not divide them, and 64 is the largest power-of-two share of a rack).
- network: one NIC per GPU at the system's rate: ConnectX-7 400 Gb/s InfiniBand on DGX H100,
  DGX B200 and GB200 NVL72, ConnectX-8 800 Gb/s on DGX B300 and GB300 NVL72 (the systems'
  datasheets).
- experts: each whole on its rank (``expert_tensor_parallel_size = 1`` in every MoE recipe of
  ``perf_recipes/`` and ``recipes/qwen/h100/qwen3_moe.py``), so with TP > 1 the expert-parallel
  group folds over the tensor-parallel ranks (``etp`` 1).
- data parallelism: Megatron's distributed optimizer (ZeRO-1; Megatron-Bridge
  ``recipes/common.py`` sets ``use_distributed_optimizer=True``), or Megatron-FSDP
  (``optim_grads_params``, ZeRO-3) where the FSDP column is non-zero.
- precision: BF16 -> bf16; FP8 / FP8-CS (per-tensor current scaling) -> fp8; MXFP8 / FP8-MX ->
  mxfp8; NVFP4 -> nvfp4; H100 blockwise FP8 (128x128 weights) -> fp8, at the same tensor rate.
- stack: the ``megatron`` profile (Megatron-Core with Transformer Engine, every overlap on).

- gradients: bf16 buffer and reduction (``grad_reduce_in_bf16``): every release's performance
  scripts set ``cfg.ddp.grad_reduce_in_fp32 = False`` for every model (25.09: the YAMLs'
  ``grad_reduce_in_fp32: false``; 25.11-26.06.01: ``scripts/performance/configs/<model>/
  *_llm_pretrain.py``; 26.08: ``perf_recipes/_common.py`` ``_benchmark_common``).
- recipe settings (:func:`recipe_options`, from ``megatron_bridge_recipe_settings.csv``: the
  recipe each row ran, read in Megatron-Bridge's code at the commit of its release, file and
  line per row): the cross-entropy (``cross_entropy_fusion_impl`` "te" -> ``loss="te"``, the
  common perf override in every release) and the recompute (``recompute_granularity``
  selective with its ``recompute_modules``; full with one layer per checkpoint), the CPU
  activation offload (``cpu_offloading_num_layers``) and the EP all-to-all overlap
  (``moe_a2a_overlap`` -> ``ep_overlap``). Where the
  recipe at that commit does not have the row's published layout (27 rows: the run used
  overrides not in the code), only the loss is read.

Not priced, in any row: fine-grained activation offloading (``offload_modules``), full
recompute of some layers of a stage (``recompute_method`` block), the MoE paged stash,
CUDA-graph capture (the later releases' full-iteration graphs), HybridEP dispatch, FP8
attention (``fp8_dot_product_attention``), the CuTeDSL fused grouped MLP
(``cutedsl_fused_grouped_mlp``), and the 25.09 token-dropping runs' capacity factor (with
forced load balance a dropless and a dropping run route the same tokens). A run under one of the memory settings is
not checked for memory (:attr:`BridgeCase.memory_unchecked`).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.errors import InputError
from gpuscale.specs.training import DEFAULT_RECOMPUTE_MODULES
from gpuscale.validation import DATA_DIR
from gpuscale.validation.error_summary import Summary, error_summary

FILE = "megatron_bridge_pretraining.csv"
SETTINGS_FILE = "megatron_bridge_recipe_settings.csv"

SOURCE = (
    "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md and "
    "docs/performance-summary-archive.md @067f987df03b (2026-08-22), pre-training tables"
)

MODEL_IDS: Mapping[str, str] = {
    "LLAMA3_8B": "llama3.1-8b",
    "LLAMA3_70B": "llama3.1-70b",
    "LLAMA3.1_405B": "llama3.1-405b",
    "DeepSeekV3": "deepseek-v3",
    "GPT OSS 120B": "gpt-oss-120b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b",
    "Qwen3_235B_a22B": "qwen3-235b-a22b",
}

NOT_EXPRESSIBLE: Mapping[str, str] = {
    "Nemotron_3_Nano": "hybrid Mamba-2 / attention MoE model: Mamba layers are not in the model",
    "Nemotron_3_Super": "hybrid Mamba-2 / attention MoE model: Mamba layers are not in the model",
    "Nemotron_3_Ultra": "hybrid Mamba-2 / attention MoE model: Mamba layers are not in the model",
    "Nemotron_3_5_Lightning": "hybrid Mamba-2 / attention MoE model: Mamba layers are not in "
    "the model",
    "DeepSeekV4 Flash": "DeepSeek-V4 is not in the catalog (no published config.json on file)",
    "Kimi_K2": "trained with the Muon optimizer, whose step the model does not price",
}

GPU_IDS: Mapping[str, str] = {
    "DGX-H100": "h100-sxm",
    "DGX-B200": "b200",
    "DGX-B300": "b300",
    "DGX-GB200": "gb200",
    "DGX-GB300": "gb300",
}

FABRICS: Mapping[str, str] = {
    "DGX-H100": "ib-ndr400",
    "DGX-B200": "ib-ndr400",
    "DGX-GB200": "ib-ndr400",
    "DGX-B300": "ib-xdr800",
    "DGX-GB300": "ib-xdr800",
}

NVL72_EP_DOMAIN = 64
"""GPUs of one NVL72 rack a GB200/GB300 job of 64 or 256 GPUs is assumed to use (module
docstring)."""

DEEPSEEK_MTP_LAYERS = 1


@dataclass(frozen=True)
class BridgeCase:
    """One measured row as the arguments of :func:`gpuscale.estimate`."""

    id: str
    release: str
    system: str
    model: str
    variant: str
    """The table's parenthesis after the model name ("tokendrop", "w/o MTP"), or ''."""
    moe: bool
    measured: float
    """Tokens/s per GPU as published."""
    model_arg: Any
    kwargs: Mapping[str, Any]
    notes: tuple[str, ...]
    memory_unchecked: str = ""
    """Why the memory model's verdict is not compared with the run ('' when it is): a memory
    setting of the recipe the model does not price, or no recipe read."""


@dataclass(frozen=True)
class BridgeResult:
    case: BridgeCase
    predicted: float
    fits: bool

    @property
    def error(self) -> float:
        return self.predicted / self.case.measured - 1.0


def load(path: Path | None = None) -> list[dict[str, str]]:
    with (path or DATA_DIR / FILE).open(newline="") as fh:
        return list(csv.DictReader(fh))


def load_settings(path: Path | None = None) -> dict[str, dict[str, str]]:
    """The recipe settings of every row, by row id."""
    with (path or DATA_DIR / SETTINGS_FILE).open(newline="") as fh:
        return {row["id"]: row for row in csv.DictReader(fh)}


def setting(text: str) -> str:
    """A setting as the recipe leaves it: ``default:<v>`` is the provider's default ``v``."""
    return text.removeprefix("default:").strip()


def recipe_options(settings: Mapping[str, str]) -> tuple[dict[str, Any], str]:
    """The ``estimate`` arguments a row's recipe settings give, and why its memory is not
    checked ('' when it is). One rule per setting (module docstring)."""
    options: dict[str, Any] = {}
    fused = setting(settings["cross_entropy_loss_fusion"]) == "True"
    if fused and setting(settings["cross_entropy_fusion_impl"]) == "te":
        options["loss"] = "te"
    if settings["layout_check"] != "matches":
        return (
            options,
            f"recipe at the release's commit has another layout ({settings['layout_check']})",
        )
    granularity = setting(settings["recompute_granularity"])
    unpriced: list[str] = []
    if granularity == "selective":
        modules = setting(settings["recompute_modules"])
        # Megatron-Core reads recompute_modules None as its default (TransformerConfig)
        names = [] if modules in ("[]", "") else modules.split()
        if modules == "None":
            names = list(DEFAULT_RECOMPUTE_MODULES)
        options["recompute"] = "selective"
        options["recompute_modules"] = ",".join(names) or "none"
    elif granularity == "full":
        method, layers = (
            setting(settings["recompute_method"]),
            setting(settings["recompute_num_layers"]),
        )
        if method == "uniform" and layers == "1":
            options["recompute"] = "full"
        else:
            unpriced.append(f"full recompute of {layers} layers a stage (method {method})")
    if setting(settings["cpu_offloading"]) == "True":
        # Megatron-Core --cpu-offloading-num-layers (Transformer Engine's CPU offload); the
        # recipes offload activations only (cpu_offloading_activations True, weights False).
        if setting(settings["cpu_offloading_activations"]) == "True":
            options["activation_offload_layers"] = int(
                setting(settings["cpu_offloading_num_layers"])
            )
        else:
            unpriced.append("CPU offload without its activations")
    if setting(settings["fine_grained_activation_offloading"]) == "True":
        unpriced.append(f"activation offloading of {setting(settings['offload_modules'])}")
    if setting(settings["moe_a2a_overlap"]) == "True":
        # Megatron-Core --overlap-moe-expert-parallel-comm with --delay-wgrad-compute (the
        # performance scripts' moe_a2a_overlap, scripts/performance/utils/overrides.py)
        options["ep_overlap"] = True
    if setting(settings["moe_paged_stash"]) == "True":
        unpriced.append("MoE paged stash")
    return options, "; ".join(unpriced) + (" (not priced)" if unpriced else "")


def _int(text: str, default: int) -> int:
    text = text.strip()
    return default if text in ("", "n/a") else int(text)


def precision_of(text: str) -> str:
    upper = text.upper()
    if "NVFP4" in upper:
        return "nvfp4"
    if "MX" in upper:
        return "mxfp8"
    if "FP8" in upper:
        return "fp8"
    if upper == "BF16":
        return "bf16"
    raise LookupError(f"precision {text!r} not read")


def _split(layers: int, stages: int) -> dict[str, bool]:
    if layers % stages == 0:
        return {}
    if (layers + 2) % stages == 0:
        return {"embedding_as_layer": True, "loss_as_layer": True}
    raise LookupError(
        f"pp x vp = {stages} splits neither the {layers} layers nor them with the embedding "
        "and loss as layers; the recipe's layout is not expressible"
    )


def to_case(row: Mapping[str, str], settings: Mapping[str, str] | None = None) -> BridgeCase:
    """Row -> :class:`BridgeCase`, with its recipe's ``settings`` (a row of
    :func:`load_settings`) where given; raises ``LookupError`` with the reason it cannot be
    one."""
    name, _, variant = row["table_model"].partition(" (")
    name = name.strip()
    if name in NOT_EXPRESSIBLE:
        raise LookupError(NOT_EXPRESSIBLE[name])
    if name not in MODEL_IDS:
        raise LookupError(f"model {name!r} not mapped")
    spec = catalog.model(MODEL_IDS[name])
    notes: list[str] = []
    if name == "DeepSeekV3" and "w/o MTP" not in variant:
        spec = dataclasses.replace(spec, num_layers=spec.num_layers + DEEPSEEK_MTP_LAYERS)
        notes.append("MTP module priced as a 62nd MoE layer")
    if "tokendrop" in variant:
        notes.append("token-dropping run priced as dropless (forced load balance)")
    n = int(row["n_gpus"])
    tp, pp, cp = _int(row["tp"], 1), _int(row["pp"], 1), _int(row["cp"], 1)
    vp, ep = _int(row["vp"], 1), _int(row["ep"], 1)
    system = row["system"]
    kwargs: dict[str, Any] = {
        "gpu": GPU_IDS[system],
        "gpus": n,
        "inter": FABRICS[system],
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "vp": vp,
        "ep": ep,
        "etp": 1 if spec.num_experts > 1 else tp,
        "mbs": _int(row["mbs"], 1),
        "gbs": int(row["gbs"]),
        "seq": int(row["seq"]),
        "precision": precision_of(row["precision"]),
        "zero": 3 if _int(row["fsdp"], 0) > 0 else 1,
        "sequence_parallel": tp > 1,
        "framework": "megatron",
        "grad_reduce_in_bf16": True,
    }
    if system in ("DGX-GB200", "DGX-GB300"):
        kwargs["gpus_per_node"] = min(n, NVL72_EP_DOMAIN)
    if pp * vp > 1:
        kwargs.update(_split(spec.num_layers, pp * vp))
    unchecked = "no recipe settings read"
    if settings is not None:
        options, unchecked = recipe_options(settings)
        kwargs.update(options)
    return BridgeCase(
        id=row["id"],
        release=row["release"],
        system=system,
        model=name,
        variant=variant.rstrip(")"),
        moe=spec.num_experts > 1,
        measured=float(row["tokens_per_s_per_gpu"]),
        model_arg=spec,
        kwargs=kwargs,
        notes=tuple(notes),
        memory_unchecked=unchecked,
    )


Estimate = Callable[[BridgeCase], tuple[float, bool]]
"""Prices a case: tokens/s per GPU and whether it fits (the benchmark passes
``gpuscale.api.estimate``; this layer sits below the API)."""


def evaluate(
    rows: Iterable[Mapping[str, str]],
    estimate: Estimate,
    settings: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[BridgeResult], list[tuple[str, str]]]:
    """Predict every expressible row (with its recipe's settings, by id, where given); the
    others as (id, reason)."""
    results: list[BridgeResult] = []
    skipped: list[tuple[str, str]] = []
    for row in rows:
        try:
            case = to_case(row, None if settings is None else settings.get(row["id"]))
            predicted, fits = estimate(case)
        except (LookupError, InputError) as exc:
            skipped.append((row["id"], str(exc)))
            continue
        results.append(BridgeResult(case, predicted, fits))
    return results, skipped


def summarize(results: Iterable[BridgeResult]) -> Summary:
    return error_summary(r.error for r in results)
