"""``gpuscale cluster``: simulate a job trace on a cluster file under placement policies, and
write synthetic traces."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import click

from gpuscale import files
from gpuscale.api import cluster as cluster_api
from gpuscale.cli._common import (
    FINITE,
    check_writable,
    console,
    emit_json,
    typed_options,
    write_result_html,
)
from gpuscale.cli._options import MODEL, flag, opt, options
from gpuscale.errors import require
from gpuscale.report.cluster import print_adapt, print_simulation, simulation_answer, simulation_csv
from gpuscale.report.progress import progress_bar

CLUSTER = opt("--cluster cluster_file", required=True, help="Cluster YAML (see examples/).")


@click.group("cluster")
def command() -> None:
    """Placement on a shared cluster: trace-driven simulation, synthetic traces, topology exports."""


@command.command("simulate")
@options(
    CLUSTER,
    opt("--trace trace_file", required=True, help="Job CSV (submit, GPUs, duration)."),
    *("policy", "order", "seed", "default_model", "node_mtbf_h", "repair_h", "checkpoint_min"),
    "max_restarts",
    opt(
        "--degrade",
        multiple=True,
        help="LEVEL:INDEX:FACTOR:START_S:END_S, a link-level slowdown (repeatable).",
    ),
    "adaptive",
    opt("-o --output", help="Write the per-policy metrics as CSV."),
    "html",
    "json",
)
def simulate_command(
    cluster_file: str,
    trace_file: str,
    degrade: tuple[str, ...],
    output: str | None,
    html_path: str | None,
    as_json: bool,
    **o: Any,
) -> None:
    """Replay a job trace on a cluster under placement policies; every job's speed on the GPUs
    it gets comes from the cost model."""
    check_writable(output, "-o")
    check_writable(html_path, "--html")
    degradations = tuple(cluster_api.parse_degradation(d) for d in degrade)
    with nullcontext(None) if as_json else progress_bar("simulating") as update:
        step = None if update is None else (lambda name, d, t: update(d, t))
        sim = cluster_api.cluster_simulate(
            cluster_file, trace_file, degradations=degradations, progress=step, **o
        )
    doc = sim.to_dict()
    if output:
        files.write_text(output, simulation_csv(doc), label="-o", field="output")
    title = f"gpuscale cluster simulate: {trace_file} on {cluster_file}"
    write_result_html(html_path, title, simulation_answer(doc), sim)
    if as_json:
        emit_json(doc)
    else:
        print_simulation(console, doc)


@command.command("trace")
@options(
    flag("synthetic", required=True, default=None),
    flag("jobs", required=True),
    "seed",
    "load_gpus",
    opt("-o --output", required=True, help="CSV file to write."),
    "json",
)
def trace_command(output: str, as_json: bool, **o: Any) -> None:
    """Write a synthetic job trace that matches published statistics of a real cluster."""
    check_writable(output, "-o")
    trace = cluster_api.cluster_trace(**o)
    cluster_api.write_trace(trace, output)
    if as_json:
        emit_json({**o, "jobs": len(trace), "output": output})
    else:
        console.print(f"wrote {len(trace)} jobs to {output}")


@command.command("export")
@options(
    CLUSTER,
    opt(
        "--format fmt",
        click.Choice(cluster_api.FORMATS),
        required=True,
        help="Scheduler file to write.",
    ),
    opt("--node-prefix", default="node", help="Node names: PREFIX + index."),
    opt("-o --output", help="Write to a file instead of stdout."),
    "json",
)
def export_command(
    cluster_file: str, fmt: str, node_prefix: str, output: str | None, as_json: bool
) -> None:
    """The cluster's topology for Slurm (topology.conf / topology.yaml), Kueue or Volcano."""
    check_writable(output, "-o")
    result = cluster_api.cluster_export(cluster_file, format=fmt, node_prefix=node_prefix)
    if output:  # with --json too: -o names the file, --json what stdout shows
        files.write_text(output, result.text, label="-o", field="output")
    if as_json:
        emit_json(result.to_dict())
    elif output:
        console.print(f"wrote {fmt} topology of {result.cluster} to {output}")
    else:
        click.echo(result.text, nl=False)


@command.command("adapt")
@options(
    MODEL,
    flag("gpu", required=True),
    flag("gpus", required=True),
    "gpus_per_node",
    "inter",
    flag("event", required=True),
    *("factor", "at_h", "horizon_h", "restart_s"),
    opt(
        "--checkpoint-read-gb-s checkpoint_read_gb_per_s",
        FINITE,
        10.0,
        "Checkpoint read bandwidth, GB/s.",
    ),
    "repair_h",
    "json",
)
def adapt_command(model: str, as_json: bool, **o: Any) -> None:
    """Re-plan MODEL after a link degradation or a node loss; static vs adaptive throughput."""
    typed = typed_options(click.get_current_context())
    require(
        o["event"] != "node-loss" or "factor" not in typed,
        "--factor is the bandwidth left after --event inter or intra; a node loss has none "
        "(leave --factor out)",
        field="factor",
    )
    result = cluster_api.cluster_adapt(model, **o)
    if as_json:
        emit_json(result.to_dict())
    else:
        print_adapt(console, result.to_dict())
