"""Map rows of ``published_runs.csv`` to specs, predict them, and measure the error.

Every metric is converted to tokens/s per GPU with the *source's own* FLOP definition (see
the validation README), so that no source's accounting leaks into the comparison. Each
assumption for a field a source leaves blank is written next to the code that makes it.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.flops import model_flops_per_token
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.costmodel.uncertainty import parallelism_mix, regime_key
from gpuscale.specs import Cluster, ModelSpec, Plan, Training
from gpuscale.specs.plan import Recompute

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
            )
        else:
            out["skipped"] = self.skip_reason
        return out


def load_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def source_of(row_id: str) -> str:
    return re.sub(r"-.*", "", row_id)


def _int(value: str, default: int | None = None) -> int | None:
    value = value.strip()
    if not value:
        return default
    return int(float(value))


# --- hardware -------------------------------------------------------------------------------


def _gpu_id(text: str) -> str:
    t = text.upper()
    if "H100" in t:
        return "h100-sxm"  # DGX-H100 or unstated variant: NVIDIA's tables use HGX/DGX (SXM5)
    if "A100" in t and "40GB" in t:
        return "a100-sxm-40gb"
    if "A100" in t:
        return "a100-sxm-80gb"
    raise KeyError(text)


def _fabric(row: dict[str, str], notes: list[str]) -> tuple[str, int]:
    text = row["inter_node_link"]
    if "HDR" in text:
        return "ib-hdr200", 8
    if "1600 Gbps" in text and "RoCE" in text:
        return "roce-200", 8
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
    seq = int(row["seq_len"])
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

FRAMEWORK_BY_SOURCE = {
    "narayanan21": "megatron-lm-2021",
    "korthikanti22": "megatron-lm-2021",
    "megatron": "megatron",
    "nemo2407": "nemo",
    "torchtitan": "torchtitan",
    "llmfoundry": "llm-foundry",
    "bloom176b": "deepspeed",
}


def _plan_and_training(
    row: dict[str, str], model: ModelSpec, source: str, notes: list[str]
) -> tuple[Plan, Training, str]:
    n = int(row["n_gpus"])
    tp, pp = _int(row["tp"]), _int(row["pp"])
    sharding = row["sharding"]
    framework = FRAMEWORK_BY_SOURCE[source]
    if "ZeRO-3" in sharding and "DeepSpeed" in sharding:
        framework = "deepspeed"
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
    mb = _int(row["micro_batch"])
    if mb is None:
        mb = 1
        notes.append("micro-batch not stated: 1 (Megatron-Core default)")
    gb = int(row["global_batch"])

    if "ZeRO-3" in sharding or ("FSDP" in sharding and "SHARD_GRAD_OP" not in sharding):
        zero = 3
    elif "SHARD_GRAD_OP" in sharding:
        zero = 2
    elif "ZeRO-1" in sharding:
        zero = 1
    elif source in ("megatron", "nemo2407"):
        zero = 1
        notes.append("distributed optimizer assumed (Megatron-Core/NeMo default for these recipes)")
    else:
        zero = 0

    rc = row["recompute"].lower()
    recompute: Recompute
    if rc.startswith("full"):
        recompute = "full"
    elif rc.startswith("selective"):
        recompute = "selective"
    elif rc.startswith("none"):
        recompute = "none"
    else:
        recompute = "full" if source == "narayanan21" else "none"
        notes.append(
            f"recompute not stated: {recompute}"
            + (
                " (Table-1 FLOP formula and run scripts use full recompute)"
                if recompute == "full"
                else ""
            )
        )

    legacy = source in ("narayanan21", "korthikanti22", "bloom176b")
    sequence_parallel = source in ("megatron", "nemo2407") or (
        source == "korthikanti22" and "sequence parallel" in rc
    )
    precision = "fp8" if "fp8" in row["precision"].lower() else "bf16"
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
    training = Training(
        seq_len=int(row["seq_len"]),
        precision=precision,  # type: ignore[arg-type]
        flash_attention=not legacy,
    )
    return plan, training, framework


# --- measured value -------------------------------------------------------------------------


def _measured_tokens_per_gpu(row: dict[str, str], source: str) -> float:
    metric, value = row["metric"], float(row["value"])
    L, h, V, s = int(row["layers"]), int(row["hidden"]), int(row["vocab"]), int(row["seq_len"])
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
    raise LookupError(f"no FLOP definition for metric {metric} of source {source}")


def to_case(row: dict[str, str]) -> Case:
    """Row -> inputs; raises LookupError with the reason when a row cannot be predicted."""
    source = source_of(row["id"])
    notes: list[str] = []
    model = _model(row, notes)
    plan, training, framework = _plan_and_training(row, model, source, notes)
    fabric, nics = _fabric(row, notes)
    cluster = catalog.cluster(
        _gpu_id(row["gpu"]), plan.num_gpus, gpus_per_node=8, inter=fabric, nics_per_node=nics
    )
    return Case(
        id=row["id"],
        source=source,
        model=model,
        cluster=cluster,
        training=training,
        plan=plan,
        framework=framework,
        measured_tokens_per_s_per_gpu=_measured_tokens_per_gpu(row, source),
        assumptions=tuple(notes),
    )


def evaluate(rows: Iterable[dict[str, str]]) -> list[Result]:
    out: list[Result] = []
    for row in rows:
        source = source_of(row["id"])
        try:
            case = to_case(row)
        except LookupError as exc:
            out.append(
                Result(id=row["id"], source=source, measured=float("nan"), skip_reason=str(exc))
            )
            continue
        profile = load_profile(case.framework)
        est = estimate_plan(case.model, case.cluster, case.training, case.plan, profile)
        predicted = float(est.tokens_per_s[0] / case.plan.num_gpus)
        device = case.cluster.device
        baseline = (
            BASELINE_MFU
            * device.peak(case.training.precision)
            * 1e12
            / model_flops_per_token(case.model, case.training.seq_len)
        )
        out.append(
            Result(
                id=case.id,
                source=source,
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
            )
        )
    return out


def _mape(errors: list[float]) -> float:
    return float(np.mean(np.abs(errors))) if errors else float("nan")


def _p80(errors: list[float]) -> float:
    return float(np.percentile(np.abs(errors), 80)) if errors else float("nan")


MIN_ROWS_PER_REGIME = 3
"""A regime needs this many rows before its residuals define a band of its own."""


def bands(results: list[Result]) -> dict[str, Any]:
    """Error bands per regime (and coarser fallbacks) plus the validated ground, for
    ``catalog/data/validation_bands.yaml``."""
    done = [r for r in results if r.predicted is not None]
    groups: dict[str, list[float]] = {"overall": [r.error for r in done]}
    for r in done:
        generation, mix, _ = r.regime.split("/")
        for key in (r.regime, f"{generation}/{mix}", generation):
            groups.setdefault(key, []).append(r.error)
    regimes = {
        key: {
            "rows": len(errs),
            "mape": round(_mape(errs), 4),
            "p80_abs_error": round(_p80(errs), 4),
        }
        for key, errs in sorted(groups.items())
        if len(errs) >= MIN_ROWS_PER_REGIME
    }
    return {
        "regimes": regimes,
        "validated": {
            "generations": sorted({r.gpu_generation for r in done}),
            "frameworks": sorted({r.framework for r in done}),
            "fabrics": sorted({r.fabric for r in done}),
            "params_b": [
                round(min(r.params_b for r in done), 2),
                round(max(r.params_b for r in done), 1),
            ],
            "gpus": [min(r.num_gpus for r in done), max(r.num_gpus for r in done)],
        },
    }


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
        "skipped": [f"{r.id}: {r.skip_reason}" for r in results if r.predicted is None],
    }
