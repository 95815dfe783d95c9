"""Every flag that more than one command takes, declared once: its spelling, type, default and
help. A command lists the shared flags it takes by name (``options(MODEL, "gpu", "tp")``), says
what differs for it (``flag("gpus", required=True, help="GPUs available.")``) and declares a flag
of its own with :func:`opt`. Parameter names are the API's keyword arguments (``--gpus-per-node``
-> ``gpus_per_node``), so a command passes what it parsed straight on to :mod:`gpuscale.api`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from gpuscale import catalog
from gpuscale.api import profile_names
from gpuscale.api.measure import CPU_SIZES, GPU_SIZES
from gpuscale.api.training import DEFAULT_LORA_RANK
from gpuscale.cli._common import FINITE
from gpuscale.specs.plan import RECOMPUTE_CHOICES
from gpuscale.specs.training import FINETUNES, PRECISIONS

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[Any], Any]


def spec(
    decls: str, type: Any = None, default: Any = None, help: str | None = None, **kw: Any
) -> dict[str, Any]:
    """One option as data. ``decls`` is its flag(s), space-separated, then the parameter name
    where it is not the flag's (``"-o --output"``, ``"--no-flash flash_attention"``);
    ``type=bool`` is an on/off flag, and one whose default is True turns its setting off."""
    return {"decls": decls, "type": type, "default": default, "help": help, **kw}


def opt(
    decls: str, type: Any = None, default: Any = None, help: str | None = None, **kw: Any
) -> Decorator:
    """The click option of a :func:`spec`. A default other than None is shown in --help."""
    if type is bool:
        if default is True:
            kw.update(flag_value=False, default=True)
        return click.option(*decls.split(), is_flag=True, help=help, **kw)
    if default is not None:  # an explicit None would count as given, defeating required=True
        kw.update(default=default, show_default=kw.get("show_default", True))
    return click.option(*decls.split(), type=type, help=help, **kw)


def flag(name: str, **override: Any) -> Decorator:
    """The shared flag ``name`` of :data:`FLAGS`, with what differs for one command."""
    return opt(**{**FLAGS[name], **override})


def options(*items: str | Decorator | list[str | Decorator]) -> Callable[[F], F]:
    """Options in the order ``--help`` lists them: shared flag names, :func:`flag` or
    :func:`opt` decorators, and lists of them (a group such as :data:`RUN`)."""
    flat: list[str | Decorator] = []
    for item in items:
        flat.extend(item if isinstance(item, list) else [item])

    def apply(func: F) -> F:
        for item in reversed(flat):
            func = (flag(item) if isinstance(item, str) else item)(func)
        return func

    return apply


MODEL = click.argument("model")


def _worker(stage: str, what: str) -> list[Decorator]:
    """A disaggregated worker pool's flags (``--prefill-*``, ``--decode-*``)."""
    return [
        opt(f"--{stage}-workers", int, help=f"Disaggregated: {stage} workers."),
        opt(f"--{stage}-tp", int, 1, f"Tensor-parallel degree of a {stage} worker."),
        opt(f"--{stage}-ep", int, 1, f"Expert-parallel degree of a {stage} worker."),
        opt(
            f"--{stage}-attention-dp", int, 1, f"Attention data-parallel ranks of a {stage} worker."
        ),
        opt(f"--{stage}-batch", int, help=f"Most {what} a {stage} worker batches."),
    ]


_NICS = "[default: one per GPU, rail-optimized, on RDMA fabrics; one per node on TCP Ethernet]"

FLAGS: dict[str, dict[str, Any]] = {
    # the cluster
    "gpu": spec("--gpu", help="Catalog GPU id (gpuscale catalog gpus)."),
    "gpus": spec("--gpus", int, help="GPUs in the job."),
    "gpus_per_node": spec(
        "--gpus-per-node",
        int,
        help="GPUs in one NVLink/PCIe node [default: the GPU's NVLink domain, 8; 72 on "
        "GB200/GB300 NVL72].",
    ),
    "inter": spec(
        "--inter",
        default=catalog.DEFAULT_INTER,
        help="Fabric between nodes (gpuscale catalog links).",
    ),
    "nics_per_node": spec("--nics-per-node", int, help=f"Network ports per node {_NICS}."),
    # the parallel plan
    "tp": spec("--tp", int, 1, "Tensor-parallel degree."),
    "pp": spec("--pp", int, 1, "Pipeline stages."),
    "dp": spec("--dp", int, None, "Data-parallel degree [default: gpus/(tp*pp*cp)]."),
    "cp": spec("--cp", int, 1, "Context-parallel degree."),
    "vp": spec("--vp", int, 1, "Virtual stages per GPU (interleaving)."),
    "ep": spec("--ep", int, 1, "Expert-parallel degree (MoE)."),
    "first_stage_layers": spec(
        "--first-stage-layers",
        click.IntRange(min=0),
        0,
        "Layers on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers; "
        "0: even or automatic split).",
    ),
    "last_stage_layers": spec(
        "--last-stage-layers",
        click.IntRange(min=0),
        0,
        "Layers on the last pipeline rank (--decoder-last-pipeline-num-layers).",
    ),
    "embedding_as_layer": spec(
        "--embedding-as-layer",
        bool,
        help="Count the embedding as a layer of the first stage "
        "(--account-for-embedding-in-pipeline-split).",
    ),
    "loss_as_layer": spec(
        "--loss-as-layer",
        bool,
        help="Count the output layer and loss as a layer of the last stage "
        "(--account-for-loss-in-pipeline-split).",
    ),
    # the job
    "mbs": spec("--mbs", int, 1, "Micro-batch, sequences."),
    "gbs": spec(
        "--gbs",
        int,
        help="Global batch, sequences [default: the model size's recipe batch; printed].",
    ),
    "seq": spec("--seq", int, 4096, "Sequence length."),
    "batch": spec("--batch", int, 1, "Concurrent sequences."),
    "recompute": spec(
        "--recompute", click.Choice(RECOMPUTE_CHOICES), "none", "Activation recomputation."
    ),
    "zero": spec(
        "--zero", click.IntRange(0, 3), 0, "ZeRO stage over the data-parallel group (3 = FSDP)."
    ),
    "precision": spec(
        "--precision",
        click.Choice(PRECISIONS),
        "bf16",
        "Matmul precision (fp8: linear layers only).",
    ),
    "finetune": spec(
        "--finetune",
        click.Choice(FINETUNES),
        "full",
        "Train every weight, or adapters on a frozen 16-bit (lora) or 4-bit (qlora) base.",
    ),
    # an untyped rank is None: its default belongs to an adapter fine-tune, so it must not make a
    # full fine-tune look like LoRA (the API refuses a rank without --finetune lora/qlora)
    "lora_rank": spec(
        "--lora-rank",
        int,
        None,
        f"Adapter rank of --finetune lora/qlora [default: {DEFAULT_LORA_RANK}].",
    ),
    # the software stack
    "framework": spec(
        "--framework",
        default="generic",
        help=f"Software-stack profile: {', '.join(profile_names())}.",
    ),
    "profile": spec(
        "--profile",
        click.Path(dir_okay=False),
        help="Calibration profile YAML (from gpuscale calibrate) laid over the --framework "
        "profile: its keys win, the rest comes from the framework.",
    ),
    # benchmarks (bench and calibrate run the same ones)
    "nproc": spec(
        "--nproc",
        int,
        help="Ranks to start here [default: every GPU, or 2 on CPU]. Ignored under torchrun.",
    ),
    "sizes": spec(
        "--sizes",
        help=f"Collective sizes: MIN:MAX bytes (K/M/G suffixes) or a comma list [default: "
        f"{GPU_SIZES} on GPUs, {CPU_SIZES} on CPU].",
    ),
    "iters": spec("--iters", int, 20, "Timed iterations per size."),
    "warmup": spec("--warmup", int, 5, "Untimed iterations per size."),
    "backend": spec(
        "--backend",
        click.Choice(["auto", "gloo", "nccl"]),
        "auto",
        "auto: nccl on GPUs, else gloo.",
    ),
    "group_by_node": spec(
        "--group-by-node",
        bool,
        help="Measure inside each node (intra) and across nodes (inter) separately.",
    ),
    "ranks_per_node": spec(
        "--ranks-per-node",
        int,
        help="Treat every K consecutive ranks as one node (try --group-by-node on one host).",
    ),
    "timeout": spec(
        "--timeout",
        float,
        120.0,
        "Seconds a rank may wait on a collective; the run stops after this long without progress.",
    ),
    "shapes": spec(
        "--shapes",
        help="GEMM shapes: comma list of N (square) or MxNxK [default: a sweep for the device].",
    ),
    # output
    "html": spec(
        "--html html_path",
        help="Also write a self-contained HTML report (plots, every figure of the answer).",
    ),
    "json": spec("--json as_json", bool, help="Print one JSON object for scripts."),
}

PIPELINE_SPLIT = ["first_stage_layers", "last_stage_layers", "embedding_as_layer", "loss_as_layer"]
"""How the layers split over pipeline ranks (see :class:`gpuscale.specs.Plan`)."""

RUN: list[str | Decorator] = [
    MODEL,
    flag("gpu", required=True),
    flag("gpus", help="GPUs in the job [default: tp*pp*dp*cp]."),
    "gpus_per_node",
    "inter",
    "nics_per_node",
    opt(
        "--slowest-gpu",
        help="Mixed cluster: the slowest card in the job, which sets the pace of every step.",
    ),
    *("tp", "pp", "dp", "cp", "vp", "ep", *PIPELINE_SPLIT, "mbs", "gbs", "seq", "recompute"),
    *("zero", "precision", "finetune", "lora_rank"),
    opt("--offload-optimizer", bool, help="ZeRO-Offload: optimizer step on the CPU."),
    opt("--no-sequence-parallel sequence_parallel", bool, True, "TP all-reduces instead of RS/AG."),
    opt(
        "--no-flash-attention flash_attention",
        bool,
        True,
        "Unfused attention (s x s scores in HBM).",
    ),
    "framework",
    "profile",
    opt(
        "--storage-gbps",
        FINITE,
        0.0,
        "Dataset read bandwidth per node, GB/s (0: data local and prefetched).",
    ),
    opt("--checkpoint-every", int, 0, "Checkpoint every N steps (0: never)."),
    opt("--checkpoint-gbps", FINITE, 10.0, "Aggregate checkpoint write bandwidth, GB/s."),
]
"""Every flag of one training run on one cluster under one plan: ``estimate`` prices such a run,
``calibrate run`` fits a profile to a measured one."""

PLANNER: list[str | Decorator] = [
    MODEL,
    flag("gpu", required=True),
    "gpus_per_node",
    "nics_per_node",
    flag("gbs", help="Global batch in sequences [default: the model size's recipe, printed]."),
    flag(
        "seq",
        default=None,
        help="Sequence length [default: 4096 or the model's maximum if shorter].",
    ),
    opt("--tokens", help="Tokens to train, e.g. 15T [default: 20 per parameter, Chinchilla]."),
    opt("--price", float, help="USD per GPU-hour; without it cost is in GPU-hours."),
    "precision",
    "finetune",
    "framework",
    "profile",
    "html",
]
"""``MODEL --gpu`` and everything that shapes the job, for ``plan`` and ``scale``."""

CALIBRATION: list[str | Decorator] = [
    flag(
        "nics_per_node",
        help="NICs per node, to turn the measured inter-node bus bandwidth into a per-NIC rate "
        "[default: one per GPU].",
    ),
    flag("gpus_per_node", help="GPUs per node, with --nics-per-node [default: as measured]."),
    opt("-o --output", help="Write the fitted profile YAML here (use it with --profile)."),
    opt("--name", default="measured", help="Name of the profile."),
    opt(
        "--base",
        default="generic",
        help=f"Profile the measurement overrides ({', '.join(profile_names())} or a YAML path).",
    ),
    flag("html", help="Write an HTML report with predicted-vs-measured plots."),
    "json",
]
"""Where a fitted profile goes, and the NIC share: ``calibrate`` and ``import nccl-tests``."""

SERVING: list[str | Decorator] = [
    opt("--concurrency", int, help="Closed loop: requests kept in flight."),
    opt("--request-rate", FINITE, help="Open loop: Poisson arrivals, requests/s."),
    opt("--num-requests", int, 1000, "Requests in the (open-loop) benchmark."),
    opt("--prefix-hit", FINITE, 0.0, "Share of each prompt served from the prefix cache."),
    opt(
        "--input-cv",
        FINITE,
        0.0,
        "Spread of prompt lengths (lognormal coefficient of variation; 0 = fixed).",
    ),
    opt(
        "--output-cv",
        FINITE,
        0.0,
        "Spread of output lengths (lognormal coefficient of variation; 0 = fixed).",
    ),
    flag("pp", help="Pipeline stages per engine."),
    "ep",
    opt("--attention-dp", int, 1, "Attention data-parallel ranks inside --tp (MoE)."),
    opt("--replicas", int, 1, "Engine instances behind a load balancer."),
    *_worker("prefill", "prompts"),
    *_worker("decode", "requests"),
]
"""A serving engine under load: the request stream, the aggregated layout and the disaggregated
prefill/decode split."""

SEARCH: list[str | Decorator] = [
    opt("--search", bool, help="Find the deployment with the most goodput per GPU."),
    flag("gpus", help="Search: GPUs available."),
    opt("--slo-ttft-ms", FINITE, help="Search: TTFT target (p99)."),
    opt("--slo-tpot-ms", FINITE, help="Search: TPOT target (p99)."),
    opt("--price", FINITE, help="Search: $ per GPU-hour; rank by goodput per dollar."),
]
"""The SLO search over deployments on a GPU budget."""
