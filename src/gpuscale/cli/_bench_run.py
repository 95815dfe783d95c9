"""What ``bench`` and ``calibrate`` show while benchmarks run (shared by both commands, owned
by neither): progress bars, warnings on stderr, rank failures as one error."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.markup import escape

from gpuscale.cli._common import err_console
from gpuscale.report.progress import lazy_progress_bar


def _other_torchrun_rank() -> bool:
    """A rank other than 0 of a torchrun job (torchrun sets RANK and TORCHELASTIC_RUN_ID)."""
    return "TORCHELASTIC_RUN_ID" in os.environ and os.environ.get("RANK", "0") != "0"


@contextmanager
def rank_failure() -> Iterator[None]:
    """A rank that crashed or timed out: exit 1 with its error (not a user-input error)."""
    from gpuscale.api.measure import RankFailure

    try:
        yield
    except RankFailure as exc:
        raise click.ClickException(str(exc)) from None


def command_line() -> str:
    return "gpuscale " + " ".join(shlex.quote(a) for a in sys.argv[1:])


@contextmanager
def progress_bar(label: str) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr; yields ``update(done, total)``. The bar appears at the
    first update, so input errors raised before any work print as one clean line. None under
    torchrun but on rank 0: one bar per job, not one per rank."""
    if _other_torchrun_rank():
        yield lambda done, total: None
        return
    with lazy_progress_bar(label, err_console) as update:
        yield update


def warn(message: str) -> None:
    """A warning line on stderr: stdout stays the table or the JSON document."""
    err_console.print(
        f"[yellow]gpuscale: warning:[/yellow] {escape(message)}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )
