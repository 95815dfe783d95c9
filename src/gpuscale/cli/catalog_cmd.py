"""``gpuscale catalog``: list the built-in GPUs, fabrics and models with their sources."""

from __future__ import annotations

import click

from gpuscale.api.catalog import KINDS, catalog_listing
from gpuscale.cli._common import console, emit_json
from gpuscale.cli._options import opt, options
from gpuscale.report.catalog import print_catalog


@click.command("catalog")
@click.argument("kind", type=click.Choice(KINDS), default="gpus")
@options(opt("--sources", bool, help="Show each entry's source in the table too."), "json")
def command(kind: str, sources: bool, as_json: bool) -> None:
    """List catalog entries: gpus (default), links (fabrics) or models. Every figure has a
    source (shown with --sources and always in --json)."""
    doc = catalog_listing(kind).to_dict()
    if as_json:
        emit_json(doc)
    else:
        print_catalog(console, kind, doc[kind], sources)
