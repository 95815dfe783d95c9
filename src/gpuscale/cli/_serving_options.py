"""Options of ``gpuscale infer`` for serving under load, disaggregation and the SLO search."""

from __future__ import annotations

from typing import Any

import click

from gpuscale.cli._common import FINITE


def serving_options(func: Any) -> Any:
    """The options of the serving model under load, the disaggregated split and the search."""
    opts = [
        click.option(
            "--concurrency", type=int, default=None, help="Closed loop: requests kept in flight."
        ),
        click.option(
            "--request-rate",
            type=FINITE,
            default=None,
            help="Open loop: Poisson arrivals, requests/s.",
        ),
        click.option(
            "--num-requests",
            type=int,
            default=1000,
            show_default=True,
            help="Requests in the benchmark (open loop; closed loop with random lengths: the first C are a burst).",
        ),
        click.option(
            "--prefix-hit",
            type=FINITE,
            default=0.0,
            show_default=True,
            help="Share of each prompt served from the prefix cache.",
        ),
        click.option(
            "--input-cv",
            type=FINITE,
            default=0.0,
            show_default=True,
            help="Spread of prompt lengths (lognormal coefficient of variation; 0 = fixed).",
        ),
        click.option(
            "--output-cv",
            type=FINITE,
            default=0.0,
            show_default=True,
            help="Spread of output lengths (lognormal coefficient of variation; 0 = fixed).",
        ),
        click.option(
            "--pp", type=int, default=1, show_default=True, help="Pipeline stages per engine."
        ),
        click.option(
            "--ep", type=int, default=1, show_default=True, help="Expert-parallel degree (MoE)."
        ),
        click.option(
            "--attention-dp",
            type=int,
            default=1,
            show_default=True,
            help="Attention data-parallel ranks inside --tp (MoE).",
        ),
        click.option(
            "--replicas",
            type=int,
            default=1,
            show_default=True,
            help="Engine instances behind a load balancer.",
        ),
        click.option(
            "--prefill-workers", type=int, default=None, help="Disaggregated: prefill workers."
        ),
        click.option("--prefill-tp", type=int, default=1, show_default=True),
        click.option("--prefill-ep", type=int, default=1, show_default=True),
        click.option("--prefill-attention-dp", type=int, default=1, show_default=True),
        click.option(
            "--prefill-batch", type=int, default=None, help="Most prompts a prefill worker batches."
        ),
        click.option(
            "--decode-workers", type=int, default=None, help="Disaggregated: decode workers."
        ),
        click.option("--decode-tp", type=int, default=1, show_default=True),
        click.option("--decode-ep", type=int, default=1, show_default=True),
        click.option("--decode-attention-dp", type=int, default=1, show_default=True),
        click.option(
            "--decode-batch", type=int, default=None, help="Most requests a decode worker runs."
        ),
        click.option(
            "--search", is_flag=True, help="Find the deployment with the most goodput per GPU."
        ),
        click.option("--gpus", type=int, default=None, help="Search: GPUs available."),
        click.option("--slo-ttft-ms", type=FINITE, default=None, help="Search: TTFT target (p99)."),
        click.option("--slo-tpot-ms", type=FINITE, default=None, help="Search: TPOT target (p99)."),
        click.option(
            "--price",
            type=FINITE,
            default=None,
            help="Search: $ per GPU-hour; rank by goodput per dollar.",
        ),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func
