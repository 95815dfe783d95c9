"""Map rows of ``published_memory.csv`` to memory-model inputs, predict the counter each row
reports, and measure the error.

The counters differ (validation README, "What 'memory' means"): ``max_memory_allocated`` /
``active_bytes`` are live tensors (:attr:`TrainingMemory.allocated`), ``max_memory_reserved`` adds
the caching allocator's slack (:attr:`TrainingMemory.reserved`), NVML/nvidia-smi is the whole
device (:attr:`TrainingMemory.total`). Each row is predicted in its own counter.

Every assumption for a field a source leaves out or states only in prose is written next to the
code that makes it. Rows whose missing settings change the answer by more than the error being
measured are skipped with the reason, never guessed.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.activations import stage_activations
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.model_states import nf4_bytes_per_param
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_profile, profile_from_dict
from gpuscale.specs import ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import Recompute
from gpuscale.specs.training import ALL_LINEAR, Loss, Training

GIB = float(2**30)

MODELS = {
    "Llama 3.1 8B": "llama3.1-8b",
    "Llama 3 8B": "llama3.1-8b",  # same shapes and vocabulary
    "Llama 3.1 70B": "llama3.1-70b",
    "Llama 3.1 405B": "llama3.1-405b",
    "Llama 3.2 3B": "llama3.2-3b",
    "Llama 2 7B": "llama2-7b",
    "Llama 2 70B": "llama2-70b",
    "Mistral 7B v0.1": "mistral-7b",
    "Mistral 7B v0.2 base": "mistral-7b",  # v0.2 changes rope theta and drops the window only
    "Yi 34B": "yi-34b",
    "TinyLlama 1.1B": "tinyllama-1.1b",
    "bert-large-uncased (encoder, seq. classification)": "bert-large",
}

HF_GUIDE_CONTEXT_GIB = 1343 / 1024
"""The Hugging Face guide measured its CUDA context alone (1343 MiB, V100, eager kernel
loading); its rows are predicted with that measured figure instead of the profile's default."""

FILES = ("published_memory.csv", "published_memory_pretraining.csv")
"""The memory validation files under ``gpuscale.validation.DATA_DIR``: fine-tuning peaks and
the torchtitan pre-training peaks (same columns)."""

FITTED_FROM_ROWS: dict[str, str] = {
    "hf": "HF_GUIDE_CONTEXT_GIB, the CUDA context the Hugging Face guide measured next to its rows",
}
"""Every value the memory model or this mapping takes from validation rows, by the source
that supplies it. Leave-one-source-out predicts a source without the values its own rows
supplied (for ``hf``: the profile's default context). Nothing else is fitted to rows: the
memory model's constants come from the profile (``memory_*`` in ``generic.yaml``, sourced
there, not tuned here), and each row's recipe settings (loss kind, adapter dropout, optimizer
implementation, ...) are read from that source's own configuration, as written beside each
assumption below. Outside ``hf``, LOSO therefore equals in-sample."""


@dataclass(frozen=True, slots=True)
class Case:
    """One row as memory-model inputs."""

    id: str
    source: str
    model: ModelSpec
    training: Training
    plan: Plan
    counter: str
    """``allocated``, ``reserved`` or ``total`` (device)."""
    profile: Profile
    measured_gib: float
    assumptions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Result:
    id: str
    source: str
    measured_gib: float
    predicted_gib: float | None
    counter: str = ""
    skip_reason: str = ""
    naive_gib: float | None = None
    """The rule of thumb the validation README warns about: 16 bytes per parameter, sharded."""

    @property
    def error(self) -> float | None:
        if self.predicted_gib is None:
            return None
        return (self.predicted_gib - self.measured_gib) / self.measured_gib


class Skip(Exception):
    """The row lacks a setting that would change the answer; the message says which."""


def _source(row: dict[str, str]) -> str:
    return row["id"].split("-")[0]


def _counter(row: dict[str, str]) -> str:
    how = row["measured_how"].lower()
    reserved = ("max_memory_reserved", "peak memory reserved", "reserved_peak", "max_reserved")
    if any(k in how for k in reserved):
        return "reserved"
    if "nvml" in how or "screenshot" in how or "monitor" in how:
        return "total"
    if "max_memory_allocated" in how or "active_bytes" in how:
        return "allocated"
    # torchtune README tables print get_memory_stats without naming the counter; the Feb-2024
    # README said "peak memory reserved" (validation README, source 2). Assumption: reserved.
    return "reserved"


def _seq_len(row: dict[str, str], notes: list[str]) -> int:
    text = row["seq_len"]
    if text.isdigit():
        return int(text)
    bound = re.search(r"<=\s*(\d+)", text)
    if bound is None:
        raise Skip(f"sequence length '{text}' not stated")
    limit = int(bound.group(1))
    if limit > 1024:
        # Unpacked Alpaca samples are far shorter than a 4096 bound, so the peak depends on the
        # longest sample of the run, which the source does not give.
        raise Skip(f"unpacked data under a {limit}-token bound: the longest batch is unknown")
    notes.append(
        f"variable length <= {limit}: the longest batch assumed to reach {limit} "
        "(Alpaca has samples above 512 tokens after truncation)"
    )
    return limit


def _lora(row: dict[str, str], notes: list[str]) -> tuple[str, int, tuple[str, ...]]:
    text = f"{row['precision']} {row['optimizer']} {row['notes']}"
    if "NF4" in row["precision"] or "4-bit" in row["precision"]:
        method = "qlora"
    elif "LoRA" in row["optimizer"] or row["notes"].lstrip().startswith("LoRA"):
        method = "lora"
    else:
        return "full", 16, ALL_LINEAR
    src = _source(row)
    if src == "aai":
        # fsdp_qlora train.py defaults: rank 64 on q, k, v, gate, up, down (not o_proj).
        return method, 64, ("q", "k", "v", "gate", "up", "down")
    if src == "peft":
        return method, 8, ALL_LINEAR  # launch command: r 8, all-linear
    if src == "litgpt":
        return method, 32, ("q", "v")  # config_hub yaml: r 32 on query + value
    rank = re.search(r"rank (\d+)", row["notes"])
    if rank is None:
        raise Skip("LoRA rank not stated")
    notes_text = row["notes"]
    if re.search(r"q_proj,\s*v_proj,\s*output_proj \+ MLP", notes_text):
        targets: tuple[str, ...] = ("q", "v", "o", "gate", "up", "down")
    elif "q,k,v,output_proj + MLP" in notes_text:
        targets = ALL_LINEAR + (("head",) if "final output projection" in notes_text else ())
    elif re.search(r"on q,k,v\b|on q,k,v\)", notes_text):
        targets = ("q", "k", "v")
    elif re.search(r"q_proj,\s*v_proj|on q,v\b|on q,v\)", notes_text):
        targets = ("q", "v")
    else:
        raise Skip(f"LoRA targets not stated ({text[:40]})")
    return method, int(rank.group(1)), targets


def _optimizer(row: dict[str, str]) -> dict[str, object]:
    text = row["optimizer"]
    if not text:
        raise Skip("optimizer and memory savers not stated")
    low = text.lower()
    out: dict[str, object] = {"optimizer": "adamw"}
    if "8bit" in low or "8-bit" in low:
        out["optimizer"] = "adamw-8bit"
    elif "adafactor" in low:
        out["optimizer"] = "adafactor"
    if "paged" in low:
        out["paged_optimizer"] = True
    if "optimizer_in_bwd=true" in low:
        out["optimizer_in_backward"] = True
    return out


def _precision(row: dict[str, str]) -> dict[str, object]:
    text = row["precision"].lower()
    if text.startswith("fp32"):
        return {"precision": "fp32"}
    if text.startswith("fp16"):
        return {"precision": "fp16", "master_weights": True}
    if "mixed" in text or _source(row) == "peft":
        # Accelerate / HF Trainer AMP: trainable (adapter) weights kept in fp32.
        return {"precision": "bf16", "master_weights": True}
    return {"precision": "bf16", "master_weights": False}


def _recompute(row: dict[str, str]) -> Recompute:
    text = row["recompute"].lower()
    if not text:
        raise Skip("activation checkpointing not stated")
    if text.startswith("none"):
        return "none"
    return "full"


LORA_DROPOUT = {"aai": 0.1, "peft": 0.1, "litgpt": 0.05}
"""Adapter dropout of each source's recipe: fsdp_qlora ``train.py`` default ``lora_dropout``
0.1, the PEFT docs' launch commands ``--lora_dropout 0.1``, LitGPT config_hub ``lora_dropout:
0.05``. torchtune's rows do not say (its configs changed over 2024): left at 0."""

TORCHTUNE_2411_CHAIN = (
    "baseline",
    "packed",
    "compile",
    "chunkedce",
    "ac",
    "optinbwd",
    "actoffload",
    "adamw8bit",
    "lora",
    "qlora",
)
"""The Nov-2024 torchtune ablation adds one technique a row (validation README, source 2)."""


def _loss(row: dict[str, str]) -> str:
    rid = row["id"]
    if rid.startswith("torchtune-2411-"):
        step = rid.removeprefix("torchtune-2411-3b-")
        chunked = TORCHTUNE_2411_CHAIN.index(step) >= TORCHTUNE_2411_CHAIN.index("chunkedce")
        return "chunked" if chunked else "standard"
    if _source(row) == "litgpt":
        # LitGPT finetune computes the head in 128-token chunks (lm_head_chunk_size=128) and
        # the loss per chunk (chunked_cross_entropy): the 16-bit logits are kept whole.
        return "chunked"
    if "chunked" in row["notes"].lower() or "CEWithChunkedOutputLoss" in row["notes"]:
        return "chunked"
    if rid.startswith("torchtune-2409-"):
        # Assumption: the Sep-2024 table ran torchtune's llama3_1 configs of that commit, which
        # all name CEWithChunkedOutputLoss (its 8B rows say so; the 70B/405B rows are silent).
        return "chunked"
    return "standard"


def _compiled(row: dict[str, str]) -> bool:
    """The row runs under torch.compile (its notes say so, or the torchtune Nov-2024 ablation
    from its ``compile`` step on)."""
    rid = row["id"]
    if rid.startswith("torchtune-2411-"):
        step = rid.removeprefix("torchtune-2411-3b-")
        return TORCHTUNE_2411_CHAIN.index(step) >= TORCHTUNE_2411_CHAIN.index("compile")
    return "compile" in row["notes"].lower() and "no compile" not in row["notes"].lower()


def _sharding(row: dict[str, str]) -> dict[str, Any]:
    text = row["sharding"]
    n = int(row["n_gpus"])
    out: dict[str, Any] = {"dp": n, "zero": 0, "offload_params": False}
    if "FULL_SHARD" in text or "ZeRO-3" in text:
        out["zero"] = 3
    if (
        "offload" in text.lower()
        and "no cpu offload" not in text.lower()
        and ("param" in text.lower() or "fsdp_cpu_offload=True" in text)
    ):
        out["offload_params"] = True
    return out


TORCHTITAN_COMPILES_LOSS = {"llama3_h100_202412": False, "llama3_8b_h200_2025-06": True}
"""Whether the torchtitan version behind a benchmark document compiles the loss with the
model. The Dec-2024 tables name torchtitan 9dec370, whose ``train.py`` left ``loss_fn =
torch.compile(loss_fn)`` commented out ("compiling loss function causes CUDA errors"); the
Jun-2025 H200 table names e7c0cae, where ``build_cross_entropy_loss`` compiles it whenever
``training.compile`` is on."""


def _torchtitan_case(row: dict[str, str], model: ModelSpec, notes: list[str]) -> Case:
    """A torchtitan pre-training row (published_memory_pretraining.csv)."""
    text = f"{row['precision']} {row['notes']}"
    tp, pp, dp, cp = (int(row[k]) for k in ("tp", "pp", "dp", "cp"))
    mbs = int(row["micro_batch"])
    compiled = "compile" in row["notes"].lower()
    document = next((d for d in TORCHTITAN_COMPILES_LOSS if d in row["source"]), None)
    if document is None:
        raise Skip("torchtitan version not named: whether the loss is compiled is unknown")
    loss: Loss = "compiled" if compiled and TORCHTITAN_COMPILES_LOSS[document] else "standard"
    float8 = "Float8" in row["precision"]
    # float8 all-gather is a toml switch: on where the row says so, and for the 405B rows,
    # whose llama3_405b.toml turns it on (t5 notes; t6 runs the same file).
    fp8_gather = float8 and (
        "float8_all_gather" in text or "float8 all-gather" in text or model.num_layers == 126
    )
    if float8:
        notes.append(f"Float8 linears; float8 all-gather {'on' if fp8_gather else 'off'}")
    recompute: Recompute = "full" if row["recompute"].startswith("full") else "selective"
    training = Training(
        seq_len=int(row["seq_len"]),
        precision="fp8" if float8 else "bf16",
        master_weights=True,
        loss=loss,
        selective_policy="op",
        fp8_all_gather=fp8_gather,
        fused_elementwise=compiled,
        sp_saves_gathered_input=True,  # DTensor sequence parallelism (torchtitan TP)
    )
    # Pipelined rows run torchtitan's default of as many micro-batches as stages (row notes).
    steps = pp if pp > 1 else 1
    vp = 2 if "Interleaved" in row["notes"] else 1
    if vp > 1:
        notes.append("interleaved 1F1B assumed at two virtual stages per rank")
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        zero=3,
        micro_batch=mbs,
        global_batch=mbs * dp * steps,
        recompute=recompute,
    )
    return Case(
        id=row["id"],
        source="torchtitan",
        model=model,
        training=training,
        plan=plan,
        counter=_counter(row),
        profile=load_profile("torchtitan"),
        measured_gib=float(row["value_gib"]),
        assumptions=tuple(notes),
    )


def to_case(row: dict[str, str], base: Profile, *, held_out: str = "") -> Case:
    """Turn one CSV row into a :class:`Case` (raises :class:`Skip` when it cannot). Values the
    ``held_out`` source's rows supplied (:data:`FITTED_FROM_ROWS`) are not used."""
    notes: list[str] = []
    if _source(row) == "torchtitan":
        name = MODELS.get(row["model"])
        if name is None:
            raise Skip(f"model '{row['model']}' not in the catalog")
        return _torchtitan_case(row, catalog.model(name), notes)
    name = MODELS.get(row["model"])
    if name is None:
        raise Skip(f"model '{row['model']}' not in the catalog")
    model = catalog.model(name)
    seq = _seq_len(row, notes)
    method, rank, targets = _lora(row, notes)
    shard = _sharding(row)
    fields: dict[str, Any] = {
        "seq_len": seq,
        "finetune": method,
        "lora_rank": rank,
        "lora_targets": targets,
        "loss": _loss(row),
        "offload_params": shard["offload_params"],
        "activation_offload": "activation offload" in row["recompute"].lower(),
        **_precision(row),
        **_optimizer(row),
    }
    src = _source(row)
    if src == "hf":
        # HF BERT of that era: eager attention, dropout 0.1, sequence-classification head; the
        # Trainer's default optimizer was transformers' own AdamW ("adamw_hf"), a loop over
        # the parameters, not torch's foreach implementation.
        fields.update(flash_attention=False, dropout=True, task="classify", foreach_optimizer=False)
    if "fused" in row["optimizer"].lower() or row["id"].startswith("torchtune-2411"):
        # torchtune's configs pass ``fused: True`` to torch AdamW by the Sep-2024 table (its
        # rows say so); the Nov-2024 ablation runs the same configs.
        fields["foreach_optimizer"] = False
    if src == "litgpt" and method == "qlora":
        # LitGPT's single-device bnb.nf4 recipe builds the 16-bit model on the device and
        # quantizes it there (its QLoRA peaks equal the 16-bit model size).
        fields["load_16bit_on_device"] = True
        notes.append("16-bit base built on the device before quantization (LitGPT bnb.nf4)")
    if method != "full" and src in LORA_DROPOUT:
        fields["lora_dropout"] = LORA_DROPOUT[src]
    if "custom_sharded_layers" in row["notes"]:
        fields["separate_embedding_units"] = True
    if method != "full":
        fields.pop("optimizer_in_backward", None)
    # Eager PyTorch modules unless the row runs torch.compile (fused element-wise kernels).
    fields["fused_elementwise"] = _compiled(row)
    training = Training(**fields)
    mbs = int(row["micro_batch"])
    dp = int(shard["dp"])
    accum = 1
    match = re.search(r"(?:grad(?:ient)?[- ]accum(?:ulation)?|GA) (\d+)", row["notes"])
    if match:
        accum = int(match.group(1))
        notes.append(f"gradient accumulation {accum} (from notes): gradients persist")
    plan = Plan(
        dp=dp,
        zero=int(shard["zero"]) if dp > 1 else 0,
        micro_batch=mbs,
        global_batch=mbs * dp * accum,
        recompute=_recompute(row),
    )
    profile = base
    if src == "hf" and held_out != "hf":
        constants = dict(base.constants, memory_cuda_context_gib=HF_GUIDE_CONTEXT_GIB)
        profile = profile_from_dict({"name": "generic+hf-guide-context", "constants": constants})

    return Case(
        id=row["id"],
        source=src,
        model=model,
        training=training,
        plan=plan,
        counter=_counter(row),
        profile=profile,
        measured_gib=float(row["value_gib"]),
        assumptions=tuple(notes),
    )


FLOOR_NOISE = 0.15
"""How far below :func:`floor_gib` a measurement may sit and still be taken as the stated
settings: the run-to-run and version noise the validation README measured on the same rows
(torchtune's draft vs merged tables differ by 0-15%)."""


def floor_gib(case: Case) -> float:
    """The least memory the row's stated settings must hold, whatever the framework: its
    weights in 16 bits (4-bit NF4 for QLoRA) over the GPUs that shard them, plus the tensors
    autograd must save for backward (what tests/unit/test_memory_torch.py checks against
    PyTorch, within 5%). A measured peak below it means the stated settings are not what ran."""
    training, plan = case.training, case.plan
    word = nf4_bytes_per_param(training.double_quant) if training.finetune == "qlora" else 2.0
    shard = plan.tp * plan.pp * (plan.dp * plan.cp if plan.zero == 3 else 1)
    weights = 0.0 if training.offload_params else total_params(case.model) * word / shard
    saved = stage_activations(case.model, training, PlanBatch.from_plans([plan]), "first").stored
    return (weights + float(saved[0])) / GIB


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _naive(row: dict[str, str], model: ModelSpec | None) -> float | None:
    if model is None:
        return None
    return 16 * total_params(model) / int(row["n_gpus"] or 1) / GIB


def evaluate(
    rows: list[dict[str, str]], profile: Profile | None = None, *, loso: bool = False
) -> list[Result]:
    """Predict every row in its own counter. ``loso``: each row without the values its own
    source supplied (leave-one-source-out, see :data:`FITTED_FROM_ROWS`)."""
    base = profile if profile is not None else load_profile("generic")
    results = []
    for row in rows:
        name = MODELS.get(row["model"])
        naive = _naive(row, catalog.model(name) if name else None)
        try:
            case = to_case(row, base, held_out=_source(row) if loso else "")
        except Skip as why:
            results.append(
                Result(
                    id=row["id"],
                    source=_source(row),
                    measured_gib=float(row["value_gib"]),
                    predicted_gib=None,
                    skip_reason=str(why),
                    naive_gib=naive,
                )
            )
            continue
        floor = floor_gib(case)
        if case.measured_gib < floor * (1.0 - FLOOR_NOISE):
            results.append(
                Result(
                    id=case.id,
                    source=case.source,
                    measured_gib=case.measured_gib,
                    predicted_gib=None,
                    skip_reason=(
                        f"measured far below the {floor:.1f} GiB its stated settings must hold "
                        "(16-bit weight shards + tensors saved for backward): not what ran"
                    ),
                    naive_gib=naive,
                )
            )
            continue
        mem = plan_memory(case.model, case.training, case.plan, case.profile)
        results.append(
            Result(
                id=case.id,
                source=case.source,
                measured_gib=case.measured_gib,
                predicted_gib=mem[case.counter] / GIB,
                counter=case.counter,
                naive_gib=naive,
            )
        )
    return results


def mape(errors: list[float]) -> float:
    return float(np.mean(np.abs(errors))) if errors else float("nan")


@dataclass(frozen=True, slots=True)
class Summary:
    rows: int
    predicted: int
    mape: float
    mape_by_source: dict[str, float]
    constant_gib: float
    constant_mape: float
    """A constant guess (the median measured value, chosen in hindsight) over the same rows."""
    constant_loso_mape: float
    """The constant guess made for each source from the other sources' rows only (NaN when
    the rows come from one source)."""
    naive_mape: float
    """16 bytes per parameter over the GPUs, the usual calculator rule."""


def _error(result: Result) -> float:
    error = result.error
    if error is None:
        raise ValueError(f"{result.id} was not predicted")
    return error


def summarize(results: list[Result]) -> Summary:
    done = [r for r in results if r.predicted_gib is not None]
    measured = np.array([r.measured_gib for r in done])
    constant = float(np.median(measured))
    by_source: dict[str, list[float]] = {}
    for r in done:
        by_source.setdefault(r.source, []).append(_error(r))
    naive = [((r.naive_gib or 0) - r.measured_gib) / r.measured_gib for r in done]
    loso_constant = []
    for r in done:
        others = [o.measured_gib for o in done if o.source != r.source]
        guess = float(np.median(others)) if others else float("nan")
        loso_constant.append((guess - r.measured_gib) / r.measured_gib)
    return Summary(
        rows=len(results),
        predicted=len(done),
        mape=mape([_error(r) for r in done]),
        mape_by_source={k: mape(v) for k, v in sorted(by_source.items())},
        constant_gib=constant,
        constant_mape=mape(list((constant - measured) / measured)),
        constant_loso_mape=mape(loso_constant),
        naive_mape=mape(naive),
    )


def as_dict(summary: Summary) -> dict[str, object]:
    return dataclasses.asdict(summary)
