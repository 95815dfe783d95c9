"""``gpuscale serve``: the web page on this machine (parse, then :func:`gpuscale.web.serve`)."""

from __future__ import annotations

import click

from gpuscale.cli._common import number_type
from gpuscale.web import DEFAULT_HOST, DEFAULT_PORT, serve


@click.command("serve")
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address to listen on; the default is reachable from this machine only.",
)
@click.option(
    "--port",
    type=number_type(click.IntRange(0, 65535)),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port (0: any free one; the printed URL names it).",
)
def command(host: str, port: int) -> None:
    """A local web page: pick a model, GPU, fabric and GPU count (or a serving load) and see the
    verdict, the top plans, the curves and the memory, with the report and every export."""
    serve(host=host, port=port, announce=click.echo)
