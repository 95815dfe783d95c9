"""TensorRT-LLM's published maximum-throughput runs (``trtllm-bench throughput``), read as the
deployment each ran.

The rows are ``data/validation/serving/trtllm_perf_overview.csv``: every throughput cell of 16
stored versions of NVIDIA/TensorRT-LLM ``docs/source/performance/perf-overview.md`` (0.10 to
1.2; provenance, and what was not reachable, in ``data/validation/serving/SOURCES.md``). None of
them was used to build the model.

How a row is read, each part from the benchmark's own code or the version's own text
(:data:`LAUNCHES`):

- **All requests at once.** ``trtllm-bench throughput`` defaults to ``--concurrency -1`` ("no
  concurrency limit") and queues its whole synthetic dataset of ``num_requests`` fixed-length
  requests (``prepare_dataset.py token-norm-dist --input-stdev=0 --output-stdev=0``); the
  reported throughput is output tokens over the run's total latency, first request to last
  response. So a row is a closed loop of ``C = N = num_requests`` clients that each send one
  request.
- **The engine's limits** are trtllm-bench's tuning heuristic (:func:`engine_settings`):
  ``tensorrt_llm/bench/build/tuning.py`` ``calc_engine_setting`` / ``finetune_setting`` size
  the running cap from the KV cache the GPUs would hold for requests of the dataset's lengths
  and the token budget from it; ``bench/benchmark/utils/general.py`` ``get_settings`` raises
  the budget to at least the longest prompt plus the cap when chunked prefill is off (its
  default), and ``throughput.py`` runs the ``GUARANTEED_NO_EVICT`` capacity scheduler (the
  engine profile's ``kv_policy: reserve``).
- **KV-cache share**: the version's words ("we also use a higher KV cache percentage by setting
  ``--kv_cache_free_gpu_mem_fraction 0.95`` ... fall back to 0.90 ... on out-of-memory"), or
  trtllm-bench's default 0.90 where the version says nothing (0.12-0.14).
- **CUDA graphs** (PyTorch backend, 0.20 on): the versions' ``llm_options.yml`` pads decode
  batches to captured sizes ``[1, 2, 4, ..., 128, 256, 384, 512, 1024, ...]``
  (``cuda_graph_config.enable_padding``; :data:`OVERVIEW_GRAPH_SIZES`).
- **Parallelism**: ``TPn`` is tensor parallelism, and for an MoE model without a stated expert
  split TensorRT-LLM's default mapping: the experts tensor-parallel too (``tensorrt_llm/
  mapping.py``: "if moe_tp_size == -1 and moe_ep_size == -1: moe_tp_size = moe_world_size,
  moe_ep_size = 1"); ``DEPn`` is ``--tp n --ep n`` with attention data parallelism (the MoE
  ``llm_options.yml``'s ``enable_attention_dp: true``).
- **Weights and KV cache**: FP8 and FP4 rows are NVIDIA's ModelOpt checkpoints (or engines
  built with ``--quantization FP8``), whose KV cache is FP8 (``_KV_CACHE_MAP``: FP8 and NVFP4
  -> fp8); FP16 rows keep a 16-bit cache.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.costmodel.params import total_params
from gpuscale.specs import ModelSpec
from gpuscale.validation import DATA_DIR

ROWS_CSV = DATA_DIR / "serving" / "trtllm_perf_overview.csv"

OVERVIEW_GRAPH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)
"""``cuda_graph_config.batch_sizes`` of every PyTorch-backend version's ``llm_options.yml``."""


@dataclass(frozen=True, slots=True)
class Launch:
    """How one version of the overview ran its benchmark."""

    kv_fraction: float | None
    """``--kv_cache_free_gpu_mem_fraction``; None: the version is not read."""
    graph_sizes: tuple[int, ...] = ()
    """Captured CUDA-graph batch sizes decode batches are padded to (empty: none)."""
    reason: str = ""
    """Why the version is not read."""
    chunked_prefill: bool = False
    """Prompts split into chunks under the token budget (gptManagerBenchmark's
    ``--enable_chunked_context``); off, the budget holds one whole prompt plus the running cap
    (trtllm-bench ``get_settings``)."""


_TRT_ENGINE_095 = Launch(0.95)
_PYTORCH = Launch(0.95, OVERVIEW_GRAPH_SIZES)
LAUNCHES: dict[str, Launch] = {
    "0.10.0": Launch(
        None,
        reason="0.10 ran gptManagerBenchmark with --scheduler_policy max_utilization and chunked "
        "context at a stated max_batch_size 2048 / max_num_tokens 2048, a launch this reading "
        "does not make",
    ),
    "0.11.0": Launch(
        None,
        reason="0.11 built each engine from a per-model table of max_batch_size and "
        "max_num_tokens, which this reading does not carry",
    ),
    # trtllm-bench build + throughput; the KV share not stated: the CLI's default 0.90.
    "0.12.0": Launch(0.90),
    "0.13.0": Launch(0.90),
    "0.14.0": Launch(0.90),
    "0.15.0": _TRT_ENGINE_095,
    "0.17": _TRT_ENGINE_095,
    "0.20 (hint)": _PYTORCH,
    "0.21 (hint)": _PYTORCH,
    "1.0 (hint)": _PYTORCH,
    "1.2 (hint)": _PYTORCH,
    "unstated": _PYTORCH,
}

GH200_LEGACY_FLOW = Launch(0.95, chunked_prefill=True)
"""0.15 and 0.17 ran their GH200 cells apart: the engine from ``trtllm-bench build`` (the same
heuristic), the run by the legacy ``gptManagerBenchmark --type IFB --scheduler_policy
guaranteed_no_evict --kv_cache_free_gpu_mem_fraction 0.95 --request_rate -1.0
--enable_chunked_context`` ("Trtllm-bench has known issues on GH200"): every request at once,
the same capacity scheduler, prompts chunked under the engine's token budget."""
LEGACY_FLOW_GPUS = {"0.15.0": {"gh200"}, "0.17": {"gh200"}}
"""The versions whose overview ran these GPUs with :data:`GH200_LEGACY_FLOW`."""

GRAPHS_OFF_TABLE = "50115608725"
"""The first v0.20 table set: its own note says the ``llm_options.yml`` it shipped
(``cuda_graph_padding_enabled``) "unintentionally DISABLED CUDA graphs", so its decode ran
eagerly, which the serving model does not price for TensorRT-LLM: not read."""

MODEL_IDS: dict[str, str] = {
    "llama v3.1 8b": "llama3.1-8b",
    "llama 3.1 8b": "llama3.1-8b",
    # Llama 3 8B/70B: the Llama 3.1 architecture (same layers, widths, heads and vocabulary;
    # 3.1 changes the RoPE scaling and context length, not the per-token cost at these lengths).
    "llama v3 8b": "llama3.1-8b",
    "llama v3.1 70b": "llama3.1-70b",
    "llama 3.1 70b": "llama3.1-70b",
    "llama v3 70b": "llama3.1-70b",
    "llama v3.3 70b": "llama3.1-70b",
    "llama 3.3 70b": "llama3.1-70b",
    "llama v3.1 405b": "llama3.1-405b",
    "llama 3.1 405b": "llama3.1-405b",
    "llama v2 7b": "llama2-7b",
    "llama v2 70b": "llama2-70b",
    "mistral 7b": "mistral-7b",
    "mixtral 8x7b": "mixtral-8x7b",
    "mixtral 8x22b": "mixtral-8x22b",
    "gptj 6b": "gpt-j-6b",
    "gpt j 6b": "gpt-j-6b",
    "qwen3 30b a3b": "qwen3-30b-a3b",
    "qwen3 235b a22b": "qwen3-235b-a22b",
    "deepseek r1": "deepseek-r1",
    "deepseek r1 0528": "deepseek-r1",
    "gpt oss 20b": "gpt-oss-20b",
    "gpt oss 120b": "gpt-oss-120b",
    "llama 4 scout": "llama4-scout",
    "llama 4 maverick": "llama4-maverick",
}
"""The tables' model names (lower case, precision words and dashes dropped) -> catalog ids."""

GPU_IDS: dict[str, str] = {
    "H100": "h100-sxm",
    "H200": "h200-sxm",
    # Every GH200 header of the overview is the 96 GB HBM3 superchip: 0.15 prints "GH200 96GB
    # HBM3 CG1", 0.21 "GH200 96GB HBM3 (480GB LPDDR5X)"; 0.17's "GH200 480GB" and 0.11-0.13's
    # "GH200 120GB" name the Grace LPDDR5X beside it (the 144 GB HBM3e part would be named).
    "GH200": "gh200",
    "B200": "b200",
    "GB200": "gb200",
    "B300": "b300",
    "GB300": "gb300",
    "A100-SXM4-80GB": "a100-sxm-80gb",
    "A100-PCIE-80GB": "a100-pcie-80gb",
    "L40S": "l40s",
}
"""The tables' GPU headers (first word) -> catalog ids; the RTX 6000 Pro is not in the catalog.
Every H100/H200 of the overview is an SXM part (DGX H100/H200, "H100 80GB HBM3")."""

JOINED_UNSTATED = {"gh200"}
"""GPUs whose multi-GPU cells are not read: a GH200 superchip holds one GPU, and the overview
does not say how its TP2/TP4 GH200s were joined (an NVLink switch, as in GH200 NVL32, or the
node's network), which the collectives' price depends on."""

WEIGHTS = {"FP8": "fp8", "FP4": "nvfp4", "FP16": "fp16"}
"""Table precisions -> serving weight formats ("Mixed", 0.12-0.15's second H100 column, is not
read: the versions do not say which layers run in FP8)."""

WEIGHT_BYTES = {"fp8": 1.0, "nvfp4": 0.5, "fp16": 2.0}
"""Bytes per weight as trtllm-bench's heuristic counts them (``BYTES_PER_ELEM``: FP8 and FP8
block scales 1, NVFP4 0.5, unquantized 2)."""

MOST_REQUESTS = 4096
"""The heuristic's cap on the running requests ("to avoid decoder buffer size becoming too
large"), and :data:`MOST_TOKENS` on the token budget (the activation buffers)."""
MOST_TOKENS = 32768


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """The engine limits trtllm-bench launches a run with."""

    max_batch_size: int
    max_num_tokens: int


def _round_requests(raw: float) -> int:
    # finetune_setting: "slightly optimistic", at least 64, in steps of 32/128/256.
    if raw < 256:
        return max(64, 32 * math.ceil(raw / 32))
    if raw < 1024:
        return 128 * math.ceil(raw / 128)
    return 256 * math.ceil(raw / 256)


def _round_tokens(raw: float) -> int:
    # finetune_setting: at least 2048 "to ensure Ctx/Gen overlap efficiency", in steps of
    # 256/512/1024.
    if raw < 4096:
        return max(2048, 256 * math.ceil(raw / 256))
    if raw < 8192:
        return 512 * math.ceil(raw / 512)
    return 1024 * math.ceil(raw / 1024)


def engine_settings(
    model: ModelSpec,
    gpu_gib: float,
    tp: int,
    pp: int,
    input_len: int,
    output_len: int,
    weights: str,
    kv_bytes: float,
    kv_fraction: float,
    attention_dp: bool = False,
    chunked_prefill: bool = False,
) -> BenchSettings | None:
    """``max_batch_size`` and ``max_num_tokens`` of a trtllm-bench run that states neither: the
    KV cache left on ``tp x pp`` GPUs of ``gpu_gib`` each after the weights (every parameter at
    the format's bytes), at least one KV head per TP rank, holds so many requests of
    ``input_len + output_len`` tokens; the cap is that (at most 4,096) per pipeline stage,
    rounded up, and the budget the cap's tokens at the lengths' ratio (at most 32,768), rounded
    up, then at least one prompt plus the cap unless prompts are chunked. With attention DP each
    rank holds its own batch and cache: one GPU's memory less its share of the weights. None:
    not one request fits (trtllm-bench refuses the run)."""
    kv_heads = max(tp, model.num_kv_heads)
    per_token_gib = 2 * model.num_layers * kv_heads * model.head_dim * kv_bytes / 1024**3
    weights_gib = total_params(model) * WEIGHT_BYTES[weights] / 1024**3
    if attention_dp:
        memory_gib, weights_gib = gpu_gib * pp, weights_gib / tp
    else:
        memory_gib = gpu_gib * tp * pp
    requests = (memory_gib - weights_gib) * kv_fraction / (per_token_gib * (input_len + output_len))
    if requests < 1:
        return None
    raw_bs = min(requests, MOST_REQUESTS) / pp
    raw_tokens = min(raw_bs * (1 + input_len / output_len), MOST_TOKENS)
    max_bs = _round_requests(raw_bs)
    tokens = _round_tokens(raw_tokens)
    return BenchSettings(max_bs, tokens if chunked_prefill else max(tokens, input_len + max_bs))


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One published throughput cell and the deployment it is read as."""

    version: str
    table: str
    model_name: str
    gpu_name: str
    precision: str
    parallel: str
    tp: int
    pp: int
    ep: int
    attention_dp: int
    input_len: int
    output_len: int
    num_requests: int | None
    measured: float
    """Total output tokens/s of the deployment (per-GPU figures multiplied by its GPUs)."""
    model: str | None
    gpu: str | None
    weights: str | None

    @property
    def label(self) -> str:
        return (
            f"{self.version:11s} {self.model_name[:20]:20s} {self.gpu_name[:6]:6s} "
            f"{self.parallel:9s} {self.precision:4s} {self.input_len}/{self.output_len}"
        )

    @property
    def launch(self) -> Launch | None:
        """How the row's version ran it (None: no launch read for the version)."""
        if self.gpu in LEGACY_FLOW_GPUS.get(self.version, ()):
            return GH200_LEGACY_FLOW
        return LAUNCHES.get(self.version)

    def not_read(self) -> str:
        """Why the row is not predicted ('' when it is)."""
        launch = self.launch
        if launch is None or launch.kv_fraction is None:
            return launch.reason if launch else f"version {self.version} has no launch read"
        if self.table.split(";")[0] == GRAPHS_OFF_TABLE:
            return "v0.20's first table ran with CUDA graphs unintentionally off"
        if self.model is None:
            return f"model {self.model_name!r} is not in the catalog"
        if self.gpu is None:
            return f"GPU {self.gpu_name!r} is not in the catalog"
        if self.gpu in JOINED_UNSTATED and self.tp * self.pp > 1:
            return f"how the GPUs of a {self.parallel} run on {self.gpu_name} were joined is not stated"
        if self.weights is None:
            return f"precision {self.precision!r} is not read"
        if self.num_requests is None:
            return "the version states no request count for these lengths"
        spec = catalog.model(self.model)
        if spec.attention_chunks_unpriced(self.input_len + self.output_len):
            return (
                f"{self.input_len + self.output_len:,} tokens span several of {spec.name}'s "
                f"{spec.attention_chunk_size:,}-token attention chunks, which are not priced"
            )
        return ""


def _model_key(name: str) -> str:
    name = re.sub(r"\b(FP8|FP4)\b", "", name).replace("-", " ").lower()
    return " ".join(name.replace("llama v4", "llama 4").split())


def _row(r: dict[str, str]) -> BenchRow:
    tp = int(r["tp"])
    pp = int(r["pp"] or 1)
    dep = r["parallel_label"].startswith("DEP")
    per_gpu = "per gpu" in r["metric"].lower()
    value = float(r["value"]) * (tp * pp if per_gpu else 1)
    header = r["gpu_header"].split("*")[0].split()[0] if r["gpu_header"] else ""
    return BenchRow(
        version=r["version"],
        table=r["ids"],
        model_name=r["model"],
        gpu_name=r["gpu_header"],
        precision=r["precision"],
        parallel=r["parallel_label"],
        tp=tp,
        pp=pp,
        ep=int(r["ep"] or 1),
        attention_dp=tp if dep else 1,
        input_len=int(r["isl"]),
        output_len=int(r["osl"]),
        num_requests=int(r["num_requests"]) if r["num_requests"] else None,
        measured=value,
        model=MODEL_IDS.get(_model_key(r["model"])),
        gpu=GPU_IDS.get(header),
        weights=WEIGHTS.get(r["precision"]),
    )


def read_rows(path: Path = ROWS_CSV) -> list[BenchRow]:
    """Every throughput cell of the overview, read (:meth:`BenchRow.not_read` says which are
    not predicted, and why)."""
    with path.open(newline="", encoding="utf-8") as f:
        return [_row(r) for r in csv.DictReader(f)]


def infer_arguments(row: BenchRow) -> dict[str, Any] | None:
    """The ``gpuscale.api.serving.infer`` call of ``row``'s run (None where trtllm-bench's own
    heuristic finds no room for one request)."""
    if row.not_read() or row.model is None or row.gpu is None or row.weights is None:
        raise ValueError(f"{row.label} is not read: {row.not_read()}")
    launch = row.launch
    assert launch is not None and launch.kv_fraction is not None and row.num_requests is not None
    spec = catalog.model(row.model)
    kv = "fp16" if row.weights == "fp16" else "fp8"
    s = engine_settings(
        spec, catalog.gpu(row.gpu).memory_gib, row.tp, row.pp, row.input_len, row.output_len,
        row.weights, 2.0 if kv == "fp16" else 1.0, launch.kv_fraction, row.attention_dp > 1,
        launch.chunked_prefill,
    )  # fmt: skip
    if s is None:
        return None
    options: dict[str, Any] = {
        "max_num_seqs": s.max_batch_size,
        "max_num_batched_tokens": s.max_num_tokens,
        "memory_fraction": launch.kv_fraction,
        "chunked_prefill": launch.chunked_prefill,
    }
    if launch.graph_sizes:
        # The engine keeps the sizes it can run (EngineProfile.decode_graph_sizes).
        options["cuda_graph_batch_sizes"] = launch.graph_sizes
    return {
        "model": row.model,
        "gpu": row.gpu,
        "engine": "tensorrt-llm",
        "weights": row.weights,
        "kv_dtype": kv,
        "input_len": row.input_len,
        "output_len": row.output_len,
        "concurrency": row.num_requests,
        "num_requests": row.num_requests,
        "tp": row.tp,
        "pp": row.pp,
        "ep": row.ep,
        "attention_dp": row.attention_dp,
        "engine_options": options,
    }
