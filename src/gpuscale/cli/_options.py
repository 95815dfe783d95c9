"""Command-line flags from the API's arguments. Every argument several API functions share is
described once in :data:`gpuscale.api.params.PARAMS`; its flag here is spelled from its name
(``gpus_per_node`` -> ``--gpus-per-node``; on by default -> ``--no-...``) with its type, default
and help. A command lists the shared flags it takes by name (``options(MODEL, "gpu", "tp")``),
says what differs for it (``flag("gpus", required=True, help="GPUs available.")``) and declares a
flag of its own with :func:`opt`. Parameter names are the API's keyword arguments, so a command
passes what it parsed straight on to :mod:`gpuscale.api`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, TypeVar

import click

from gpuscale.api.params import PARAMS, Param
from gpuscale.api.training import TrainingRun
from gpuscale.cli._common import FINITE, number_type

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
            kw.update(flag_value=False)
        return click.option(*decls.split(), is_flag=True, default=bool(default), help=help, **kw)
    if default is not None:  # an explicit None would count as given, defeating required=True
        kw.update(default=default, show_default=kw.get("show_default", True))
    if type is None and isinstance(default, (int, float)) and not isinstance(default, bool):
        type = builtins.type(default)  # click would infer it from the default
    return click.option(*decls.split(), type=number_type(type), help=help, **kw)


def flag(name: str, **override: Any) -> Decorator:
    """The shared flag ``name`` of :data:`FLAGS`, with what differs for one command."""
    return opt(**{**FLAGS[name], **override})


def options(*items: str | Decorator | Sequence[str | Decorator]) -> Callable[[F], F]:
    """Options in the order ``--help`` lists them: shared flag names, :func:`flag` or
    :func:`opt` decorators, and lists of them (a group such as :data:`RUN`)."""
    flat: list[str | Decorator] = []
    for item in items:
        flat.extend([item] if isinstance(item, str) or callable(item) else item)

    def apply(func: F) -> F:
        for item in reversed(flat):
            func = (flag(item) if isinstance(item, str) else item)(func)
        return func

    return apply


MODEL = click.argument("model")


def _flag(name: str, p: Param) -> dict[str, Any]:
    """The flag of an API argument, as a :func:`spec`."""
    dashed = name.replace("_", "-")
    decls = f"--no-{dashed} {name}" if p.type is bool and p.default is True else f"--{dashed}"
    kind: Any = p.type
    if p.choices is not None:
        kind = click.Choice(p.choices)
    elif p.low is not None or p.high is not None:
        kind = click.IntRange(p.low, p.high)
    elif p.file:
        kind = click.Path(dir_okay=False)
    elif p.type is float and name not in API_CHECKED:
        kind = FINITE  # inf and nan are refused where they are typed
    return spec(decls, kind, p.default, p.help)


API_CHECKED = ("price", "timeout", "topk_ratio")
"""Numbers the API checks itself, in words that name the unit (``--price must be a finite number
of USD per GPU-hour ...; accepted: 0.0001 to 10000``), so the flag takes any float."""


FLAGS: dict[str, dict[str, Any]] = {
    **{name: _flag(name, p) for name, p in PARAMS.items()},
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
    *(f.name for f in fields(TrainingRun) if f.init and f.name not in ("model", "gpu")),
    *("framework", "profile"),
]
"""Every flag of one training run on one cluster under one plan, one per field of
:class:`gpuscale.api.training.TrainingRun`, and the software stack: ``estimate`` prices such a
run, ``calibrate run`` fits a profile to a measured one."""

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
    *("tokens", "price", "precision", "compile", "finetune", "framework", "profile"),
    flag("html", type=click.Path(dir_okay=False)),
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
    "name",
    "base",
    flag("html", help="Write an HTML report with predicted-vs-measured plots."),
    "json",
]
"""Where a fitted profile goes, and the NIC share: ``calibrate`` and ``import nccl-tests``."""

WORKER = ("workers", "tp", "ep", "attention_dp", "batch")
"""The arguments of a disaggregated worker pool (``prefill_*``, ``decode_*``)."""

SERVING: list[str | Decorator] = [
    *("concurrency", "request_rate", "num_requests", "prefix_hit", "input_cv", "output_cv"),
    flag("pp", help="Pipeline stages per engine."),
    *("ep", "attention_dp", "replicas"),
    *(f"{stage}_{what}" for stage in ("prefill", "decode") for what in WORKER),
    "decode_routing",
]
"""A serving engine under load: the request stream, the aggregated layout and the disaggregated
prefill/decode split."""

SEARCH: list[str | Decorator] = [
    opt("--search", bool, help="Find the deployment with the most goodput per GPU."),
    flag("gpus", help="Search: GPUs available."),
    "slo_ttft_ms",
    "slo_tpot_ms",
    flag("price", type=FINITE, help="Search: $ per GPU-hour; rank by goodput per dollar."),
]
"""The SLO search over deployments on a GPU budget."""
