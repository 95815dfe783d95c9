"""CLI options that shape an uneven pipeline split (Megatron-Core's names in the help)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def pipeline_split_options(func: F) -> F:
    """``--first-stage-layers``, ``--last-stage-layers``, ``--embedding-as-layer``,
    ``--loss-as-layer`` (see :class:`gpuscale.specs.Plan`)."""
    options = [
        click.option(
            "--first-stage-layers",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Layers on the first pipeline rank (Megatron --decoder-first-pipeline-num-layers;"
            " 0: even or automatic split).",
        ),
        click.option(
            "--last-stage-layers",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Layers on the last pipeline rank (--decoder-last-pipeline-num-layers).",
        ),
        click.option(
            "--embedding-as-layer",
            is_flag=True,
            help="Count the embedding as a layer of the first stage "
            "(--account-for-embedding-in-pipeline-split).",
        ),
        click.option(
            "--loss-as-layer",
            is_flag=True,
            help="Count the output layer and loss as a layer of the last stage "
            "(--account-for-loss-in-pipeline-split).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
