"""A measured serving row's columns read as values: where it was measured (its source and day),
the client's concurrency, the engine's parallelism and the weight format it ran. The readings of
the rows (``serving_rows``, ``serving_clients``, ``serving_launches``, ``serving_recipes``) build
on these."""

from __future__ import annotations

import re

from gpuscale import catalog

SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}


ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang", "atom": "atom"}


def _int(v: str | None, default: int = 1) -> int:
    return int(v) if v not in ("", None) and int(v) > 0 else default


def parallelism(r: dict[str, str], prefix: str = "") -> dict[str, int]:
    """GPUs per engine instance (``tp``: all GPUs of one stage), attention-DP ranks and EP of
    row ``r``'s aggregated engine (``prefix=""``) or its prefill/decode workers."""
    # aiconfigurator: GPUs per instance = tp * pp * attention_dp; moe_tp * moe_ep spans them.
    tp = _int(r[f"{prefix}tp_size"])
    dp = _int(r[f"{prefix}attention_dp_size"])
    ep = _int(r[f"{prefix}moe_ep_size"])
    moe = _int(r[f"{prefix}moe_tp_size"]) * ep
    launch = re.search(r"_tp(\d+)_ep(\d+)_", r["id"])
    flags = (int(launch.group(1)), int(launch.group(2))) if launch else None
    moe_tp = _int(r[f"{prefix}moe_tp_size"])
    gpu = SYSTEMS.get(r["system"])
    node = catalog.default_gpus_per_node(gpu) if gpu else 0
    if (
        flags is None
        and r["silicon_data_source"].startswith(DB_DUMP)
        and moe_tp > 1
        and node
        and tp * dp > node
    ):
        # AIConfigurator's dump of InferenceX's database writes a launch as the 2026-04-06
        # export does (moe_tp x moe_ep = TP x EP, tp_size x attention_dp the same product) but
        # its ids carry no launch flags: moe_tp is the launch's TP. Its config 181 (TensorRT-LLM
        # DeepSeek-R1 H200, 2025-12-15: tp_size 64, moe 8 x 8) ran InferenceX's
        # `dsr1-fp8-h200-trt` entry of .github/configs/nvidia-master.yaml at f6a9d0b6a,
        # `{ tp: 8, ep: 8 }` on one 8-GPU H200 node (`multinode: false`). Only where the
        # product exceeds one node, as no aggregated engine of the dump's does: within a node,
        # moe_tp x moe_ep = tp_size x attention_dp is also how expert TP x EP writes its GPUs
        # (moe 2 x 4 on 8 GPUs).
        flags = (moe_tp, ep)
    if not prefix and flags and ep > 1:
        gpus, launch_ep = flags
        if tp * dp == moe == gpus * launch_ep and launch_ep > 1:
            # The InferenceX export of 2026-04-06 writes a `--tp 8 --ep 8` launch (8 GPUs) as
            # 64 GPUs: tp_size x attention_dp = moe_tp x moe_ep = TP x EP. The 2026-03-25
            # export of the same measurements (identical TTFT and TPOT) writes 8 GPUs (tp 8,
            # or attention DP 8 with tp 1; moe 1 x 8), so the id's launch flags give the GPUs.
            # The recorded attention width tp_size stays: attention DP = GPUs / tp_size (1
            # where tp_size was written as TP x EP).
            tp_att = min(tp, gpus)
            tp, dp, ep = tp_att, gpus // tp_att, launch_ep
            moe = gpus
    if moe > tp * dp and moe % tp == 0:
        # vLLM rows leave attention_dp empty when --data-parallel-size runs attention DP under
        # an expert group wider than TP: the MoE group size gives the GPUs.
        dp = moe // tp
    return {"tp": tp * dp, "attention_dp": dp, "ep": ep}


def source_fields(r: dict[str, str]) -> dict[str, str]:
    """The ``key=value`` fields of the row's ``silicon_data_source`` (``;``-separated)."""
    out = {}
    for part in r["silicon_data_source"].split(";"):
        key, _, value = part.strip().partition("=")
        out[key] = value
    return out


def measured_day(r: dict[str, str]) -> str:
    """The row's measurement day, ``YYYY-MM-DD`` from ``measured=`` (empty when not stated)."""
    return source_fields(r).get("measured", "")[:10]


def concurrency(r: dict[str, str]) -> int | None:
    """The client's concurrency, or None when the row does not state it.

    ``silicon_concurrency`` (the benchmark client's setting) first. ``batch_size`` is
    AIConfigurator's per-attention-DP-rank batch, not the client's concurrency: its estimator
    reads concurrency = batch_size x attention_dp_size (``aic-core/.../sdk/backends/
    base_backend.py`` line 712, ``global_bs = bs * model.config.attention_dp_size``), and the
    rows agree (e.g. DeepSeek-R1 TP8 attention-DP 8 at silicon_concurrency 256: batch 32)."""
    src = source_fields(r)
    if "silicon_concurrency" in src:
        return int(src["silicon_concurrency"])
    if r["batch_size"]:
        return int(r["batch_size"]) * _int(r["attention_dp_size"])
    return None


def decode_slots(r: dict[str, str]) -> int:
    """AIConfigurator's reading of a disaggregated row's decode batch: its InferenceX adapter
    (``_worker``) sets decode batch = concurrency / (decode workers x attention-DP ranks)."""
    dp = parallelism(r, "decode_")["attention_dp"]
    return _int(r["decode_batch_size"]) * _int(r["decode_num_workers"]) * dp


INFERENCEX_EXPORTS = ("source_file=2026-03-25.csv", "source_file=2026-04-06.csv")
"""The InferenceX CSV exports in the file (SOURCES.md)."""


DB_DUMP = "db-dump/"


INFERENCEX_SOURCES = (*INFERENCEX_EXPORTS, DB_DUMP)
"""Rows run by InferenceX's workflows: its exports, and AIConfigurator's database dump of the
same runs. Aggregated: 63 of the dump's 78 rows repeat an export row's measurement to the digit
(same engine, system, lengths, concurrency, TTFT and TPOT; SGLang and TensorRT-LLM DeepSeek-R1
written as ``deepseek-ai/DeepSeek-V3``, vLLM MiniMax-M2.5), and every dump row carries an
InferenceX ``workflow_run_id`` and image: they ran InferenceX's scripts and client
(``INFERENCEX_RANGE_RATIO``, ``INFERENCEX_ROUNDS``). Disaggregated: the dump's rows repeat the
exports' measurements to the digit (the ``twin`` class); its images are the
``dynamo-trt``/``dynamo-sglang`` entries of InferenceX ``.github/configs/nvidia-master.yaml``."""


def sa_bench(r: dict[str, str]) -> bool:
    """Whether the row is a disaggregated InferenceX run, measured by sa-bench or a client of
    the same lengths (``disagg_client_rounds`` gives the count of each)."""
    return r["mode"] == "disagg" and r["silicon_data_source"].startswith(INFERENCEX_SOURCES)


AIC_GAP_SOURCE = "aic-auto-gap-analysis"
"""``silicon_data_source`` of AIConfigurator's gap-analysis rows (``source_file=.../aic-auto-gap-
analysis/data/<system>/<engine>/<version>/<model>.csv``)."""


def weights(r: dict[str, str]) -> str:
    """The weight format row ``r`` ran: the one its checkpoint stores when ``model_path`` is a
    published pre-quantized checkpoint (``catalog.checkpoint_weights``: an engine loads a
    serialized checkpoint in its stored format; the rows' ``fp8`` on DeepSeek-R1/V3,
    MiniMax-M2.5 and Qwen3-235B-A22B-FP8, whose config.json has ``weight_block_size``
    [128, 128], and ``nvfp4`` on gpt-oss-120b, whose checkpoint is MXFP4, name the benchmark's
    precision class, not the stored format); else the row's ``gemm_quant_mode`` (a 16-bit
    checkpoint the engine quantizes online), ``bf16`` when empty."""
    return catalog.checkpoint_weights(r["model_path"]) or r["gemm_quant_mode"] or "bf16"
