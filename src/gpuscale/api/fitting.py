"""``fit``: does a model fit one card (or a small set-up), what is the memory made of, and the
smallest set-up that holds it, as ``gpuscale fit`` answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.api.training import GpuArg, ModelArg, lora_rank_for, recompute_modules_for
from gpuscale.costmodel.inference_memory import inference_memory
from gpuscale.costmodel.memory import host_overflow, training_memory
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import Profile, load_training_profile
from gpuscale.errors import InputError, require
from gpuscale.planner import defaults
from gpuscale.planner.fit import (
    FitOption,
    MemorySaver,
    cheaper_ways_to_fit,
    fit_verdict,
    recompute_note,
    short_name,
    smallest_inference_setups,
    smallest_training_setups,
    suggestion,
)
from gpuscale.planner.words import experts
from gpuscale.specs import Device, ModelSpec, Plan, PlanBatch
from gpuscale.specs.plan import Recompute
from gpuscale.specs.training import (
    ALL_LINEAR,
    DEFAULT_RECOMPUTE_MODULES_FLAG,
    LORA_TARGETS,
    OFFLOADS,
    Inference,
    Training,
)
from gpuscale.specs.units import GIB
from gpuscale.specs.validity import (
    check_activation_offload_layers,
    check_cp,
    check_experts,
    check_pipeline,
    check_pp,
    check_tp,
)

__all__ = ["FitResult", "fit"]

DEFAULT_GPU = "h100-sxm"

TRAIN_PARTS: dict[str, str] = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states (+ fp32 master)",
    "activations": "activations",
    "overlap": "grads/activations overlap credit",
    "overhead": "framework (context, NCCL, allocator)",
}
"""Memory parts of a training job (``breakdown_gib`` keys) and their words."""
INFER_PARTS: dict[str, str] = {
    "weights": "weights",
    "kv_cache": "KV cache",
    "activations": "activations",
    "overhead": "framework (context, NCCL, allocator)",
}


def parse_lora_targets(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """``"all"`` (every linear layer) or a comma list / sequence of :data:`LORA_TARGETS`."""
    if isinstance(text, str):
        if text.strip().lower() in ("all", "all-linear"):
            return ALL_LINEAR
        names = tuple(t.strip().lower() for t in text.split(",") if t.strip())
    else:
        names = tuple(t.lower() for t in text)
    for name in names:
        if name not in LORA_TARGETS:
            raise InputError(
                f"--lora-targets: unknown layer '{name}'; accepted: "
                f"{', '.join(LORA_TARGETS)} or 'all'",
                field="lora_targets",
            )
    return names


def _positive(flag: str, value: int) -> None:
    require(
        value >= 1,
        f"{flag} must be a positive integer, got {value}",
        field=flag.removeprefix("--").replace("-", "_"),
    )


def _within_context(spec: ModelSpec, flag: str, tokens: int) -> None:
    require(
        1 <= tokens <= spec.max_seq_len,
        f"{flag} must be 1 to {spec.max_seq_len} ({spec.name}'s maximum context), got {tokens}",
        field=flag.removeprefix("--"),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class FitResult:
    """Memory per GPU of one set-up, the verdict, and the smallest set-ups that fit
    (``gpuscale fit --json``)."""

    model: str
    params: float
    device: Device
    mode: str
    """``train`` or ``infer``."""
    job: Mapping[str, Any]
    """The settings that shape the memory (``training`` or ``inference`` in the JSON)."""
    plan: Mapping[str, int]
    profile: str
    memory_bytes: Mapping[str, float]
    """Bytes per GPU by part (:data:`TRAIN_PARTS` / :data:`INFER_PARTS`), plus ``total`` and,
    when training, ``allocated``, ``reserved`` and ``host``."""
    fits: bool
    verdict: str
    smallest: tuple[FitOption, ...]
    gpus_per_node: int
    notes: tuple[str, ...]
    details: str
    """The settings in words, for the heading."""
    savers: tuple[MemorySaver, ...] = ()
    """Training only: the least intrusive changes of settings that hold the model on the same
    GPUs within the planner's memory budget (:func:`~gpuscale.planner.fit.cheaper_ways_to_fit`);
    empty when it fits already or nothing does."""

    @property
    def parts(self) -> dict[str, str]:
        return TRAIN_PARTS if self.mode == "train" else INFER_PARTS

    @property
    def num_gpus(self) -> int:
        return int(self.plan["gpus"])

    @property
    def total_gib(self) -> float:
        return self.memory_bytes["total"] / GIB

    @property
    def heading(self) -> str:
        return (
            f"{self.model} ({self.params / 1e9:,.2f}B params) · {self.mode} · {self.details} · "
            f"{self.num_gpus}x {self.device.name} ({self.device.memory_gib:g} GiB)"
        )

    @property
    def suggestion(self) -> str | None:
        """The smallest set-ups in words; ``None`` when one GPU already holds it."""
        if self.fits and self.num_gpus == 1:
            return None
        return suggestion(list(self.smallest), self.device, self.gpus_per_node)

    def to_dict(self) -> dict[str, Any]:
        m = self.memory_bytes
        body: dict[str, Any] = {
            "model": self.model,
            "params": self.params,
            "gpu": self.device.id,
            "mode": self.mode,
            "training" if self.mode == "train" else "inference": dict(self.job),
            "plan": dict(self.plan),
            "profile": self.profile,
            "breakdown_gib": {k: m[k] / GIB for k in self.parts},
        }
        if self.mode == "train":
            body.update(
                allocated_gib=m["allocated"] / GIB,
                reserved_gib=m["reserved"] / GIB,
                host_gib=m["host"] / GIB,
            )
        body.update(
            total_gib=m["total"] / GIB,
            capacity_gib=self.device.memory_gib,
            fits=self.fits,
            headroom_gib=(self.device.memory_bytes - m["total"]) / GIB,
            verdict=self.verdict,
            smallest=[self._option(o) for o in self.smallest],
        )
        if self.mode == "train":
            # sizes in GiB, as every other size of this document
            body["savers"] = [
                {
                    "key": sv.key,
                    "change": sv.change,
                    "cost": sv.cost,
                    "memory_gib": sv.memory_bytes / GIB,
                    "saved_gib": sv.saved_bytes / GIB,
                    "fits": sv.fits,
                }
                for sv in self.savers
            ]
        body["notes"] = list(self.notes)
        return document(body)

    def _option(self, option: FitOption) -> dict[str, Any]:
        return {
            "layout": option.family,
            "description": option.describe(self.gpus_per_node, short_name(self.device)),
            "layout_text": option.layout(),
            "gpus": option.gpus,
            "tp": option.tp,
            "pp": option.pp,
            "dp": option.dp,
            "zero": option.zero,
            "ep": option.ep,
            "memory_per_gpu_gib": option.memory_bytes / GIB,
        }

    def figures(self) -> list[Any]:
        from gpuscale.report.fit import memory_figure

        return [memory_figure(self)]


@checks_arguments
def fit(
    model: ModelArg,
    *,
    gpu: GpuArg = DEFAULT_GPU,
    mode: str = "train",
    gpus_per_node: int | None = None,
    framework: str = "generic",
    profile: str | Path | None = None,
    seq: int | None = None,
    mbs: int = 1,
    grad_accum: int = 1,
    precision: str = "bf16",
    pure_bf16: bool = False,
    optimizer: str = "adamw",
    finetune: str = "full",
    lora_rank: int | None = None,
    lora_targets: str | tuple[str, ...] | list[str] = "all",
    double_quant: bool = True,
    paged_optimizer: bool = False,
    offload: str = "none",
    optimizer_in_backward: bool = False,
    activation_offload: bool = False,
    activation_offload_layers: int = 0,
    recompute: str = "none",
    recompute_modules: str | tuple[str, ...] | list[str] = DEFAULT_RECOMPUTE_MODULES_FLAG,
    flash_attention: bool = True,
    loss: str = "standard",
    dropout: bool = False,
    grad_reduce_in_bf16: bool = False,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    vp: int = 1,
    ep: int = 1,
    etp: int | None = None,
    first_stage_layers: int = 0,
    last_stage_layers: int = 0,
    embedding_as_layer: bool = False,
    loss_as_layer: bool = False,
    zero: int = 0,
    batch: int = 1,
    context: int | None = None,
    weights: str = "bf16",
    kv_dtype: str = "bf16",
) -> FitResult:
    """Does ``model`` fit on ``gpu``? Memory per GPU by part, the verdict, and the smallest
    set-ups that fit. ``mode="infer"`` sizes a serving job (``batch`` sequences of ``context``
    tokens, ``weights``/``kv_dtype`` storage) instead of training.

    ``seq`` defaults to the model's context, at most 4096; ``context`` to ``seq``.
    ``first_stage_layers``/``last_stage_layers`` or ``embedding_as_layer``/``loss_as_layer``
    shape an uneven pipeline split (training), as in :func:`gpuscale.api.estimate`.
    ``framework`` picks the training stack's profile (how it allocates: Transformer Engine's
    low-precision saved inputs under ``megatron``, the allocator reserve), as ``estimate`` does,
    so both give one memory figure for one run; ``profile`` is laid over it.
    """
    require(
        mode in ("train", "infer"), f"--mode must be train or infer, got {mode!r}", field="mode"
    )
    require(offload in OFFLOADS, f"--offload must be one of {', '.join(OFFLOADS)}", field="offload")
    # Serving memory comes from the engine's own profile (``infer``), not a training stack's.
    require(
        mode == "train" or framework == "generic",
        f"--framework {framework} is a training stack and applies to --mode train; accepted: "
        "--mode train with it, or leave it out",
        field="framework",
    )
    spec = catalog.model(model)
    device = catalog.gpu(gpu)
    prof = load_training_profile(framework, None if profile is None else str(profile))
    seq_len = seq if seq is not None else int(defaults.seq_len(spec).value)
    _within_context(spec, "--seq", seq_len)
    gpus_per_node = catalog.node_size(device, gpus_per_node)
    for flag, value in (("--gpus-per-node", gpus_per_node), ("--tp", tp), ("--pp", pp)):
        _positive(flag, value)
    catalog.check_node(device, gpus_per_node)
    check_tp(spec, tp)
    check_pp(spec, pp)
    if mode == "infer":
        return _fit_infer(
            spec, device, prof, gpus_per_node, tp, pp, seq_len, batch, context, weights, kv_dtype
        )
    for flag, value in (("--mbs", mbs), ("--grad-accum", grad_accum), ("--dp", dp), ("--cp", cp)):
        _positive(flag, value)
    rank = lora_rank_for(spec, finetune, lora_rank)
    check_cp(seq_len, cp)
    require(
        zero == 0 or dp * cp > 1,
        f"--zero {zero} shards over the data-parallel ranks, and --dp x --cp is 1; accepted: "
        "--zero with --dp (or --cp) of 2 or more, or --zero 0",
        field="zero",
    )
    # Stepping each parameter as its gradient arrives frees the gradient at once, so there is
    # nothing to accumulate into (torchtune rejects optimizer_in_bwd with
    # gradient_accumulation_steps > 1 for the same reason).
    require(
        not (optimizer_in_backward and grad_accum > 1),
        f"--optimizer-in-backward cannot accumulate gradients, got --grad-accum {grad_accum}; "
        "accepted: --grad-accum 1 with it, or leave it out",
        field="optimizer_in_backward",
    )
    # Pure 16-bit training without fp32 master weights is a bf16 recipe (torchtune, LitGPT
    # "bf16-true"): fp16 needs fp32 masters and loss scaling, fp32 has no master copy, and fp8
    # recipes keep bf16 weights with fp32 masters.
    require(
        not pure_bf16 or precision == "bf16",
        f"--pure-bf16 needs --precision bf16, got {precision}; accepted: --pure-bf16 with "
        "--precision bf16, or leave it out",
        field="pure_bf16",
    )
    targets = parse_lora_targets(lora_targets)
    for flag, value in (("--vp", vp), ("--ep", ep), ("--etp", etp or 1)):
        _positive(flag, value)
    modules = recompute_modules_for(spec, recompute, recompute_modules)
    training = Training(
        seq_len=seq_len,
        precision=precision,  # type: ignore[arg-type]
        optimizer=optimizer,  # type: ignore[arg-type]
        master_weights=not pure_bf16,
        finetune=finetune,  # type: ignore[arg-type]
        lora_rank=rank,
        lora_targets=targets,  # type: ignore[arg-type]
        double_quant=double_quant,
        paged_optimizer=paged_optimizer,
        offload_optimizer=offload != "none",
        offload_params=offload == "params",
        optimizer_in_backward=optimizer_in_backward,
        activation_offload=activation_offload,
        activation_offload_layers=activation_offload_layers,
        loss=loss,  # type: ignore[arg-type]
        flash_attention=flash_attention,
        dropout=dropout,
        recompute_modules=modules,
        grad_reduce_in_bf16=grad_reduce_in_bf16,
    )
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=vp,
        ep=ep,
        etp=etp or 0,
        zero=zero if dp * cp > 1 else 0,
        micro_batch=mbs,
        global_batch=mbs * dp * grad_accum,
        recompute=cast(Recompute, recompute),
        first_stage_layers=first_stage_layers,
        last_stage_layers=last_stage_layers,
        embedding_in_split=embedding_as_layer,
        loss_in_split=loss_as_layer,
    )
    check_pipeline(spec, plan)
    check_experts(spec, plan)
    check_activation_offload_layers(spec, plan, training.activation_offload_layers)
    memory = training_memory(spec, training, PlanBatch.from_plans([plan]), prof).row(0)
    fits, verdict = fit_verdict(memory["total"], device, plan.num_gpus)
    options = smallest_training_setups(
        spec, training, device, plan, prof, gpus_per_node=gpus_per_node
    )
    notes: list[str] = []
    overflow = host_overflow(memory["host"], prof)
    if overflow:
        notes.append(overflow)
    if not fits:
        note = recompute_note(
            spec, training, device, plan, prof, options, gpus_per_node=gpus_per_node
        )
        if note:
            notes.append(note)
    savers = cheaper_ways_to_fit(spec, training, plan, device, prof)
    method = {"full": "full fine-tune", "lora": f"LoRA r{rank}", "qlora": f"QLoRA r{rank}"}[
        finetune
    ]
    weights_text = (
        "fp32"
        if precision == "fp32"
        else (f"pure {precision}" if pure_bf16 else f"{precision} + fp32 master")
    )
    return FitResult(
        model=spec.name,
        params=total_params(spec),
        device=device,
        mode="train",
        job={
            "seq_len": seq_len,
            "mbs": mbs,
            "grad_accum": grad_accum,
            "precision": precision,
            "master_weights": not pure_bf16,
            "optimizer": optimizer,
            "finetune": finetune,
            "lora_rank": rank if finetune != "full" else None,
            "lora_targets": list(targets) if finetune != "full" else None,
            "offload": offload,
            "paged_optimizer": paged_optimizer,
            "recompute": recompute,
            "recompute_modules": list(modules),
            "grad_reduce_in_bf16": grad_reduce_in_bf16,
            "activation_offload": activation_offload,
            "activation_offload_layers": activation_offload_layers,
            "framework": framework,
        },
        plan={
            "gpus": plan.num_gpus,
            "tp": tp,
            "pp": pp,
            "dp": dp,
            "cp": cp,
            "vp": vp,
            "ep": plan.ep,
            "etp": plan.etp,
            "zero": plan.zero,
            "first_stage_layers": plan.first_stage_layers,
            "last_stage_layers": plan.last_stage_layers,
            "embedding_as_layer": plan.embedding_in_split,
            "loss_as_layer": plan.loss_in_split,
        },
        profile=prof.name,
        memory_bytes=memory,
        fits=fits,
        verdict=verdict,
        smallest=tuple(options),
        gpus_per_node=gpus_per_node,
        notes=tuple(notes),
        details=f"{method}, {weights_text}, {optimizer} · seq {seq_len} · mbs {mbs} · "
        f"recompute {recompute}"
        + (f" ({','.join(modules) or 'nothing'})" if recompute == "selective" else "")
        + (f" · {experts(plan)}" if plan.ep > 1 else ""),
        savers=tuple(savers),
    )


def _fit_infer(
    spec: ModelSpec,
    device: Device,
    prof: Profile,
    gpus_per_node: int,
    tp: int,
    pp: int,
    seq_len: int,
    batch: int,
    context: int | None,
    weights: str,
    kv_dtype: str,
) -> FitResult:
    context_len = context if context is not None else seq_len
    _positive("--batch", batch)
    _within_context(spec, "--context", context_len)
    inference = Inference(
        weight_dtype=weights,  # type: ignore[arg-type]
        kv_dtype=kv_dtype,  # type: ignore[arg-type]
        batch=batch,
        context_len=context_len,
    )
    memory = inference_memory(spec, inference, tp, pp, prof).row(0)
    fits, verdict = fit_verdict(memory["total"], device, tp * pp)
    options = smallest_inference_setups(spec, inference, device, prof, gpus_per_node=gpus_per_node)
    return FitResult(
        model=spec.name,
        params=total_params(spec),
        device=device,
        mode="infer",
        job={
            "weight_dtype": weights,
            "kv_dtype": kv_dtype,
            "batch": batch,
            "context_len": context_len,
        },
        plan={"gpus": tp * pp, "tp": tp, "pp": pp},
        profile=prof.name,
        memory_bytes=memory,
        fits=fits,
        verdict=verdict,
        smallest=tuple(options),
        gpus_per_node=gpus_per_node,
        notes=(),
        details=f"{weights} weights, {kv_dtype} KV · batch {batch} · context {context_len}",
    )
