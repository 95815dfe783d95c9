"""``gpuscale estimate``: one plan, one cluster -> step time, throughput, MFU, memory, breakdown."""

from __future__ import annotations

from typing import Any

import click

from gpuscale import api
from gpuscale.cli._common import check_writable, console, emit_json, write_result_html
from gpuscale.cli._options import RUN, options
from gpuscale.report.estimate import answer, print_estimate


@click.command("estimate")
@options(RUN, "html", "json")
def command(model: str, html_path: str | None, as_json: bool, **run: Any) -> None:
    """Predict one training step of MODEL on a cluster under one parallel plan.

    MODEL is a catalog id (gpuscale catalog models) or a Hugging Face config.json.
    """
    check_writable(html_path, "--html")
    result = api.estimate(model, **run)
    doc = result.to_dict()
    title = f"gpuscale estimate: {result.model} on {result.gpus} x {result.gpu}"
    write_result_html(html_path, title, answer(doc), result)
    if as_json:
        emit_json(doc)
        return
    print_estimate(console, doc, result.parts_s)
