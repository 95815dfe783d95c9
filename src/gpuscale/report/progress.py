"""The one progress bar every long command shows: transient, on stderr, silent when stderr is
not a terminal (so ``--json`` output and pipes stay clean)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextmanager
def progress_bar(
    label: str, console: Console | None = None
) -> Iterator[Callable[[int, int], None]]:
    """Yield ``update(done, total)``; the bar disappears when the block ends."""
    out = console or Console(stderr=True)
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=not out.is_terminal,
    )
    with bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@contextmanager
def bytes_progress_bar(
    label: str, console: Console, *, show: bool = True
) -> Iterator[Callable[[int, int], None] | None]:
    """Yield ``update(done_bytes, total_bytes)`` for a read that reports bytes, with the time
    left; ``None`` (nothing to call) when ``show`` is false."""
    if not show:
        yield None
        return
    columns = (
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
    )
    # Disabled off a terminal as progress_bar is: rich ends a bar it cannot redraw with an
    # empty line, a stray blank line in a log or on a pipe.
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as bar:
        task = bar.add_task(label, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


@contextmanager
def lazy_progress_bar(
    label: str, console: Console, *, show: bool = True
) -> Iterator[Callable[[int, int], None]]:
    """A progress bar that appears at the first ``update(done, total)``, so that errors raised
    before any work print as one clean line; none at all when ``show`` is false."""
    if not show:
        yield lambda done, total: None
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # no stray blank line at the end, as above
    )
    task = bar.add_task(label, total=None)
    started = False

    def update(done: int, total: int) -> None:
        nonlocal started
        if not started:
            bar.start()
            started = True
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if started:
            bar.stop()
