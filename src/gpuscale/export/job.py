"""What every export reads: one training job (model, hardware shape, plan, training settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from gpuscale import SCHEMA_VERSION, catalog
from gpuscale.errors import InputError, require
from gpuscale.specs import ModelSpec, Plan, Training
from gpuscale.specs.hardware import fills_whole_nodes
from gpuscale.specs.training import DEFAULT_RECOMPUTE_MODULES, Loss, TrainPrecision
from gpuscale.specs.validity import (
    check_activation_offload_layers,
    check_ep_overlap,
    check_plan,
)

PRECISIONS = ("bf16", "fp16", "fp8", "fp32")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainingJob:
    """A plan ready to hand off: the model, the GPUs it runs on and how the step is split."""

    model_id: str
    """Catalog id or ``config.json`` path, as the user named the model."""
    model: ModelSpec
    gpu: str
    """Catalog id of the GPU (written into the exported files' comments)."""
    gpus: int
    gpus_per_node: int
    plan: Plan
    training: Training

    def __post_init__(self) -> None:
        require(
            self.gpus == self.plan.num_gpus,
            f"the plan uses tp x pp x dp x cp = {self.plan.num_gpus} GPUs, not --gpus {self.gpus}",
            field="gpus",
        )
        require(self.gpus_per_node >= 1, "--gpus-per-node must be >= 1", field="gpus_per_node")
        require(
            fills_whole_nodes(self.gpus, self.gpus_per_node),
            f"--gpus ({self.gpus}) must fill whole nodes of --gpus-per-node {self.gpus_per_node}",
            field="gpus_per_node",
        )

    @property
    def nodes(self) -> int:
        return max(1, self.gpus // self.gpus_per_node)

    @property
    def procs_per_node(self) -> int:
        """Processes (one per GPU) started on each node."""
        return min(self.gpus, self.gpus_per_node)


def _plan_section(doc: dict[str, Any]) -> dict[str, Any]:
    plan = doc.get("plan")
    if isinstance(plan, dict):
        return plan
    options = doc.get("options") or doc.get("plans")
    if isinstance(options, list) and options and isinstance(options[0], dict):
        first = options[0]
        return first.get("plan", first) if isinstance(first.get("plan", first), dict) else {}
    raise InputError(
        "the document has no plan: give the --json output of `gpuscale estimate` or `gpuscale plan`",
        field="from",
    )


def _int(section: dict[str, Any], *names: str, default: int | None = None) -> int:
    for name in names:
        value = section.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value >= 0:
            return value
    if default is not None:
        return default
    raise InputError(
        f"the document's plan has no {names[0]} (expected a non-negative integer)", field="from"
    )


def job_from_document(
    doc: Any,
    *,
    seq: int | None = None,
    precision: str | None = None,
    gpus_per_node: int | None = None,
    model: ModelSpec | None = None,
) -> TrainingJob:
    """Read an ``estimate --json`` or ``plan --json`` document (the first ranked plan of ``plan``).

    Sequence length, precision and GPUs per node come from the document when it records them
    (an argument that contradicts it is refused), else from the arguments; a document that
    records no sequence length is refused rather than guessed. ``model``: the
    spec the document was computed for, when its name is no catalog id (a pasted config.json)."""
    require(isinstance(doc, dict), "the document must be a JSON object", field="from")
    version = doc.get("schema_version", SCHEMA_VERSION)
    require(
        version == SCHEMA_VERSION,
        f"the document's schema_version {version!r} is not one this version reads; accepted: "
        f"{SCHEMA_VERSION} (the estimate/plan --json of this gpuscale)",
        field="from",
    )
    section = _plan_section(doc)
    model_id = doc.get("model")
    gpu_id = doc.get("gpu")
    require(
        isinstance(model_id, str) and bool(model_id), "the document names no model", field="from"
    )
    require(isinstance(gpu_id, str) and bool(gpu_id), "the document names no gpu", field="from")
    assert isinstance(model_id, str) and isinstance(gpu_id, str)
    training_doc = doc.get("training") if isinstance(doc.get("training"), dict) else {}
    recorded = {
        "seq": section.get("seq") or doc.get("seq") or training_doc.get("seq"),
        "precision": doc.get("precision") or training_doc.get("precision"),
        "gpus_per_node": doc.get("gpus_per_node"),
    }
    for name, given in (("seq", seq), ("precision", precision), ("gpus_per_node", gpus_per_node)):
        # The plan was priced (memory, step time) for the document's value: exporting it under
        # another would hand the trainer a plan nobody checked.
        flag = "--" + name.replace("_", "-")
        require(
            given is None or recorded[name] is None or given == recorded[name],
            f"{flag} {given} contradicts the document's {recorded[name]} (the plan was priced "
            f"for it); leave {flag} out, or re-run estimate/plan with {flag} {given}",
            field=name,
        )
    seq_len = seq or recorded["seq"]
    require(
        isinstance(seq_len, int) and seq_len > 0,
        "the document does not record the sequence length: pass --seq",
        field="seq",
    )
    assert isinstance(seq_len, int)
    chosen_precision = precision or recorded["precision"] or "bf16"
    require(
        chosen_precision in PRECISIONS,
        f"precision must be one of {', '.join(PRECISIONS)}, got {chosen_precision!r}",
        field="precision",
    )
    plan = Plan(
        tp=_int(section, "tp"),
        pp=_int(section, "pp"),
        dp=_int(section, "dp"),
        cp=_int(section, "cp", default=1),
        vp=_int(section, "vp", default=1),
        ep=_int(section, "ep", default=1),
        etp=_int(section, "etp", default=0),
        micro_batch=_int(section, "mbs", "micro_batch"),
        global_batch=_int(section, "gbs", "global_batch"),
        recompute=section.get("recompute", "none"),
        zero=_int(section, "zero", default=0),
        sequence_parallel=bool(section.get("sequence_parallel", True)),
    )
    catalog.gpu(gpu_id)  # an unknown id fails here with the closest matches
    per_node = gpus_per_node or recorded["gpus_per_node"] or catalog.default_gpus_per_node(gpu_id)
    stated = doc.get("gpus")
    require(
        stated is None or stated == plan.num_gpus,
        f"the document's gpus {stated!r} is not its plan's tp x pp x dp x cp = {plan.num_gpus}; "
        "accepted: the document as estimate/plan --json wrote it",
        field="from",
    )
    spec = model if model is not None else catalog.model(model_id)
    training = _training(doc, seq_len, chosen_precision)
    try:
        # The rules estimate and plan apply (specs.validity): an edited document must not hand
        # a trainer a layout the model cannot run (TP 64 on 32 heads was exported).
        check_plan(spec, plan, seq_len)
        check_activation_offload_layers(spec, plan, training.activation_offload_layers)
        check_ep_overlap(spec, plan, training)
    except InputError as exc:
        raise InputError(f"the document's plan cannot run: {exc}", field="from") from None
    return TrainingJob(
        model_id=model_id,
        model=spec,
        gpu=gpu_id,
        gpus=plan.num_gpus,
        gpus_per_node=int(per_node),
        plan=plan,
        training=training,
    )


def _training(doc: dict[str, Any], seq_len: int, precision: str) -> Training:
    """The training settings the document's plan was priced with (``estimate --json`` records
    the recompute modules, the loss, the gradient word, the offloaded layers and the EP
    overlap; ``plan --json`` the defaults)."""
    modules = doc.get("recompute_modules", list(DEFAULT_RECOMPUTE_MODULES))
    loss = doc.get("loss", "standard")
    bf16_grads = doc.get("grad_reduce_in_bf16", False)
    offloaded = doc.get("activation_offload_layers", 0)
    ep_overlap = doc.get("ep_overlap", False)
    require(
        isinstance(modules, list) and all(isinstance(m, str) for m in modules),
        "the document's recompute_modules must be a list of module names",
        field="from",
    )
    require(isinstance(loss, str), "the document's loss must be a string", field="from")
    require(
        isinstance(bf16_grads, bool),
        "the document's grad_reduce_in_bf16 must be true or false",
        field="from",
    )
    try:
        return Training(
            seq_len=seq_len,
            precision=cast(TrainPrecision, precision),
            recompute_modules=tuple(modules),
            loss=cast(Loss, loss),
            grad_reduce_in_bf16=bf16_grads,
            activation_offload_layers=offloaded,
            ep_overlap=ep_overlap,
        )
    except InputError as exc:
        raise InputError(f"the document's training settings: {exc}", field="from") from None


def megatron_only(job: TrainingJob, target: str) -> None:
    """Refuse, in one line, a job priced with settings only Megatron's launch can state (the
    trainer would run something else than what was priced)."""
    t = job.training
    settings = []
    if job.plan.recompute == "selective" and t.recompute_modules != DEFAULT_RECOMPUTE_MODULES:
        settings.append(f"--recompute-modules {','.join(t.recompute_modules) or 'none'}")
    if t.loss == "te":
        settings.append("--loss te")
    if t.grad_reduce_in_bf16:
        settings.append("--grad-reduce-in-bf16")
    if t.activation_offload_layers:
        settings.append(f"--activation-offload-layers {t.activation_offload_layers}")
    if t.ep_overlap:
        settings.append("--ep-overlap")
    require(
        not settings,
        f"{target} has no setting for {', '.join(settings)} (the plan was priced with it); "
        "accepted: --to megatron, or a plan priced without it",
        field="from",
    )
