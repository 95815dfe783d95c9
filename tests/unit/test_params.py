"""The shared argument table and the CLI flags built from it agree with the API's signatures: a
flag is an argument of the function its command calls, with that function's default."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import click
import pytest

from gpuscale import api
from gpuscale.api import cluster, export, measure, serving, serving_search, serving_static
from gpuscale.api.calibrate_run import calibrate_run
from gpuscale.api.measure import calibrate, import_nccl_tests
from gpuscale.api.params import PARAMS
from gpuscale.cli import main

UNSET = getattr(click.core, "UNSET", None)
"""click 8.2+ marks an option without a default with this (None before)."""

FUNCTIONS: list[Callable[..., Any]] = [
    api.estimate,
    calibrate_run,
    api.plan,
    api.scale,
    api.fit,
    api.advise_comm,
    serving.infer,
    serving_static.infer_static,
    serving_search.search,
    calibrate,
    import_nccl_tests,
    cluster.cluster_adapt,
    cluster.cluster_simulate,
    cluster.cluster_trace,
    measure.bench_collectives,
    measure.bench_matmul,
]


def _defaults(func: Callable[..., Any]) -> dict[str, Any]:
    """Keyword argument -> its default (None for one the caller must give)."""
    return {
        name: None if p.default is inspect.Parameter.empty else p.default
        for name, p in inspect.signature(func).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_every_shared_argument_is_an_api_argument_with_its_default(name: str) -> None:
    takers = {f.__name__: _defaults(f) for f in FUNCTIONS if name in _defaults(f)}
    assert takers, f"{name} is no keyword argument of any API function"
    assert any(d[name] == PARAMS[name].default for d in takers.values()), (
        f"{name}: default {PARAMS[name].default!r}, API defaults "
        f"{ {f: d[name] for f, d in takers.items()} }"
    )


COMMANDS: list[tuple[tuple[str, ...], Callable[..., Any], set[str]]] = [
    (("estimate",), api.estimate, set()),
    (("calibrate", "run"), calibrate_run, set()),
    (("plan",), api.plan, set()),
    (("scale",), api.scale, set()),
    (("fit",), api.fit, set()),
    (("advise-comm",), api.advise_comm, set()),
    # infer answers three questions; the static table's defaults are the command's, and the
    # degree list is passed on only when typed
    (("infer",), serving_static.infer_static, {"tp"}),
    (("cluster", "adapt"), cluster.cluster_adapt, set()),
    (("cluster", "simulate"), cluster.cluster_simulate, set()),
    (("cluster", "trace"), cluster.cluster_trace, set()),
    (("cluster", "export"), cluster.cluster_export, set()),
    (("bench", "collectives"), measure.bench_collectives, set()),
    (("bench", "matmul"), measure.bench_matmul, set()),
    (("import", "nccl-tests"), measure.import_nccl_tests, set()),
    (("export",), export.export_plan, set()),
]


def _command(path: tuple[str, ...]) -> click.Command:
    ctx = click.Context(main.cli)
    if path == ("calibrate", "run"):
        return main.cli.resolve_command(ctx, list(path))[1]  # type: ignore[return-value]
    command = main.cli.get_command(ctx, path[0])
    for word in path[1:]:
        assert isinstance(command, click.Group)
        command = command.get_command(ctx, word)
    assert command is not None
    return command


@pytest.mark.parametrize(("path", "func", "skip"), COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_cli_defaults_are_the_api_defaults(
    path: tuple[str, ...], func: Callable[..., Any], skip: set[str]
) -> None:
    defaults = _defaults(func)
    options = [
        p
        for p in _command(path).params
        if isinstance(p, click.Option) and p.name in defaults and p.name not in skip
    ]
    assert options, f"gpuscale {' '.join(path)} passes no flag to {func.__name__}"
    given = {p.name: None if p.default is UNSET else p.default for p in options if not p.required}
    wrong = {n: (v, defaults[n]) for n, v in given.items() if v != defaults[n]}
    assert not wrong, f"gpuscale {' '.join(path)}: (flag default, API default) differ: {wrong}"
