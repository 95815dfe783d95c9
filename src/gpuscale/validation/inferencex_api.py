"""Read InferenceX's published DeepSeek-R1 benchmark records into ``gpuscale.api.infer`` arguments.

The records (``data/validation/serving/inferencex_api_dsr1.csv``, SOURCES.md there) are the
InferenceX app's API snapshot ``packages/app/cypress/fixtures/api/benchmarks.json``
(SemiAnalysisAI/InferenceX-app at :data:`APP_COMMIT`): one measured benchmark of InferenceX's
workflow each, on MI300X/MI325X/MI355X, H100/H200, B200/B300 and GB200/GB300, aggregated and
disaggregated, with and without MTP. They are a held-out set: none of them was used to build or
tune the model, and this module never chooses a reading by a record's measured latency.

Each record states its deployment outright (``spec_method``, ``disagg``, per stage ``tp``,
``ep``, ``dp_attention`` and, disaggregated, the worker counts), so what the InferenceX CSV
exports leave out (``gpuscale.validation.serving_rows``: the ``twin``/``recipe`` classes) is
not guessed here. The rest is read with the rules ``serving_rows`` already applies to InferenceX
runs, called on the record written in that module's row schema (:func:`as_serving_row`):
the client's lengths and request count (``client_lengths``, ``client_requests``: uniform over
[0.8 L, L], 10 x C requests; disaggregated, the count of the launch's client, ``serving_clients.
disagg_client_rounds``: sa-bench's 5 x C, Dynamo's 8 x C, MoRI's 10 x C), the single-node launch
options of its InferenceX scripts (``launch_options``: TensorRT-LLM attention-DP balancing, the
H200 DeepSeek-R1 TensorRT-LLM and SGLang scripts by date), the H200 TensorRT-LLM MTP sweeps
(``inferencex_sweeps.speculative_reading``), the draft counts of the single-node MTP launch
scripts for records that state MTP (``inferencex_sweeps.script_draft_tokens``), the draft counts
of the multi-node MTP recipes (``inferencex_multinode.multinode_draft_tokens``), the
disaggregated recipes' decode caps (``_decode_cap``; multi-node non-MTP entries
``inferencex_multinode.multinode_decode_cap``), prefill
attention DP and KV dtype (``_decode_cap``, ``disagg_kv_dtype``; the SGLang recipes' stages:
``inferencex_multinode.recipes_kv_dtype``, and with them their dense FP8 GEMM kernel,
``recipes_fp8_gemm``; the MoRI-SGLang launches: ``inferencex_mori_launch.mori_launch``) and
engine-version options (``engine_version_options``). A record that cannot be expressed gets a one-line reason
(:data:`NOT_EXPRESSIBLE` and :attr:`ApiRow.reason`).
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine as serving_engine
from gpuscale.errors import InputError
from gpuscale.validation.client_tokenizer import default_server_prompts, server_prompt_lengths
from gpuscale.validation.inferencex_decode_caps import default_decode_caps
from gpuscale.validation.inferencex_mori_launch import mori_launch
from gpuscale.validation.inferencex_multinode import (
    default_frontends,
    default_plain_recipes,
    default_prefill_chunks,
    default_sglang_stages,
    default_trt_stages,
    entry_runs,
    multinode_decode_cap,
    multinode_draft_tokens,
    multinode_prefill_chunk,
    multinode_recv_interval,
    recipe_files,
    recipes_decode_routing,
    recipes_fp8_gemm,
    recipes_kv_dtype,
    recipes_trt_stages,
)
from gpuscale.validation.inferencex_sglang_launch import (
    amd_sglang_budget,
    blackwell_sglang_expert_parallel,
    blackwell_sglang_launch,
)
from gpuscale.validation.inferencex_sweeps import (
    script_draft_tokens,
    speculative_reading,
)
from gpuscale.validation.inferencex_tables import NO_TABLES, InferenceXTables
from gpuscale.validation.serving_clients import client_lengths, client_requests
from gpuscale.validation.serving_fields import (
    DB_DUMP,
    ENGINES,
    INFERENCEX_SOURCES,
    concurrency,
    measured_day,
    parallelism,
)
from gpuscale.validation.serving_launches import (
    add_engine_options,
    add_launch,
    disagg_kv_dtype,
    engine_version_options,
    launch_options,
    stated_kv_cache_dtype,
    stated_memory,
)
from gpuscale.validation.serving_recipes import (
    Recipes,
    _candidates,
    _decode_cap,
    entry_draft_tokens,
    recipe_prefill_dp,
)
from gpuscale.validation.serving_rows import ServingRow

API_FILE = "inferencex_api_dsr1.csv"
APP_REPO = "SemiAnalysisAI/InferenceX-app"
APP_PATH = "packages/app/cypress/fixtures/api/benchmarks.json"
APP_COMMIT = "3a600f1d9ce155536d52e2f58f744f27a301aac9"

COLUMNS = [
    "page_offset",
    "hardware",
    "framework",
    "model",
    "precision",
    "spec_method",
    "disagg",
    "is_multinode",
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_num_workers",
    "decode_tp",
    "decode_ep",
    "decode_dp_attention",
    "decode_num_workers",
    "num_prefill_gpu",
    "num_decode_gpu",
    "isl",
    "osl",
    "conc",
    "image",
    "date",
    "run_url",
    "mean_ttft",
    "median_ttft",
    "p99_ttft",
    "mean_tpot",
    "median_tpot",
    "p99_tpot",
    "mean_itl",
    "median_itl",
    "mean_e2el",
    "median_e2el",
    "tput_per_gpu",
    "output_tput_per_gpu",
    "input_tput_per_gpu",
]
"""The CSV's columns: the JSON record's fields, its ``metrics`` (seconds; throughput in tokens/s
per GPU) and ``page_offset``, the character offset of the 16,000-character page of the JSON file
in which the record starts (where it was copied from; not part of the record)."""
PROVENANCE = ("page_offset",)
MEASUREMENT = ("run_url", "date", "image")
"""Fields that say which run measured a record, not what was deployed or measured."""

HARDWARE = {
    "h100": "h100-sxm",
    "h200": "h200-sxm",
    "b200": "b200",
    "b300": "b300",
    "gb200": "gb200",
    "gb300": "gb300",
    "mi300x": "mi300x",
    "mi325x": "mi325x",
    "mi355x": "mi355x",
}
"""InferenceX hardware ids -> catalog GPU ids (InferenceX's H100/H200 runners are SXM nodes:
``runners/launch_h100-*.sh``/``launch_h200-*.sh`` run DGX/HGX H100 and H200; the
``serving_rows`` rows call them ``h100_sxm``/``h200_sxm``)."""
ROW_SYSTEMS = {"h100": "h100_sxm", "h200": "h200_sxm"}
"""InferenceX hardware ids written as ``serving_rows``' ``system`` (its rules and the recipes
table key on these); other hardware keeps its InferenceX id, which no such rule names."""

FRAMEWORKS = {
    "sglang": "sglang",
    "vllm": "vllm",
    "trt": "trtllm",
    "dynamo-sglang": "sglang",
    "dynamo-trt": "trtllm",
    "dynamo-vllm": "vllm",
    "mori-sglang": "sglang",
    "sglang-disagg": "sglang",
    "atom": "atom",
}
"""InferenceX frameworks -> the engine that ran the model (``serving_rows`` backend names; the
``dynamo-*`` frameworks are NVIDIA Dynamo serving that engine's workers, ``mori-sglang`` SGLang
with AMD's MoRI transfer and all-to-all, ``atom`` AMD's ATOM, aggregated only). Any other
framework has no engine profile."""

MODELS = {"dsr1": "deepseek-ai/DeepSeek-R1"}
"""InferenceX model ids -> the model served (InferenceX's ``dsr1`` entries serve
``deepseek-ai/DeepSeek-R1-0528`` or its FP4 quantizations: one architecture, ``deepseek-r1``)."""

FP4 = {"nvidia": "nvfp4", "amd": "mxfp4"}
"""InferenceX ``precision: fp4`` by vendor: the NVIDIA runs serve ``nvidia/DeepSeek-R1-0528-FP4``
(NVFP4, ModelOpt), the AMD runs ``amd/DeepSeek-R1-0528-MXFP4`` (OCP MXFP4, Quark)."""

SOURCE_TAG = f"{DB_DUMP}inferencex-app-api@{APP_COMMIT[:9]}"
"""``silicon_data_source`` of a record written as a ``serving_rows`` row: the app's API serves
InferenceX's results database, the database AIConfigurator's ``db-dump/`` rows copy
(``serving_fields.INFERENCEX_SOURCES``), so ``serving_rows`` treats it as a run of InferenceX's
workflow and client."""

EXPRESSIBLE, NOT_EXPRESSIBLE = "expressible", "not expressible"

MS = 1e3


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiRow:
    """One record and the deployment it is read as."""

    id: str
    hardware: str
    framework: str
    engine: str
    """``serving_rows`` backend name (``trtllm``, ``vllm``, ``sglang``) or the framework when
    there is none."""
    mode: str
    """``agg`` or ``disagg``."""
    kind: str
    reason: str = ""
    """Why the record is not expressible (one line), empty otherwise."""
    model: str = ""
    concurrency: int
    measured: dict[str, float]
    """``ttft_ms``/``ttft_ms_p50``/``ttft_ms_p99``/``tpot_ms``/``tpot_ms_p50``/``tpot_ms_p99``:
    the record's mean, median and p99 (seconds x 1000)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The keyword arguments of ``gpuscale.api.infer`` (with ``model``) that express it."""
    assumptions: tuple[str, ...] = ()
    record: dict[str, str] = field(default_factory=dict)

    @property
    def expressible(self) -> bool:
        return self.kind == EXPRESSIBLE


def load_records(path: Path) -> list[dict[str, str]]:
    """The CSV's records, each a dict of :data:`COLUMNS`."""
    with path.open() as f:
        reader = csv.DictReader(f)
        if list(reader.fieldnames or []) != COLUMNS:
            raise InputError(
                f"{path}: columns {reader.fieldnames} are not the InferenceX API columns "
                f"({', '.join(COLUMNS)})",
                field="path",
            )
        return list(reader)


def record_key(rec: dict[str, str], drop: Sequence[str] = PROVENANCE) -> tuple[str, ...]:
    """The record's fields but ``drop``, in :data:`COLUMNS` order."""
    return tuple(rec[c] for c in COLUMNS if c not in drop)


def dedupe(records: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    """``records`` with each identical record once (identical in every field but where it was
    copied from, :data:`PROVENANCE`), the first kept, in order."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for rec in records:
        key = record_key(rec)
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out


def merge_parts(parts: Sequence[Path]) -> list[dict[str, str]]:
    """The records of the transcribed ``parts``, identical ones once (:func:`dedupe`), ordered
    by where they start in the JSON file (``page_offset``; within a page in the parts' order)."""
    rows = [rec for p in parts for rec in load_records(p)]
    rows = sorted(rows, key=lambda r: int(r["page_offset"]))
    return dedupe(rows)


def write_records(records: Sequence[dict[str, str]], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(records)


def run_id(rec: dict[str, str]) -> str:
    """The GitHub Actions run id of the record (``run_url`` is ``<run id>/<attempt>``)."""
    return rec["run_url"].split("/")[0]


def record_id(rec: dict[str, str]) -> str:
    """A readable id: hardware, framework, precision, spec, mode, per-stage parallelism,
    lengths, concurrency and run."""
    mode = "disagg" if rec["disagg"] == "true" else "agg"

    def stage(p: str) -> str:
        dp = "dp" if rec[f"{p}_dp_attention"] == "true" else ""
        workers = f"{rec[f'{p}_num_workers']}x" if mode == "disagg" else ""
        return f"{workers}tp{rec[f'{p}_tp']}ep{rec[f'{p}_ep']}{dp}"

    par = stage("decode") if mode == "agg" else f"{stage('prefill')}-{stage('decode')}"
    return (
        f"{rec['model']}_{rec['hardware']}_{rec['framework']}_{rec['precision']}_"
        f"{rec['spec_method']}_{mode}_{par}_{rec['isl']}x{rec['osl']}_c{rec['conc']}_"
        f"run{rec['run_url']}"
    )


def measured(rec: dict[str, str]) -> dict[str, float]:
    """The record's TTFT and TPOT in ms: mean, median (``_p50``) and p99; and, where the record
    states it, the client's output tokens/s of the whole deployment (``output_tokens_per_s``).
    InferenceX divides the client's ``output_throughput`` (output tokens over the benchmark's
    duration) by the decode GPUs of a disaggregated run and by TP on one node
    (``utils/process_result.py``: ``/ decode_gpus`` from 450d834a9, 2025-11-05, through
    93e1b3ca1 and 0f630e1cb; ``/ tp_size`` from b13bcafec, 2025-10-15, on), so the same count
    multiplies it back; the records of 2025-10-06 predate the field."""
    out = {}
    for what in ("ttft", "tpot"):
        out[f"{what}_ms"] = float(rec[f"mean_{what}"]) * MS
        out[f"{what}_ms_p50"] = float(rec[f"median_{what}"]) * MS
        out[f"{what}_ms_p99"] = float(rec[f"p99_{what}"]) * MS
    if rec["output_tput_per_gpu"]:
        gpus = int(rec["num_decode_gpu"] if rec["disagg"] == "true" else rec["decode_tp"])
        out["output_tokens_per_s"] = float(rec["output_tput_per_gpu"]) * gpus
    return out


IMAGE_VERSION = re.compile(r":v?(\d+\.\d+\.\d+(?:\.post\d+|rc\d+(?:\.post\d+)?)?)")
ATOM_IMAGE_VERSION = re.compile(r"[-_]atom(\d+\.\d+\.\d+)(?:[-_]|$)")
"""ATOM's images name the release after the ROCm and PyTorch ones
(``rocm/atom:rocm7.2.1-ubuntu24.04-pytorch2.9.1-atom0.1.2``); a dated nightly
(``..._atom20260511``) names none."""


def engine_version(rec: dict[str, str], engine: str) -> str:
    """The engine version the record's image tag names (``vllm/vllm-openai:v0.12.0`` ->
    ``0.12.0``; ``lmsysorg/sglang:v0.5.9-cu130`` -> ``0.5.9``), empty when the image is not
    stated or is not the engine's own (Dynamo runtime images carry Dynamo's version)."""
    image = rec["image"]
    own = {"vllm": "vllm", "sglang": "sglang", "trtllm": "tensorrt"}.get(engine, engine)
    if not image or own not in image.split(":")[0].lower() or "dynamo" in image.lower():
        return ""
    hit = (ATOM_IMAGE_VERSION if engine == "atom" else IMAGE_VERSION).search(image)
    return hit.group(1) if hit else ""


def as_serving_row(rec: dict[str, str], engine: str, model: str) -> dict[str, str]:
    """The record in ``serving_rows``' raw row schema, with the fields its InferenceX rules
    read: engine, version, model, system, mode, lengths, per-stage parallelism as AIConfigurator
    writes it (``tp_size`` x ``attention_dp_size`` GPUs, ``moe_ep_size``), the concurrency and
    the run day in ``silicon_data_source`` (:data:`SOURCE_TAG`). Latency columns are left
    empty: no rule may read them."""
    mode = "disagg" if rec["disagg"] == "true" else "agg"
    row = {
        "id": record_id(rec),
        "silicon_data_source": (
            f"{SOURCE_TAG}; silicon_concurrency={rec['conc']}; measured={rec['date']}; "
            f"workflow_run_id={run_id(rec)}; {rec['image']}"
        ),
        "backend": engine,
        "backend_version": engine_version(rec, engine),
        "model_path": model,
        "system": ROW_SYSTEMS.get(rec["hardware"], rec["hardware"]),
        "precision": rec["precision"],
        "mode": mode,
        "isl": rec["isl"],
        "osl": rec["osl"],
        "gemm_quant_mode": "",
        "moe_quant_mode": "",
        "batch_size": "",
        "pp_size": "1",
        "silicon_ttft_ms": "",
        "silicon_tpot_ms": "",
    }
    stages = (
        (("", "decode"),) if mode == "agg" else (("prefill_", "prefill"), ("decode_", "decode"))
    )
    for prefix in ("", "prefill_", "decode_"):
        for col in ("tp_size", "pp_size", "attention_dp_size", "moe_tp_size", "moe_ep_size"):
            row.setdefault(f"{prefix}{col}", "")
        row.setdefault(f"{prefix}batch_size", "")
    for prefix, p in stages:
        gpus, dp = int(rec[f"{p}_tp"]), rec[f"{p}_dp_attention"] == "true"
        # AIConfigurator writes an attention-DP engine as tp_size 1 x attention_dp_size GPUs.
        row[f"{prefix}tp_size"] = "1" if dp else str(gpus)
        row[f"{prefix}attention_dp_size"] = str(gpus) if dp else "1"
        row[f"{prefix}moe_tp_size"] = str(max(gpus // int(rec[f"{p}_ep"]), 1))
        row[f"{prefix}moe_ep_size"] = rec[f"{p}_ep"]
        row[f"{prefix}pp_size"] = "1"
    if mode == "disagg":
        row["prefill_num_workers"] = rec["prefill_num_workers"]
        row["decode_num_workers"] = rec["decode_num_workers"]
    else:
        row["prefill_num_workers"] = row["decode_num_workers"] = ""
    return row


def _stage(rec: dict[str, str], p: str) -> dict[str, int]:
    """A stage's parallelism as its labels state it: ``tp`` GPUs, ``ep``, and attention DP over
    all of them where ``dp_attention`` is true."""
    gpus = int(rec[f"{p}_tp"])
    return {
        "tp": gpus,
        "ep": int(rec[f"{p}_ep"]),
        "attention_dp": gpus if rec[f"{p}_dp_attention"] == "true" else 1,
    }


def worker_gpus(rec: dict[str, str], p: str) -> int | None:
    """GPUs per worker of a disaggregated stage from the record's GPU total
    (``num_{p}_gpu`` / ``{p}_num_workers``), None when that does not divide."""
    workers, total = int(rec[f"{p}_num_workers"]), int(rec[f"num_{p}_gpu"])
    return total // workers if workers > 0 and total % workers == 0 else None


def disagg_stage(rec: dict[str, str], p: str) -> tuple[dict[str, int] | None, str]:
    """A disaggregated stage's per-worker parallelism, and a note (or, with None, the reason it
    is not known).

    The labels are the deployment where the ``tp`` label is the worker's GPUs
    (:func:`worker_gpus`). Some records label a worker of G GPUs ``tp: 1`` (e.g. MI355X
    ``mori-sglang`` with ``ep: 8`` on 8 GPUs, GB200 ``dynamo-sglang`` with ``ep: 1`` on 4-48 GPUs):
    where the ``ep`` label spans the worker's G GPUs, the worker is read as G GPUs with that EP
    (attention DP over all G where ``dp_attention``); otherwise the labels do not say how the G
    GPUs are used."""
    gpus = worker_gpus(rec, p)
    st = _stage(rec, p)
    if gpus is None:
        return None, (
            f"{p} GPU total {rec[f'num_{p}_gpu']} is not a multiple of its "
            f"{rec[f'{p}_num_workers']} workers"
        )
    if st["tp"] == gpus:
        return st, ""
    if st["ep"] == gpus:
        dp = gpus if rec[f"{p}_dp_attention"] == "true" else 1
        note = (
            f"{p} labelled tp {st['tp']} ep {st['ep']} on {gpus} GPUs per worker "
            f"(num_{p}_gpu / workers): read as {gpus} GPUs, EP {gpus}, attention DP {dp}"
        )
        return {"tp": gpus, "ep": gpus, "attention_dp": dp}, note
    return None, (
        f"{p} labels (tp {st['tp']}, ep {st['ep']}) do not account for the worker's {gpus} GPUs "
        f"(num_{p}_gpu / {p}_num_workers), so its TP/EP/attention-DP split is unknown"
    )


def _refuse(rec: dict[str, str], engine: str, mode: str, reason: str) -> ApiRow:
    return ApiRow(
        id=record_id(rec),
        hardware=rec["hardware"],
        framework=rec["framework"],
        engine=engine,
        mode=mode,
        kind=NOT_EXPRESSIBLE,
        reason=reason,
        model=MODELS.get(rec["model"], ""),
        concurrency=int(rec["conc"]),
        measured=measured(rec),
        record=rec,
    )


MTP_UNKNOWN = (
    "MTP with a draft count not on file: the project has read it only for InferenceX's H200 "
    "TensorRT-LLM aggregated sweeps of 2026-01-14/28 (inferencex_agg_sweeps.csv), the B200/B300 "
    "single-node launch scripts (inferencex_mtp_scripts.csv), the H100/H200 disaggregated "
    "recipes (inferencex_disagg_recipes.csv) and the multi-node MTP entries of InferenceX's "
    "configuration (inferencex_disagg_mtp_recipes.csv)"
)


NVL72_SGLANG_DEEPEP: dict[tuple[str, str], tuple[str, str, str]] = {
    ("gb200", "fp4"): ("2026-02-08", "2026-02-13", "decode_moe_a2a_deepep"),
    ("gb200", "fp8"): ("2026-02-09", "2026-02-13", "moe_a2a_deepep"),
    ("gb300", "fp8"): ("2026-02-09", "2026-02-13", "moe_a2a_deepep"),
    ("gb300", "fp4"): ("2026-02-12", "2026-02-13", "decode_moe_a2a_deepep"),
}
"""(hardware, precision) of InferenceX's Dynamo-SGLang DeepSeek-R1 runs -> (first and last day
read, engine option) of the srt-slurm recipes they launch: ``.github/configs/nvidia-master.yaml``
names ``CONFIG_FILE=recipes/gb{200,300}-fp{4,8}/...`` from 2767db504 (#633, GB200 FP4,
2026-02-08), 37f353be2 (#635, GB200/GB300 FP8, 2026-02-09) and 3282fdeba (#636, GB300 FP4,
2026-02-12), unchanged to d25c4e75b (2026-02-13); ``runners/launch_gb{200,300}-nv.sh`` check
out ishandhanani/srt-slurm ``sa-submission-q1-2026`` (read from the fork carrying it,
connorcarpenter15/srt-slurm at 5a156f6b5; SOURCES.md). Every recipe of those entries whose
decode worker runs attention DP launches it with ``moe-a2a-backend: deepep``, ``deepep-mode:
low_latency`` (read: gb200-fp4/{1k1k,8k1k}/{mid-curve,max-tpt}, gb300-fp4/{1k1k,8k1k}/{mid_curve,
max_tpt}, gb200-fp8/1k1k/{mid-curve,max-tpt,ultra-tpt}, gb200-fp8/8k1k/{mid-curve,max_tpt},
gb300-fp8/{1k1k,8k1k}/stp/{mid,max}); the FP8 recipes' DEP8 prefill workers run ``deepep-mode:
normal`` too (``moe_a2a_deepep``: every worker), the FP4 recipes' prefill workers (DEP4 or TP4)
set no ``moe-a2a-backend`` (SGLang's default ``none``: ``decode_moe_a2a_deepep``). Every one of
these recipes, and the TP4/TP8 ``low-latency`` ones of the same entries (gb200-fp{4,8}/{1k1k,
8k1k}/low-latency, gb300-fp8/{1k1k,8k1k}/stp/low-latency, gb300-fp4/{1k1k,8k1k}/low_latency),
stores the KV cache as ``kv-cache-dtype: fp8_e4m3`` on its decode workers (and on the prefill
workers of those read whole), where SGLang's ``auto`` keeps the checkpoints' 16-bit KV."""


def nvl72_recipe(rec: dict[str, str], raw: dict[str, str], kw: dict[str, Any]) -> dict[str, Any]:
    """What the srt-slurm recipe of a GB200/GB300 Dynamo-SGLang record launches and the record
    does not state (:data:`NVL72_SGLANG_DEEPEP`): the FP8 KV cache, and the DeepEP engine option
    where its decode workers run attention DP; nothing outside the days read."""
    entry = NVL72_SGLANG_DEEPEP.get((rec["hardware"], rec["precision"]))
    if rec["framework"] != "dynamo-sglang" or entry is None:
        return {}
    first, last, option = entry
    if not first <= measured_day(raw) <= last:
        return {}
    out: dict[str, Any] = {"kv_dtype": "fp8"}
    if kw["decode_attention_dp"] > 1:
        out["engine_options"] = {option: True}
    return out


def _record_recipes(
    rec: dict[str, str],
    raw: dict[str, str],
    conc: int,
    kw: dict[str, Any],
    tables: InferenceXTables,
) -> list[str]:
    """The srt-slurm recipe files a disaggregated record ran (``recipe_files``: none where an
    entry launches no recipe file): the multi-node tables' entries that run it (the MTP table
    for an MTP record; the plain and decode-caps tables otherwise) and the H100/H200 recipes
    table's entries of its kind, workers and decode attention DP."""
    mtp = rec["spec_method"] == "mtp"
    plain = default_plain_recipes() if tables.plain_recipes is None else tables.plain_recipes
    lines = list(tables.mtp_recipes or []) if mtp else [*plain, *default_decode_caps()]
    found = [ln["recipe"] for ln in lines if entry_runs(ln, rec, raw["system"])]
    found += [
        e["recipe"]
        for e in _candidates(raw, conc, list(tables.recipes or []))
        if e["spec"] == ("mtp" if mtp else "none")
        and (int(e["prefill_workers"]), int(e["decode_workers"]), int(e["decode_attention_dp"]))
        == (kw["prefill_workers"], kw["decode_workers"], kw["decode_attention_dp"])
    ]
    return recipe_files(found)


def _disagg_mtp(
    raw: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes
) -> tuple[dict[str, Any], list[str]] | None:
    """Draft tokens of a disaggregated MTP record, and notes: the one MTP entry of the recipes
    table at its engine, system, lengths and concurrency with its worker counts and per-stage
    parallelism, whose draft count is on file (``entry_draft_tokens``), with its decode cap and
    the launched recipe's prefill attention DP where the record's label differs
    (``recipe_prefill_dp``); None otherwise."""
    hits = _mtp_entries(raw, conc, kw, recipes)
    drafts = {entry_draft_tokens(e) for e in hits}
    if len(drafts) != 1 or None in drafts:
        return None
    (n,) = drafts
    out: dict[str, Any] = {"speculative": "mtp", "draft_tokens": n}
    batches = {e["decode_max_batch"] for e in hits}
    if len(batches) == 1 and (b := batches.pop()):
        out["decode_batch"] = int(b)
    dp, dp_notes = recipe_prefill_dp(hits, kw)
    return {**out, **dp}, [f"MTP, {n} draft tokens (inferencex_disagg_recipes)", *dp_notes]


def _mtp_entries(raw: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes) -> Recipes:
    """The MTP entries of the recipes table at a disaggregated record's engine, system, lengths
    and concurrency with its worker counts and per-stage parallelism (the prefill's attention
    DP left out: InferenceX's labels of 2026-02-14 state it wrong, ``recipe_prefill_dp``)."""
    keys = (
        "prefill_workers", "prefill_tp", "prefill_ep",
        "decode_workers", "decode_tp", "decode_ep", "decode_attention_dp",
    )  # fmt: skip
    return [
        e
        for e in _candidates(raw, conc, recipes)
        if e["spec"] == "mtp" and all(int(e[k]) == kw[k] for k in keys)
    ]


def read_record(rec: dict[str, str], tables: InferenceXTables = NO_TABLES) -> ApiRow:
    """Record ``rec`` read as the deployment it ran, or marked not expressible with a reason,
    against ``tables`` (:class:`InferenceXTables`): ``scripts`` gives the draft count of an
    aggregated MTP record that no sweep of ``sweeps`` covers; ``mtp_recipes`` that of a
    disaggregated MTP record the H100/H200 recipes table ``recipes`` does not match;
    ``fractions`` the ``--mem-fraction-static`` its SGLang launch stated
    (``serving_launches.stated_memory``); ``plain_recipes`` (None: the project's, ``[]``: none)
    the decode cap of a non-MTP disaggregated record that ``recipes`` gives none, with
    ``inferencex_decode_caps``' table; ``server_prompts`` (None: the project's) the prompt
    lengths the server counted where the client's tokenizer differed (``client_tokenizer``)."""
    mode = "disagg" if rec["disagg"] == "true" else "agg"
    engine = FRAMEWORKS.get(rec["framework"], rec["framework"])
    if rec["model"] not in MODELS:
        return _refuse(rec, engine, mode, f"model {rec['model']!r} is not DeepSeek-R1 (dsr1)")
    model = MODELS[rec["model"]]
    if rec["hardware"] not in HARDWARE:
        return _refuse(rec, engine, mode, f"hardware {rec['hardware']!r} is not in the catalog")
    if rec["framework"] not in FRAMEWORKS:
        return _refuse(
            rec, engine, mode, f"framework {rec['framework']!r}: no engine profile for it"
        )
    if mode == "disagg" and not serving_engine(ENGINES[engine]).disaggregated:
        return _refuse(
            rec, engine, mode, f"framework {rec['framework']!r}: modelled aggregated only"
        )
    gpu = HARDWARE[rec["hardware"]]
    if rec["precision"] == "fp8":
        weights = catalog.checkpoint_weights(model) or "fp8"
    elif rec["precision"] == "fp4":
        weights = FP4[catalog.gpu(gpu).vendor]
    else:
        return _refuse(rec, engine, mode, f"precision {rec['precision']!r} not read")
    if rec["spec_method"] not in ("none", "mtp"):
        return _refuse(
            rec, engine, mode, f"speculative method {rec['spec_method']!r} is not modelled"
        )
    raw = as_serving_row(rec, engine, model)
    conc = concurrency(raw)
    assert conc is not None  # as_serving_row states silicon_concurrency
    kw: dict[str, Any] = {
        "gpu": gpu,
        "engine": ENGINES[engine],
        "weights": weights,
        **client_lengths(raw),
        "concurrency": conc,
        **client_requests(raw, conc),
    }
    notes: list[str] = []
    # Before the lengths are read anywhere else: every cap and budget below sees the prompts
    # the server counted (client_tokenizer).
    prompts = default_server_prompts() if tables.server_prompts is None else tables.server_prompts
    lengths, note, refused = server_prompt_lengths(rec, prompts)
    if refused:
        return _refuse(rec, engine, mode, refused)
    if lengths:
        kw.update(lengths)
        notes.append(note)
    if mode == "agg":
        if _stage(rec, "prefill") != _stage(rec, "decode"):
            return _refuse(
                rec, engine, mode, "aggregated record whose prefill and decode parallelism differ"
            )
        # An aggregated engine's GPUs are its TP label: InferenceX counts GPU_COUNT = TP x PP x
        # PCP (benchmark-tmpl.yml; SOURCES.md). The records' num_decode_gpu is TP x EP on some
        # single-node TensorRT-LLM runs (64 for TP8 EP8), as the 2026-04-06 export writes them.
        kw.update(_stage(rec, "decode"), pp=1)
        kw.update(launch_options(raw, kw))
        if ep := blackwell_sglang_expert_parallel(rec):
            kw["ep"] = ep  # --enable-ep-moe (inferencex_sglang_launch.EP_MOE_LAST_DAY)
        if amd := amd_sglang_budget(rec):
            add_engine_options(kw, amd)  # inferencex_sglang_launch.amd_sglang_budget
        if sglang_bw := blackwell_sglang_launch(rec):
            # The B200/B300 SGLang scripts' scheduler flags (inferencex_sglang_launch).
            add_engine_options(kw, sglang_bw)
        if rec["spec_method"] == "mtp":
            day = measured_day(raw)
            spec_kw, note, refused = speculative_reading(raw, day, kw, list(tables.sweeps or []))
            if refused:
                return _refuse(rec, engine, mode, MTP_UNKNOWN)
            if not spec_kw:
                spec_kw, note, refused = script_draft_tokens(
                    raw, day, kw, list(tables.scripts or [])
                )
                if refused:
                    return _refuse(rec, engine, mode, refused)
                if not spec_kw:
                    return _refuse(rec, engine, mode, MTP_UNKNOWN)
            # The sweeps' H200 script states its token budget; the scripts table does not read
            # one (the engine's own budget then applies).
            tokens = spec_kw.pop("max_num_batched_tokens", None)
            kw.update(spec_kw)
            if tokens is not None:
                opts = dict(kw.get("engine_options") or {})
                opts["max_num_batched_tokens"] = max(tokens, opts.get("max_num_batched_tokens", 0))
                kw["engine_options"] = opts
            notes.append(note)
    else:
        if int(rec["prefill_num_workers"]) < 1 or int(rec["decode_num_workers"]) < 1:
            return _refuse(rec, engine, mode, "disaggregated record without worker counts")
        (p, p_note), (d, d_note) = disagg_stage(rec, "prefill"), disagg_stage(rec, "decode")
        if p is None or d is None:
            return _refuse(rec, engine, mode, p_note if p is None else d_note)
        notes.extend(n for n in (p_note, d_note) if n)
        kw.update(
            prefill_workers=int(rec["prefill_num_workers"]),
            prefill_tp=p["tp"],
            prefill_ep=p["ep"],
            prefill_attention_dp=p["attention_dp"],
            decode_workers=int(rec["decode_num_workers"]),
            decode_tp=d["tp"],
            decode_ep=d["ep"],
            decode_attention_dp=d["attention_dp"],
        )
        if rec["spec_method"] == "mtp":
            spec = _disagg_mtp(raw, conc, kw, list(tables.recipes or []))
            if spec is not None:
                kw.update(spec[0])
                notes.extend(spec[1])
            else:
                # The entry the record ran, read from its stated fields and day; its decode
                # caps are on file but not applied here.
                spec_kw, note, refused = multinode_draft_tokens(
                    rec, raw["system"], list(tables.mtp_recipes or [])
                )
                if refused:
                    return _refuse(rec, engine, mode, refused)
                if not spec_kw:
                    return _refuse(rec, engine, mode, MTP_UNKNOWN)
                kw.update(spec_kw)
                notes.append(note)
        else:
            cap, why = _decode_cap(raw, conc, kw, list(tables.recipes or []))
            if "decode_batch" not in cap:
                # The multi-node entry the record ran, by the one rule of the multi-node tables
                # (inferencex_multinode.recipes_decode_cap): the TensorRT-LLM recipe names' caps
                # (inferencex_decode_caps) and the recipe files' (PLAIN_RECIPES_FILE) must agree.
                plain = (
                    default_plain_recipes()
                    if tables.plain_recipes is None
                    else tables.plain_recipes
                )
                more, more_why = multinode_decode_cap(
                    rec, raw["system"], [*default_decode_caps(), *plain]
                )
                cap, why = {**cap, **more}, [*why, *more_why]
            kw.update(cap)
            notes.extend(why)
        kw.update(disagg_kv_dtype(raw))
        # The router in front of the decode workers: the Dynamo frontends the record's srt-slurm
        # recipes start (inferencex_multinode.recipes_decode_routing).
        # The srt-slurm recipe files the record ran, read once for every recipe table below
        # (its stages and worker counts are set above).
        recipes = _record_recipes(rec, raw, conc, kw, tables)
        frontends = default_frontends() if tables.frontends is None else tables.frontends
        routing, routing_note = recipes_decode_routing(recipes, rec["date"], frontends)
        kw.update(routing)
        if routing_note:
            notes.append(routing_note)
        if engine == "trtllm":
            # The context and generation servers' own settings the same recipes state.
            stages = default_trt_stages() if tables.trt_stages is None else tables.trt_stages
            trt, trt_note = recipes_trt_stages(recipes, rec["date"], stages)
            add_launch(kw, trt)
            if trt_note:
                notes.append(trt_note)
        mori, mori_note = mori_launch(rec, kw)
        if mori:
            # The MoRI launch's caps where no recipes table gave one (none states MI355X's).
            for key in ("prefill_batch", "decode_batch", "decode_routing", "kv_dtype"):
                if key in mori and key not in kw:
                    kw[key] = mori[key]
            if "max_num_batched_tokens" in mori:
                add_engine_options(kw, {"max_num_batched_tokens": mori["max_num_batched_tokens"]})
            for key in (
                "overlap_scheduler", "prefill_overlap_scheduler", "moe_a2a_deepep",
                "prefill_speculative",
            ):  # fmt: skip
                if key in mori:
                    add_engine_options(kw, {key: mori[key]})
            notes.append(mori_note)
        if launch := nvl72_recipe(rec, raw, kw):
            add_launch(kw, launch)
            deepep = launch.get("engine_options", {})
            notes.append(f"FP8 KV, {', '.join(deepep) or 'no DeepEP'} (NVL72_SGLANG_DEEPEP)")
        if engine == "sglang":
            # The decode workers' --scheduler-recv-interval the record's srt-slurm recipe sets.
            # The entries of the record's kind: the MTP table's for an MTP record, the plain
            # table's otherwise (an MTP entry of the same deployment launches another recipe,
            # e.g. h200/1k1k/bs256-1p6d-dep-mtp.yaml beside bs256-1p6d-dep.yaml).
            plain = (
                default_plain_recipes() if tables.plain_recipes is None else tables.plain_recipes
            )
            mtp = rec["spec_method"] == "mtp"
            entries = list(tables.mtp_recipes or []) if mtp else list(plain)
            recv, recv_note = multinode_recv_interval(rec, raw["system"], entries)
            if recv:
                add_engine_options(kw, recv)
            if recv_note:
                notes.append(recv_note)
            # The prefill workers' own --chunked-prefill-size / --max-prefill-tokens the same
            # recipes state (sglang_config.prefill), apart from the decode workers'.
            chunks = (
                default_prefill_chunks() if tables.prefill_chunks is None else tables.prefill_chunks
            )
            chunk, chunk_note = multinode_prefill_chunk(
                rec, raw["system"], entries, chunks, int(kw.get("prefill_attention_dp", 1))
            )
            add_launch(kw, chunk)
            if chunk_note:
                notes.append(chunk_note)
            sglang_table = (
                default_sglang_stages() if tables.sglang_stages is None else tables.sglang_stages
            )
            if "kv_dtype" not in kw:
                # The KV-cache dtype the same recipes state for both stages (SGLang's own
                # ``auto`` keeps the checkpoint's 16 bits otherwise).
                kv, kv_note = recipes_kv_dtype(recipes, rec["date"], sglang_table)
                kw.update(kv)
                if kv_note:
                    notes.append(kv_note)
            if rec["precision"] == "fp8" and catalog.gpu(gpu).generation == "blackwell":
                # The dense block-FP8 GEMM kernel the recipes' stages choose (DeepGEMM unless
                # they turn it off or name FlashInfer's), by the image's SGLang version's rule.
                gemm, gemm_note = recipes_fp8_gemm(
                    recipes, rec["date"], sglang_table, engine_version(rec, "sglang")
                )
                if gemm:
                    add_engine_options(kw, gemm)
                if gemm_note:
                    notes.append(gemm_note)
    mem_kw, mem_note, refused = stated_memory(
        raw, kw, list(tables.recipes or []), list(tables.fractions or [])
    )
    if refused:
        return _refuse(rec, engine, mode, refused)
    if mem_kw:
        add_engine_options(kw, mem_kw)
        notes.append(mem_note)
    kv_kw, kv_note, refused = stated_kv_cache_dtype(raw, kw, list(tables.fractions or []))
    if refused:
        return _refuse(rec, engine, mode, refused)
    if kv_kw:
        kw.update(kv_kw)
        notes.append(kv_note)
    if catalog.gpu(gpu).vendor == "nvidia" and (opts := engine_version_options(raw, model, kw)):
        # The vLLM DeepGEMM option is a CUDA kernel library's (deepseek-ai/DeepGEMM: Hopper
        # and Blackwell); ROCm builds of vLLM have no DeepGEMM.
        add_engine_options(kw, opts)
    return ApiRow(
        id=record_id(rec),
        hardware=rec["hardware"],
        framework=rec["framework"],
        engine=engine,
        mode=mode,
        kind=EXPRESSIBLE,
        model=model,
        concurrency=conc,
        measured=measured(rec),
        kwargs=kw,
        assumptions=tuple(notes),
        record=rec,
    )


def read_records(
    records: Sequence[dict[str, str]], tables: InferenceXTables = NO_TABLES
) -> list[ApiRow]:
    return [read_record(r, tables) for r in records]


def same_measurement(a: dict[str, str], b: dict[str, str]) -> bool:
    """Two records of one deployment, lengths and concurrency whose every metric agrees to the
    digit: one measurement recorded twice (e.g. under two runs' ids)."""
    return record_key(a, (*PROVENANCE, *MEASUREMENT)) == record_key(b, (*PROVENANCE, *MEASUREMENT))


def distinct_measurements(rows: Sequence[ApiRow]) -> list[ApiRow]:
    """``rows`` with each measurement once (:func:`same_measurement`; the first kept)."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for row in rows:
        key = record_key(row.record, (*PROVENANCE, *MEASUREMENT))
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


SEEN_TTFT_RTOL = 1e-6
"""A record and a row of the project's data that agree on the mean TTFT and TPOT to this
relative tolerance are the same measurement (the API stores seconds, the CSV ms)."""


def _seen_key(system: str, engine: str, mode: str, isl: str, osl: str, conc: int, day: str) -> str:
    return f"{system}|{engine}|{mode}|{isl}x{osl}|c{conc}|{day}"


def seen_index(rows: Sequence[ServingRow]) -> dict[str, list[ServingRow]]:
    """The InferenceX rows of the project's H100/H200 data (``serving_rows.load``) by system,
    engine, mode, lengths, concurrency and run day."""
    out: dict[str, list[ServingRow]] = {}
    for row in rows:
        r = row.raw
        day = measured_day(r)
        if not day or not r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
            continue
        key = _seen_key(
            r["system"], r["backend"], r["mode"], r["isl"], r["osl"], row.concurrency, day
        )
        out.setdefault(key, []).append(row)
    return out


def _deployment(row: ServingRow) -> tuple[int, ...]:
    """What every InferenceX record of the project's data states reliably about its deployment:
    aggregated, the GPUs and attention-DP width (``serving_fields.parallelism``); disaggregated,
    the prefill TP and EP labels (``serving_recipes.EXPORT_RELIABLE``)."""
    r = row.raw
    if r["mode"] == "agg":
        p = parallelism(r)
        return (p["tp"], p["attention_dp"] > 1)
    return (int(r["prefill_tp_size"] or 0), int(r["prefill_moe_ep_size"] or 1))


def seen(row: ApiRow, index: dict[str, list[ServingRow]]) -> tuple[bool, bool]:
    """(same deployment, lengths, concurrency and day are in the project's H100/H200 data;
    one of those rows records the same mean TTFT and TPOT, :data:`SEEN_TTFT_RTOL`)."""
    rec = row.record
    system = ROW_SYSTEMS.get(rec["hardware"])
    if system is None:
        return False, False
    key = _seen_key(
        system, row.engine, row.mode, rec["isl"], rec["osl"], int(rec["conc"]), rec["date"]
    )
    if row.mode == "agg":
        mine: tuple[int, ...] = (int(rec["decode_tp"]), rec["decode_dp_attention"] == "true")
    else:
        mine = (int(rec["prefill_tp"]), int(rec["prefill_ep"]))
    same = [r for r in index.get(key, []) if _deployment(r) == mine]
    exact = any(
        math.isclose(r.ttft_ms, row.measured["ttft_ms"], rel_tol=SEEN_TTFT_RTOL)
        and math.isclose(r.tpot_ms, row.measured["tpot_ms"], rel_tol=SEEN_TTFT_RTOL)
        for r in same
    )
    return bool(same), exact
