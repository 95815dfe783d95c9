"""``gpuscale cluster``: simulate a job trace on a cluster file under placement policies, and
write synthetic traces."""

from __future__ import annotations

from contextlib import nullcontext

import click

from gpuscale import catalog, files
from gpuscale.api.cluster import (
    DEFAULT_MODEL,
    EVENTS,
    FORMATS,
    ORDERS,
    POLICIES,
    SYNTHETIC,
    cluster_adapt,
    cluster_export,
    cluster_simulate,
    cluster_trace,
    parse_degradation,
    write_trace,
)
from gpuscale.cli._common import (
    FINITE,
    check_writable,
    console,
    emit_json,
    html_option,
    json_option,
    write_result_html,
)
from gpuscale.report.cluster import print_adapt, print_simulation, simulation_csv
from gpuscale.report.progress import progress_bar


@click.group("cluster")
def command() -> None:
    """Placement on a shared cluster: trace-driven simulation, synthetic traces, topology exports."""


@command.command("simulate")
@click.option("--cluster", "cluster_file", required=True, help="Cluster YAML (see examples/).")
@click.option("--trace", "trace_file", required=True, help="Job CSV (submit, GPUs, duration).")
@click.option(
    "--policy",
    type=click.Choice([*POLICIES, "all"]),
    default="all",
    show_default=True,
    help="Placement policy; all runs each on the same trace.",
)
@click.option("--order", type=click.Choice(ORDERS), default="fifo", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--default-model",
    default=DEFAULT_MODEL,
    show_default=True,
    help="Catalog model for trace rows that name none.",
)
@click.option(
    "--node-mtbf-h", type=FINITE, default=None, help="Mean hours between failures of one node."
)
@click.option("--repair-h", type=FINITE, default=4.0, show_default=True)
@click.option("--checkpoint-min", type=FINITE, default=60.0, show_default=True)
@click.option("--max-restarts", type=int, default=10, show_default=True)
@click.option(
    "--degrade",
    multiple=True,
    help="LEVEL:INDEX:FACTOR:START_S:END_S, a link-level slowdown (repeatable).",
)
@click.option(
    "--adaptive",
    is_flag=True,
    help="Jobs re-plan when a degradation hits their link (paying a restart each way).",
)
@click.option("-o", "--output", default=None, help="Write the per-policy metrics as CSV.")
@html_option
@json_option
def simulate_command(
    cluster_file: str,
    trace_file: str,
    policy: str,
    order: str,
    seed: int,
    default_model: str,
    node_mtbf_h: float | None,
    repair_h: float,
    checkpoint_min: float,
    max_restarts: int,
    degrade: tuple[str, ...],
    adaptive: bool,
    output: str | None,
    html_path: str | None,
    as_json: bool,
) -> None:
    """Replay a job trace on a cluster under placement policies; every job's speed on the GPUs
    it gets comes from the cost model."""
    check_writable(output, "-o")
    check_writable(html_path, "--html")
    degradations = tuple(parse_degradation(d) for d in degrade)
    bar = nullcontext(None) if as_json else progress_bar("simulating")
    with bar as update:
        step = None if update is None else (lambda name, d, t: update(d, t))
        sim = cluster_simulate(
            cluster_file,
            trace_file,
            policy=policy,
            order=order,
            seed=seed,
            default_model=default_model,
            node_mtbf_h=node_mtbf_h,
            repair_h=repair_h,
            checkpoint_min=checkpoint_min,
            max_restarts=max_restarts,
            degradations=degradations,
            adaptive=adaptive,
            progress=step,
        )
    doc = sim.to_dict()
    if output:
        files.write_text(output, simulation_csv(doc), label="-o", field="output")
    best = min(doc["policies"], key=lambda r: r["avg_jct_s"])
    write_result_html(
        html_path,
        f"gpuscale cluster simulate: {trace_file} on {cluster_file}",
        f"lowest average job completion time: {best['policy']} "
        f"({best['avg_jct_s'] / 3600:,.2f} h over {best['jobs_submitted']:,} jobs)",
        sim,
    )
    if as_json:
        emit_json(doc)
    else:
        print_simulation(console, doc)


@command.command("trace")
@click.option("--synthetic", type=click.Choice(SYNTHETIC), required=True)
@click.option("--jobs", type=int, required=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--load-gpus",
    type=FINITE,
    default=None,
    help="Scale arrivals to this many busy GPUs on average (Philly itself: ~374).",
)
@click.option("-o", "--output", required=True, help="CSV file to write.")
def trace_command(
    synthetic: str, jobs: int, seed: int, load_gpus: float | None, output: str
) -> None:
    """Write a synthetic job trace that matches published statistics of a real cluster."""
    check_writable(output, "-o")
    trace = cluster_trace(synthetic=synthetic, jobs=jobs, seed=seed, load_gpus=load_gpus)
    write_trace(trace, output)
    console.print(f"wrote {len(trace)} jobs to {output}")


@command.command("export")
@click.option("--cluster", "cluster_file", required=True, help="Cluster YAML (see examples/).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), required=True)
@click.option(
    "--node-prefix", default="node", show_default=True, help="Node names: PREFIX + index."
)
@click.option("-o", "--output", default=None, help="Write to a file instead of stdout.")
@json_option
def export_command(
    cluster_file: str, fmt: str, node_prefix: str, output: str | None, as_json: bool
) -> None:
    """The cluster's topology for Slurm (topology.conf / topology.yaml), Kueue or Volcano."""
    check_writable(output, "-o")
    result = cluster_export(cluster_file, format=fmt, node_prefix=node_prefix)
    if as_json:
        emit_json(result.to_dict())
    elif output:
        files.write_text(output, result.text, label="-o", field="output")
        console.print(f"wrote {fmt} topology of {result.cluster} to {output}")
    else:
        click.echo(result.text, nl=False)


@command.command("adapt")
@click.argument("model")
@click.option("--gpu", required=True, help="Catalog GPU id.")
@click.option("--gpus", type=int, required=True)
@click.option("--gpus-per-node", type=int, default=catalog.DEFAULT_GPUS_PER_NODE, show_default=True)
@click.option(
    "--inter", default=catalog.DEFAULT_INTER, show_default=True, help="Fabric between nodes."
)
@click.option("--event", type=click.Choice(EVENTS), required=True)
@click.option(
    "--factor",
    type=FINITE,
    default=0.25,
    show_default=True,
    help="Bandwidth left on the link (inter/intra).",
)
@click.option("--at-h", type=FINITE, default=1.0, show_default=True, help="Hours into the run.")
@click.option("--horizon-h", type=FINITE, default=24.0, show_default=True)
@click.option(
    "--restart-s",
    type=FINITE,
    default=300.0,
    show_default=True,
    help="Relaunch time (plus checkpoint read).",
)
@click.option("--checkpoint-read-gb-s", type=FINITE, default=10.0, show_default=True)
@click.option(
    "--repair-h", type=FINITE, default=4.0, show_default=True, help="Node repair time (node-loss)."
)
@json_option
def adapt_command(
    model: str,
    gpu: str,
    gpus: int,
    gpus_per_node: int,
    inter: str,
    event: str,
    factor: float,
    at_h: float,
    horizon_h: float,
    restart_s: float,
    checkpoint_read_gb_s: float,
    repair_h: float,
    as_json: bool,
) -> None:
    """Re-plan MODEL after a link degradation or a node loss; static vs adaptive throughput."""
    result = cluster_adapt(
        model,
        gpu=gpu,
        gpus=gpus,
        gpus_per_node=gpus_per_node,
        inter=inter,
        event=event,
        factor=factor,
        at_h=at_h,
        horizon_h=horizon_h,
        restart_s=restart_s,
        checkpoint_read_gb_per_s=checkpoint_read_gb_s,
        repair_h=repair_h,
    )
    if as_json:
        emit_json(result.to_dict())
    else:
        print_adapt(console, result.to_dict())
