"""Pieces every command shares: JSON output, rich console, shared options."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click
from click.core import ParameterSource
from rich.console import Console

from gpuscale import catalog, files
from gpuscale.api import profile_names
from gpuscale.api._json import document as versioned
from gpuscale.errors import InputError
from gpuscale.report.html import Section, result_sections, write_report

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
err_console = Console(stderr=True)


class FiniteFloat(click.ParamType):
    """A float that is finite (``inf`` and ``nan`` are refused at the boundary)."""

    name = "number"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE = FiniteFloat()


def check_writable(path: str | None, option: str) -> None:
    """Fail on an output path that cannot be written before any work is done, not after it
    (the rule, for every output flag, is :func:`gpuscale.files.output_path`)."""
    if path is None:
        return
    field = {"-o": "output"}.get(option, option.lstrip("-").replace("-", "_"))
    files.output_path(path, label=option, field=field)


def write_html(path: str, title: str, sections: Sequence[Section]) -> None:
    """Write the HTML report; a failure (the path was checked up front, but can vanish while
    the work runs) is one line, not a traceback."""
    try:
        write_report(path, title, sections)
    except OSError as exc:
        raise InputError(f"cannot write --html '{path}': {exc.strerror or exc}") from None


def html_option(func: F) -> F:
    """``--html FILE``: also write the answer as one self-contained page (plots and every figure
    of the ``--json``), checked before any work is done."""
    return click.option(
        "--html",
        "html_path",
        default=None,
        help="Also write a self-contained HTML report (plots, every figure of the answer).",
    )(func)


def write_result_html(path: str | None, title: str, answer: str, result: Any) -> None:
    """The HTML report of an API result: its answer in words, ``figures()`` and ``to_dict()``."""
    if path:
        write_html(path, title, result_sections(answer, result.to_dict(), result.figures()))


def inter_option(help: str = "Fabric between nodes (gpuscale catalog links).") -> Callable[[F], F]:
    """``--inter FABRIC``: the link between nodes, a catalog id."""
    return click.option("--inter", default=catalog.DEFAULT_INTER, show_default=True, help=help)


def profile_options(func: F) -> F:
    """``--framework NAME`` and ``--profile FILE``: the software-stack profile and a measured
    calibration laid over it."""
    func = click.option(
        "--profile",
        "profile_file",
        default=None,
        type=click.Path(dir_okay=False),
        help="Calibration profile YAML (from gpuscale calibrate) laid over the --framework "
        "profile: its keys win, the rest comes from the framework.",
    )(func)
    return click.option(
        "--framework",
        default="generic",
        show_default=True,
        help=f"Software-stack profile: {', '.join(profile_names())}.",
    )(func)


def json_option(func: F) -> F:
    return click.option(
        "--json", "as_json", is_flag=True, help="Print one JSON object for scripts."
    )(func)


def typed_options(ctx: click.Context) -> dict[str, str]:
    """The options the user typed (not left at their defaults): parameter name -> flag."""
    typed = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
    return {
        p.name: p.opts[0]
        for p in ctx.command.params
        if isinstance(p, click.Option) and p.name and ctx.get_parameter_source(p.name) in typed
    }


def emit_json(document: dict[str, Any]) -> None:
    """Print ``document`` as JSON with ``schema_version`` first (versioned output, STYLE #14)."""
    click.echo(json.dumps(versioned(document), indent=2))
