"""``estimate``: one training step of one plan on one cluster, as ``gpuscale estimate`` answers."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, TypeVar, cast

from gpuscale import catalog
from gpuscale.api._booleans import bool_fields, check_booleans
from gpuscale.api._json import document
from gpuscale.costmodel.memory import host_overflow, plan_memory
from gpuscale.costmodel.profile import load_training_profile, profile_names
from gpuscale.costmodel.step import estimate_plan
from gpuscale.costmodel.terms import coarse
from gpuscale.costmodel.uncertainty import Band, band_for
from gpuscale.errors import InputError, require
from gpuscale.planner import defaults
from gpuscale.planner.words import bottleneck
from gpuscale.specs import Cluster, Device, JobOptions, Link, ModelSpec, Plan, Training
from gpuscale.specs.plan import Recompute
from gpuscale.specs.training import (
    DEFAULT_RECOMPUTE_MODULES,
    DEFAULT_RECOMPUTE_MODULES_FLAG,
    RECOMPUTE_MODULES,
    Finetune,
    Loss,
    TrainPrecision,
)
from gpuscale.specs.units import GIB
from gpuscale.specs.validity import (
    check_activation_offload_layers,
    check_ep_overlap,
    check_lora_rank,
    check_plan,
    check_recompute_modules,
)

F = TypeVar("F", bound=Callable[..., Any])

ModelArg = str | Path | ModelSpec
"""A catalog model id, a Hugging Face ``config.json`` (or its folder), or a :class:`ModelSpec`."""
GpuArg = str | Device
"""A catalog GPU id or a :class:`Device`."""
FabricArg = str | Link
"""A catalog fabric id or a :class:`Link`."""

__all__ = ["EstimateResult", "TrainingRun", "estimate", "profile_names"]

DEFAULT_LORA_RANK = 16
"""LoRA rank when none is given (Hu et al. 2021 study r 1-64; PEFT and torchtune recipes use
8-16)."""


MAX_GPUS = 2**20
"""Most GPUs a search covers: above the largest clusters built (about 10^5 GPUs); the search's
time and memory grow with the count (2^30 GPUs took 95 s and 18 GB)."""


def gpu_count(value: int, field: str) -> None:
    """Refuse a GPU count outside 1 to :data:`MAX_GPUS`: the one bound of every job, search
    and deployment size."""
    require(
        1 <= value <= MAX_GPUS,
        f"--{field.replace('_', '-')} must be 1 to {MAX_GPUS:,} (2^20 GPUs, above the largest "
        f"clusters built), got {value}",
        field=field,
    )


MAX_SEQ = 1 << 24
"""Longest sequence a run takes: 16.7M tokens, past the longest released context (Llama 4
Scout's 10M) and the config.json parser's bound on any size (``hf_config.MAX_DIMENSION``);
--seq 10^12 was priced, with a warning, as a 10^11 s step."""

MAX_STEP_TOKENS = 1 << 34
"""Most tokens in one optimizer step (gbs x seq, and mbs x seq): ~1000x Llama 3 405B's 16M-token
batch (Llama 3 paper, arXiv:2407.21783 Sec. 3.4.1), so a larger one is a typo; --gbs 10^15 was
priced as a 10^13 s step."""


def _step_tokens(*, seq: int, gbs: int, mbs: int) -> None:
    """Refuse a sequence or a batch beyond any run (:data:`MAX_SEQ`, :data:`MAX_STEP_TOKENS`),
    naming the flag."""
    require(
        seq <= MAX_SEQ,
        f"--seq {seq} is longer than any model's context; accepted: 1 to {MAX_SEQ:,} tokens",
        field="seq",
    )
    for name, batch in (("mbs", mbs), ("gbs", gbs)):
        require(
            batch * seq <= MAX_STEP_TOKENS,
            f"--{name} {batch} x --seq {seq} = {batch * seq:,} tokens in one step, more than "
            f"{MAX_STEP_TOKENS:,} (2^34, ~1000x the largest published batch); accepted: a "
            f"batch of at most {MAX_STEP_TOKENS // seq:,} sequences of {seq} tokens",
            field=name,
        )


def _plan_size(**degrees: int) -> None:
    """Without --gpus the job is tp x pp x dp x cp GPUs: refuse one above :data:`MAX_GPUS`
    naming the largest degree, the flag that was typed too large (not --gpus, never typed)."""
    product = math.prod(degrees.values())
    name = max(degrees, key=lambda k: degrees[k])
    require(
        product <= MAX_GPUS,
        f"--{name} {degrees[name]}: tp x pp x dp x cp = "
        f"{' x '.join(str(v) for v in degrees.values())} = {product:,} GPUs, more than "
        f"{MAX_GPUS:,} (2^20, above the largest clusters built); accepted: degrees whose "
        f"product is at most {MAX_GPUS:,}",
        field=name,
    )


def _positive(**values: int) -> None:
    for name, value in values.items():
        require(
            isinstance(value, int) and value >= 1,
            f"--{name.replace('_', '-')} must be a positive integer, got {value!r}",
            field=name,
        )


def lora_rank_for(model: ModelSpec, finetune: str, lora_rank: int | None) -> int:
    """The adapter rank to use: refused without adapters, checked against the model."""
    if finetune == "full":
        if lora_rank is not None:
            raise InputError(
                "--lora-rank applies to --finetune lora or qlora; add one, or leave it out",
                field="lora_rank",
            )
        return DEFAULT_LORA_RANK
    rank = DEFAULT_LORA_RANK if lora_rank is None else lora_rank
    check_lora_rank(model, rank)
    return rank


def plan_document(p: Plan) -> dict[str, Any]:
    """The ``plan`` object of a ``--json`` document, in the flag names of :class:`TrainingRun`
    (``mbs``, ``gbs``, ``embedding_as_layer``): the one spelling of a plan that ``estimate`` and
    ``calibrate run`` echo."""
    return {
        "tp": p.tp,
        "pp": p.pp,
        "dp": p.dp,
        "cp": p.cp,
        "vp": p.vp,
        "ep": p.ep,
        "etp": p.etp,
        "mbs": p.micro_batch,
        "gbs": p.global_batch,
        "recompute": p.recompute,
        "zero": p.zero,
        "sequence_parallel": p.sequence_parallel,
        "first_stage_layers": p.first_stage_layers,
        "last_stage_layers": p.last_stage_layers,
        "embedding_as_layer": p.embedding_in_split,
        "loss_as_layer": p.loss_in_split,
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateResult:
    """One predicted training step (``gpuscale estimate --json``)."""

    model: str
    gpu: str
    gpus: int
    gpus_per_node: int
    inter: str
    framework: str
    profile: str
    seq: int
    precision: str
    compile: bool
    """The run is priced under torch.compile (``--compile``)."""
    plan: Plan
    recompute_modules: tuple[str, ...]
    """What ``recompute="selective"`` re-runs (``--recompute-modules``)."""
    loss: str
    """How the cross-entropy holds the logits (``--loss``)."""
    grad_reduce_in_bf16: bool
    """Gradient buffer and data-parallel reduction in bf16 (``--grad-reduce-in-bf16``)."""
    activation_offload_layers: int
    """Layers whose saved activations live in host memory (``--activation-offload-layers``)."""
    ep_overlap: bool
    """Expert-parallel all-to-alls overlapped across micro-batches (``--ep-overlap``)."""
    fits: bool
    memory_per_gpu_gib: float
    host_memory_per_gpu_gib: float
    """Offloaded states and activations in host memory per GPU (not in ``memory_per_gpu_gib``)."""
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    tflops_per_gpu: float
    """Model FLOPs (no recompute) per GPU per second, TFLOP/s."""
    mfu: float
    parts_s: Mapping[str, float]
    """Seconds per part of the step (:data:`gpuscale.costmodel.terms.PARTS`); sum = step."""
    recompute_s: float
    """Part of the compute spent recomputing activations."""
    band: Band
    """Error band of the prediction's validation regime, with its warnings."""
    bottleneck: str
    assumed: Mapping[str, str] = field(default_factory=dict)
    """Argument -> the default chosen for it and why."""

    @property
    def breakdown(self) -> dict[str, float]:
        """Seconds per ``breakdown`` term (communication kinds summed); sum = step."""
        return coarse(dict(self.parts_s))

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.band.warnings

    def to_dict(self) -> dict[str, Any]:
        return document(
            {
                "model": self.model,
                "gpu": self.gpu,
                "gpus": self.gpus,
                "gpus_per_node": self.gpus_per_node,
                "inter": self.inter,
                "framework": self.framework,
                "profile": self.profile,
                "seq": self.seq,
                "precision": self.precision,
                "compile": self.compile,
                "plan": plan_document(self.plan),
                "recompute_modules": list(self.recompute_modules),
                "loss": self.loss,
                "grad_reduce_in_bf16": self.grad_reduce_in_bf16,
                "activation_offload_layers": self.activation_offload_layers,
                "ep_overlap": self.ep_overlap,
                "assumed": dict(self.assumed),
                "fits": self.fits,
                "memory_per_gpu_gib": self.memory_per_gpu_gib,
                "host_memory_per_gpu_gib": self.host_memory_per_gpu_gib,
                "step_time_s": self.step_time_s,
                "tokens_per_s": self.tokens_per_s,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
                "tflops_per_gpu": self.tflops_per_gpu,
                "mfu": self.mfu,
                "breakdown": self.breakdown,
                "exposed_comm_parts": {
                    k: v for k, v in self.parts_s.items() if k.startswith("comm_")
                },
                "recompute_s": self.recompute_s,
                "uncertainty": self.band.as_dict(),
                "bottleneck": self.bottleneck,
            }
        )

    def figures(self) -> list[Any]:
        from gpuscale.report.estimate import step_figure

        return [step_figure(self.parts_s, f"{self.model}: {self.step_time_s:.3g} s per step")]


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInputs:
    """One training run as the cost model takes it: the specs a :class:`TrainingRun` resolves
    to."""

    model: ModelSpec
    cluster: Cluster
    training: Training
    plan: Plan
    job: JobOptions
    assumed: Mapping[str, str]
    """Argument -> the default chosen for it and why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainingRun:
    """One training run as the user describes it: the model, the cluster, the parallel plan and
    the training choices. Each field is the keyword argument of the same name of
    :func:`estimate` and :func:`gpuscale.api.calibrate_run` (and, dashed, their flag; described
    in :data:`gpuscale.api.params.PARAMS`), with its default here and only here. Both functions
    take a ``TrainingRun`` or its fields as keyword arguments; it is checked once, when built,
    and refused with the argument at fault when the plan cannot run the model.

    ``dp`` defaults to ``gpus / (tp * pp * cp)``; ``gbs`` to the recipe batch that ``plan``
    assumes (:func:`gpuscale.planner.defaults.global_batch_for`, reported in ``assumed``);
    ``lora_rank`` to 16 with ``finetune`` lora or qlora; ``gpus_per_node`` to the GPU's NVLink
    domain. Pipeline stages split the layers evenly, or automatically unevenly when ``pp * vp``
    does not divide them; ``first_stage_layers``/``last_stage_layers`` or
    ``embedding_as_layer``/``loss_as_layer`` shape the split as Megatron-Core's flags do.
    """

    model: ModelArg
    gpu: GpuArg
    gpus: int | None = None
    gpus_per_node: int | None = None
    inter: FabricArg = catalog.DEFAULT_INTER
    nics_per_node: int | None = None
    slowest_gpu: GpuArg | None = None
    tp: int = 1
    pp: int = 1
    dp: int | None = None
    cp: int = 1
    vp: int = 1
    ep: int = 1
    etp: int | None = None
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    embedding_as_layer: bool = False
    loss_as_layer: bool = False
    mbs: int = 1
    gbs: int | None = None
    seq: int = 4096
    recompute: str = "none"
    recompute_modules: str | tuple[str, ...] = DEFAULT_RECOMPUTE_MODULES_FLAG
    zero: int = 0
    precision: str = "bf16"
    finetune: str = "full"
    lora_rank: int | None = None
    offload_optimizer: bool = False
    sequence_parallel: bool = True
    flash_attention: bool = True
    loss: str = "standard"
    grad_reduce_in_bf16: bool = False
    activation_offload_layers: int = 0
    ep_overlap: bool = False
    compile: bool = False
    storage_gbps: float = 0.0
    checkpoint_every: int = 0
    checkpoint_gbps: float = 10.0
    specs: RunInputs = field(init=False, repr=False, compare=False)
    """The specs the cost model takes, with the defaults chosen (set when built)."""

    def __post_init__(self) -> None:
        for name, value in check_booleans(bool_fields(self)).items():
            object.__setattr__(self, name, value)  # a numpy bool kept as the Python one
        object.__setattr__(self, "specs", _resolve(self))


def parse_recompute_modules(text: str | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """A comma list (or sequence) of :data:`RECOMPUTE_MODULES`; ``"none"`` or ``""`` is none."""
    items = text.split(",") if isinstance(text, str) else [str(t) for t in text]
    names = tuple(t.strip().lower() for t in items if t.strip())
    if names == ("none",):
        names = ()
    for name in names:
        require(
            name in RECOMPUTE_MODULES,
            f"--recompute-modules: unknown module '{name}'; accepted: a comma list of "
            f"{', '.join(RECOMPUTE_MODULES)}, or none",
            field="recompute_modules",
        )
    require(
        len(set(names)) == len(names),
        f"--recompute-modules names a module twice: {','.join(names)}",
        field="recompute_modules",
    )
    return names


def recompute_modules_for(
    spec: ModelSpec, recompute: str, text: str | tuple[str, ...] | list[str]
) -> tuple[str, ...]:
    """The modules ``--recompute-modules`` names, refused in one line where they cannot apply:
    without ``--recompute selective`` (unless the default list) or on a model without them."""
    modules = parse_recompute_modules(text)
    require(
        recompute == "selective" or modules in (DEFAULT_RECOMPUTE_MODULES, ()),
        f"--recompute-modules {','.join(modules) or 'none'} applies with --recompute selective, "
        f"got --recompute {recompute}; accepted: --recompute selective with it, or leave it out",
        field="recompute_modules",
    )
    check_recompute_modules(spec, modules)
    return modules


def _resolve(r: TrainingRun) -> RunInputs:
    """The specs of run ``r`` with the defaults chosen; refused with the argument at fault when
    the plan cannot run the model."""
    spec = catalog.model(r.model)
    tp, pp, dp, cp, gpus, gbs = r.tp, r.pp, r.dp, r.cp, r.gpus, r.gbs
    _positive(tp=tp, pp=pp, cp=cp, vp=r.vp, ep=r.ep, mbs=r.mbs, seq=r.seq)
    if r.etp is not None:
        _positive(etp=r.etp)
    rank = lora_rank_for(spec, r.finetune, r.lora_rank)
    if gpus is not None:
        _positive(gpus=gpus)
    if dp is None:
        if gpus is None:
            raise InputError("give --gpus or --dp", field="gpus")
        require(
            gpus % (tp * pp * cp) == 0,
            f"--gpus {gpus} is not divisible by tp x pp x cp = {tp * pp * cp}",
            field="gpus",
        )
        dp = gpus // (tp * pp * cp)
    _positive(dp=dp)
    if gpus is None:
        _plan_size(tp=tp, pp=pp, dp=dp, cp=cp)
    num_gpus = gpus if gpus is not None else tp * pp * dp * cp
    gpu_count(num_gpus, "gpus")
    assumed: dict[str, str] = {}
    if gbs is None:
        chosen = defaults.global_batch_for(spec, r.seq, r.mbs * dp)
        gbs = int(chosen.value)
        assumed["gbs"] = chosen.why
    _step_tokens(seq=r.seq, gbs=gbs, mbs=r.mbs)
    plan = Plan(
        tp=tp,
        pp=pp,
        dp=dp,
        cp=cp,
        vp=r.vp,
        ep=r.ep,
        etp=r.etp or 0,
        micro_batch=r.mbs,
        global_batch=gbs,
        recompute=cast(Recompute, r.recompute),
        zero=r.zero,
        sequence_parallel=r.sequence_parallel,
        first_stage_layers=r.first_stage_layers,
        last_stage_layers=r.last_stage_layers,
        embedding_in_split=r.embedding_as_layer,
        loss_in_split=r.loss_as_layer,
    )
    require(
        plan.num_gpus == num_gpus,
        f"tp x pp x dp x cp = {plan.tp} x {plan.pp} x {plan.dp} x {plan.cp} = {plan.num_gpus} "
        f"but --gpus is {num_gpus}",
        field="gpus",
    )
    check_plan(spec, plan, r.seq)
    modules = recompute_modules_for(spec, r.recompute, r.recompute_modules)
    # Where no GPU count was typed, the refusal of a part-filled node names the degrees that
    # make it (it named a --gpus nobody typed).
    derived = f"tp x pp x dp x cp = {tp} x {pp} x {dp} x {cp} = {num_gpus} GPUs"
    cluster = catalog.cluster(
        r.gpu,
        num_gpus,
        gpus_per_node=r.gpus_per_node,
        inter=r.inter,
        nics_per_node=r.nics_per_node,
        count=None if gpus is not None else derived,
        count_field="gpus" if gpus is not None else None,
    )
    if r.slowest_gpu is not None:
        cluster = replace(cluster, slowest_device=catalog.gpu(r.slowest_gpu))
    training = Training(
        seq_len=r.seq,
        precision=cast(TrainPrecision, r.precision),
        flash_attention=r.flash_attention,
        loss=cast(Loss, r.loss),
        recompute_modules=modules,
        grad_reduce_in_bf16=r.grad_reduce_in_bf16,
        activation_offload_layers=r.activation_offload_layers,
        ep_overlap=r.ep_overlap,
        finetune=cast(Finetune, r.finetune),
        lora_rank=rank,
        offload_optimizer=r.offload_optimizer,
        compile=r.compile,
    )
    check_activation_offload_layers(spec, plan, training.activation_offload_layers)
    check_ep_overlap(spec, plan, training)
    job = JobOptions(
        storage_gb_per_s_per_node=r.storage_gbps,
        checkpoint_every_steps=r.checkpoint_every,
        checkpoint_write_gb_per_s=r.checkpoint_gbps,
    )
    return RunInputs(
        model=spec, cluster=cluster, training=training, plan=plan, job=job, assumed=assumed
    )


def training_settings(training: Training, plan: Plan) -> dict[str, Any]:
    """The training settings ``estimate --json`` echoes beside the plan, in its keys."""
    return {
        "recompute_modules": list(training.recompute_modules)
        if plan.recompute == "selective"
        else [],
        "loss": training.loss,
        "grad_reduce_in_bf16": training.grad_reduce_in_bf16,
        "activation_offload_layers": training.activation_offload_layers,
        "ep_overlap": training.ep_overlap,
    }


def training_run(model: ModelArg | TrainingRun, fields: Mapping[str, Any]) -> TrainingRun:
    """The run an API function was given: a :class:`TrainingRun` (``fields`` replacing its
    values), or the model and the run's fields as keyword arguments."""
    if isinstance(model, TrainingRun):
        return replace(model, **fields) if fields else model
    return TrainingRun(model=model, **fields)


def takes_training_run(func: F) -> F:
    """Declare what ``func(model, *, ..., **run)`` accepts: ``model`` (or a whole
    :class:`TrainingRun`), every field of :class:`TrainingRun` as a keyword argument with its
    default, then ``func``'s own keyword arguments; so ``help()``, :mod:`inspect` and the test
    that holds each flag's default to the API's (``tests/unit/test_params.py``) see them."""
    signature = inspect.signature(func)
    first, *rest = signature.parameters.values()
    own = [p for p in rest if p.kind is inspect.Parameter.KEYWORD_ONLY]
    run = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if f.default is MISSING else f.default,
            annotation=f.type,
        )
        for f in dataclass_fields(TrainingRun)
        if f.init and f.name != "model"
    ]
    func.__signature__ = signature.replace(parameters=[first, *run, *own])  # type: ignore[attr-defined]
    return func


@takes_training_run
def estimate(
    model: ModelArg | TrainingRun,
    *,
    framework: str = "generic",
    profile: str | Path | None = None,
    **run_fields: Any,
) -> EstimateResult:
    """Predict one training step of ``model`` on ``gpus`` x ``gpu`` under one parallel plan.

    ``model`` and the keyword arguments describe the run (:class:`TrainingRun`: its fields and
    their defaults), or ``model`` is a whole ``TrainingRun``. ``profile`` is a calibration
    profile YAML laid over the ``framework`` profile.
    """
    run = training_run(model, run_fields)
    specs = run.specs
    spec, cluster, training, plan, job = (
        specs.model,
        specs.cluster,
        specs.training,
        specs.plan,
        specs.job,
    )
    assumed = dict(specs.assumed)
    num_gpus = plan.num_gpus
    prof = load_training_profile(framework, None if profile is None else str(profile))
    memory = plan_memory(spec, training, plan, prof)
    est = estimate_plan(spec, cluster, training, plan, prof, job, memory["total"])
    row = est.row(0)
    band = band_for(spec, cluster, plan, framework).around(row["tokens_per_s"])
    host = memory["host"]
    overflow = host_overflow(host, prof)
    if overflow:
        band = band.warn(overflow)
    mismatch = prof.mismatch(cluster.pace_device.id, cluster.pace_device.generation)
    if mismatch:
        band = band.warn(mismatch)
    if run.pp > 1 and (
        spec.num_layers % (run.pp * run.vp) or run.first_stage_layers or run.last_stage_layers
    ):
        band = band.warn(
            f"--pp {run.pp} splits {spec.num_layers} layers unevenly: the slowest stage has "
            f"{int(est.layers_per_stage[0])} and sets the pace"
        )
    if run.seq > spec.max_seq_len:
        band = band.warn(
            f"--seq {run.seq} exceeds {spec.name}'s maximum context of {spec.max_seq_len} "
            "(needs position-embedding extension)"
        )
    parts = est.parts(0)
    settings = training_settings(training, plan)
    return EstimateResult(
        model=spec.name,
        gpu=cluster.device.id,
        gpus=num_gpus,
        gpus_per_node=cluster.gpus_per_node,
        inter=cluster.inter.id,
        framework=framework,
        profile=prof.name,
        seq=run.seq,
        precision=run.precision,
        compile=run.compile,
        plan=plan,
        recompute_modules=tuple(settings["recompute_modules"]),
        loss=settings["loss"],
        grad_reduce_in_bf16=settings["grad_reduce_in_bf16"],
        activation_offload_layers=settings["activation_offload_layers"],
        ep_overlap=settings["ep_overlap"],
        fits=row["fits"],
        memory_per_gpu_gib=row["memory_per_gpu_gib"],
        host_memory_per_gpu_gib=host / GIB,
        step_time_s=row["step_time_s"],
        tokens_per_s=row["tokens_per_s"],
        tokens_per_s_per_gpu=row["tokens_per_s_per_gpu"],
        tflops_per_gpu=row["tflops_per_gpu"],
        mfu=row["mfu"],
        parts_s=parts,
        recompute_s=row["recompute_s"],
        band=band,
        bottleneck=bottleneck(parts, row["mfu"]),
        assumed=assumed,
    )
