"""Pieces every command shares: the consoles, JSON output, output paths checked up front, the
HTML report, warnings and benchmark progress. Shared flags are in :mod:`gpuscale.cli._options`."""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from gpuscale import files
from gpuscale.api._json import document as versioned
from gpuscale.errors import InputError, parse_float, parse_int
from gpuscale.report.html import Section, result_sections, write_report
from gpuscale.report.progress import lazy_progress_bar


class _Console(Console):
    """rich's console, except that a closed pipe (``gpuscale plan ... | head``) ends the run
    through :func:`gpuscale.cli.main.main` with exit code 0, not rich's silent exit code 1."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


console = _Console()
err_console = _Console(stderr=True)


def _number(value: Any) -> float | str:
    """``value`` as a float (:func:`gpuscale.errors.parse_float`: ASCII only), else why not."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        return parse_float(str(value))
    except InputError as exc:
        return str(exc)


class FiniteFloat(click.ParamType):
    """A float that is finite (``inf`` and ``nan`` are refused at the boundary)."""

    name = "number"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        number = _number(value)
        if isinstance(number, str):
            self.fail(number, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE = FiniteFloat()


class PlainFloat(click.types.FloatParamType):
    """A float flag the API bounds itself (``--price``: its unit in the refusal), read as
    :func:`gpuscale.errors.parse_float` reads it (shown in --help as FLOAT)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = _number(value)
        if isinstance(number, str):
            self.fail(number, param, ctx)
        return number


class PlainFloatRange(click.FloatRange):
    """``click.FloatRange`` read as :func:`gpuscale.errors.parse_float` reads it."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = _number(value)
        if isinstance(number, str):
            self.fail(number, param, ctx)
        return super().convert(number, param, ctx)


MAX_WHOLE = 2**53
"""Largest whole number a flag takes: every count the cost model reads (GPUs, tokens, batch,
layers) is far below it, and up to it an int is exact as a float and fits numpy's int64 (a
larger one overflowed in the plan arrays with a traceback)."""


def _whole(value: Any) -> int | str:
    """``value`` as an int of at most :data:`MAX_WHOLE` in magnitude, else why not."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        try:
            number = parse_int(str(value))
        except InputError as exc:
            return str(exc)
    if abs(number) > MAX_WHOLE:
        return f"{number} is too large; accepted: a whole number up to 2^53"
    return number


def whole_number(value: Any, what: str, field: str | None = None) -> int:
    """``value`` as a bounded int (a part of a comma list such as ``--concurrency 1,8``); else
    one line naming ``what`` (the flag)."""
    number = _whole(value)
    if isinstance(number, str):
        raise InputError(f"{what}: {number}", field=field)
    return number


class WholeNumber(click.types.IntParamType):
    """An integer flag: at most :data:`MAX_WHOLE` in magnitude (shown in --help as INTEGER)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = _whole(value)
        if isinstance(number, str):
            self.fail(number, param, ctx)
        return number


class WholeRange(click.IntRange):
    """``click.IntRange`` whose values are also at most :data:`MAX_WHOLE` in magnitude."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = _whole(value)
        if isinstance(number, str):
            self.fail(number, param, ctx)
        return super().convert(number, param, ctx)


def number_type(kind: Any) -> Any:
    """The click type of a number flag, read as :func:`gpuscale.errors.parse_int` and
    :func:`~gpuscale.errors.parse_float` read typed numbers (every number flag passes here,
    :func:`gpuscale.cli._options.opt`): an integer one bounded by :data:`MAX_WHOLE` (``int``
    and ``click.IntRange`` as declared), a float one as declared (``float``,
    ``click.FloatRange``); any other type unchanged."""
    if kind is int or kind is click.INT:
        return WholeNumber()
    if type(kind) is click.IntRange:
        return WholeRange(kind.min, kind.max, kind.min_open, kind.max_open, kind.clamp)
    if kind is float or kind is click.FLOAT:
        return PlainFloat()
    if type(kind) is click.FloatRange:
        return PlainFloatRange(kind.min, kind.max, kind.min_open, kind.max_open, kind.clamp)
    return kind


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


def write_result_html(path: str | None, title: str, answer: str, result: Any) -> None:
    """The HTML report of an API result: its answer in words, ``figures()`` and ``to_dict()``."""
    if path:
        write_html(path, title, result_sections(answer, result.to_dict(), result.figures()))


def typed_options(ctx: click.Context) -> dict[str, str]:
    """The options the user typed (not left at their defaults): parameter name -> flag."""
    typed = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT, ParameterSource.PROMPT)
    return {
        p.name: p.opts[0]
        for p in ctx.command.params
        if isinstance(p, click.Option) and p.name and ctx.get_parameter_source(p.name) in typed
    }


def warn(message: str) -> None:
    """A warning line on stderr: stdout stays the table or the JSON document."""
    text = f"[yellow]gpuscale: warning:[/yellow] {escape(message)}"
    err_console.print(text, highlight=False, markup=True, soft_wrap=True)


def command_line() -> str:
    """The command as typed, recorded with every measurement."""
    return "gpuscale " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def bench_bar(label: str) -> AbstractContextManager[Callable[[int, int], None]]:
    """The progress bar of a benchmark: on stderr from its first update; one per torchrun job."""
    # Imported here: the measurement layer is only loaded by the commands that benchmark.
    from gpuscale.api.measure import reporting_rank

    return lazy_progress_bar(label, err_console, show=reporting_rank())


def emit_json(document: dict[str, Any]) -> None:
    """Print ``document`` as JSON with ``schema_version`` first (versioned output, STYLE #14)."""
    click.echo(json.dumps(versioned(document), indent=2))
