"""Map rows of ``published_inference.csv`` to serving inputs, predict them, report the error.

Each source's metric is predicted in its own units (TTFT and TPOT in ms, output tokens/s of the
replica or per GPU, prefill included in the time as every source defines it).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.inference import estimate_inference
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import ModelSpec
from gpuscale.specs.training import Inference, KvDtype, WeightDtype

ENGINE_PROFILE = {"TensorRT-LLM": "tensorrt-llm", "LMDeploy": "lmdeploy", "gpt-fast": "gpt-fast"}


@dataclass(slots=True)
class InferenceResult:
    id: str
    source: str
    metric: str
    measured: float
    predicted: float | None = None
    skip_reason: str = ""
    assumptions: tuple[str, ...] = field(default=())

    @property
    def error(self) -> float:
        if self.predicted is None:
            raise ValueError(f"{self.id} was not predicted")
        return self.predicted / self.measured - 1.0

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "source": self.source,
            "metric": self.metric,
            "measured": self.measured,
            "predicted": self.predicted,
        }
        if self.predicted is None:
            out["skipped"] = self.skip_reason
        else:
            out["error"] = self.error
        return out


def source_of(row_id: str) -> str:
    return re.sub(r"-.*", "", row_id)


def _gpu(text: str, notes: list[str]) -> str:
    t = text.upper()
    if "H200" in t:
        return "h200-sxm"
    if "H100" in t:
        return "h100-sxm"
    if "L40S" in t:
        return "l40s"
    if "A100" in t:
        if "FORM FACTOR NOT STATED" in t or "NOT STATED" in t:
            notes.append("A100 form factor not stated: SXM4 80GB (HGX) assumed")
        return "a100-sxm-80gb"
    raise LookupError(f"GPU '{text}' is not in the catalog")


def _model(row: dict[str, str]) -> ModelSpec:
    name = row["model"]
    low = name.lower()
    gated = any(k in low for k in ("llama", "mistral", "mixtral"))
    moe = "mixtral" in low
    hidden = int(row["hidden"])
    return ModelSpec(
        name=name,
        num_layers=int(row["layers"]),
        hidden_size=hidden,
        num_heads=int(row["heads"]),
        num_kv_heads=int(row["kv_heads"]),
        ffn_hidden_size=int(row["ffn_hidden"]),
        vocab_size=int(row["vocab"]),
        max_seq_len=32768,
        mlp="gated" if gated else "plain",
        norm="rmsnorm" if gated else "layernorm",
        position="rope",
        num_experts=8 if moe else 1,
        experts_per_token=2 if moe else 1,
        source=row["source"],
    )


def _dtypes(precision: str) -> tuple[WeightDtype, KvDtype]:
    p = precision.lower()
    if "fp8" in p:
        return "fp8", "fp8" if "fp8 kv" in p else "bf16"
    if "int8" in p:
        return "int8", "bf16"
    if "int4" in p:
        return "int4", "bf16"
    return "bf16", "bf16"


def predict_row(row: dict[str, str]) -> InferenceResult:
    source = source_of(row["id"])
    result = InferenceResult(
        id=row["id"], source=source, metric=row["metric"], measured=float(row["value"])
    )
    notes: list[str] = []
    try:
        engine = next(p for k, p in ENGINE_PROFILE.items() if row["engine"].startswith(k))
        gpu = _gpu(row["gpu"], notes)
        if not row["tp"] or not row["input_len"] or not row["output_len"]:
            raise LookupError("tp or request lengths not stated")
    except (LookupError, StopIteration) as exc:
        result.skip_reason = str(exc) or "engine not modelled"
        return result
    tp, pp = int(row["tp"]), int(row["pp"] or 1)
    weights, kv = _dtypes(row["precision"])
    batch = int(row["batch_or_concurrency"])
    input_len, output_len = int(row["input_len"]), int(row["output_len"])
    model = _model(row)
    cluster = catalog.cluster(gpu, tp * pp, gpus_per_node=max(8, tp * pp))
    inference = Inference(
        weight_dtype=weights,
        kv_dtype=kv,
        batch=batch,
        context_len=input_len + output_len,
    )
    est = estimate_inference(
        model,
        cluster,
        inference,
        tp=tp,
        pp=pp,
        input_len=input_len,
        output_len=output_len,
        profile=load_profile(engine),
    )
    metric = row["metric"]
    value = {
        "ttft_ms": est.ttft_s * 1e3,
        "tpot_ms": est.tpot_s * 1e3,
        "output_tokens_per_s_total": est.output_tokens_per_s,
        "output_tokens_per_s_per_gpu": est.output_tokens_per_s / est.num_gpus,
    }.get(metric)
    if value is None:
        result.skip_reason = f"metric {metric} not modelled"
        return result
    result.predicted = float(value)
    result.assumptions = tuple(notes)
    return result


def evaluate_inference(path: Path) -> list[InferenceResult]:
    with path.open(newline="") as fh:
        return [predict_row(row) for row in csv.DictReader(fh)]


def summarize_inference(results: list[InferenceResult]) -> dict[str, Any]:
    done = [r for r in results if r.predicted is not None]

    def mape(rs: list[InferenceResult]) -> float:
        return float(np.mean([abs(r.error) for r in rs])) if rs else float("nan")

    groups: dict[str, list[InferenceResult]] = {}
    for r in done:
        groups.setdefault(f"{r.source}/{r.metric}", []).append(r)
    return {
        "per_group": {k: {"rows": len(v), "mape": mape(v)} for k, v in sorted(groups.items())},
        "overall": {"rows": len(done), "mape": mape(done)},
        "skipped": [f"{r.id}: {r.skip_reason}" for r in results if r.predicted is None],
    }
