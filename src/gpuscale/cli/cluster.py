"""``gpuscale cluster``: simulate a job trace on a cluster file under placement policies, and
write synthetic traces."""

from __future__ import annotations

import csv
from contextlib import nullcontext

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.api.cluster import (
    DEFAULT_MODEL,
    EVENTS,
    FORMATS,
    ORDERS,
    POLICIES,
    SYNTHETIC,
    AdaptResult,
    ClusterSimulation,
    Degradation,
    cluster_adapt,
    cluster_export,
    cluster_simulate,
    cluster_trace,
    write_trace,
)
from gpuscale.cli._common import FINITE, check_writable, console, emit_json, json_option
from gpuscale.errors import InputError
from gpuscale.report.progress import progress_bar

_COLUMNS = (
    ("avg JCT (h)", "avg_jct_s", 1 / 3600),
    ("p95 JCT (h)", "p95_jct_s", 1 / 3600),
    ("avg queue (h)", "avg_queue_s", 1 / 3600),
    ("makespan (d)", "makespan_s", 1 / 86400),
    ("GPU util", "gpu_utilization", 1.0),
    ("throughput (GPUs)", "throughput_gpus", 1.0),
    ("speed vs packed", "mean_speed", 1.0),
    ("fragmentation", "fragmentation", 1.0),
    ("completed", "jobs_completed", 1.0),
    ("failed", "jobs_failed", 1.0),
)


def _degradation(text: str) -> Degradation:
    parts = text.split(":")
    if len(parts) != 5:
        raise InputError(
            f"--degrade '{text}' must be LEVEL:INDEX:FACTOR:START_S:END_S, "
            "e.g. core:0:0.25:3600:7200",
            field="degrade",
        )
    try:
        return Degradation(
            level=parts[0],
            index=int(parts[1]),
            factor=float(parts[2]),
            start_s=float(parts[3]),
            end_s=float(parts[4]),
        )
    except ValueError:
        raise InputError(
            f"--degrade '{text}': INDEX must be an integer and FACTOR, START_S, END_S numbers",
            field="degrade",
        ) from None


def _render(sim: ClusterSimulation) -> None:
    """Metrics as rows, policies as columns: side by side, and narrow enough for a terminal."""
    c = sim.cluster
    table = Table(
        title=f"{c['name']}: {c['gpus']} GPUs, {c['nodes']} nodes; "
        f"{int(sim.trace['jobs'])} jobs, {sim.results[0].order} queue"
    )
    table.add_column("metric", no_wrap=True)
    for r in sim.results:
        table.add_column(r.policy, justify="right", no_wrap=True)
    rows = [r.to_dict() for r in sim.results]
    for label, key, scale in _COLUMNS:
        cells = []
        for row in rows:
            value = row[key]
            cells.append(str(value) if isinstance(value, int) else f"{float(value) * scale:.3g}")
        table.add_row(label, *cells)
    console.print(table)


def _write_csv(sim: ClusterSimulation, path: str) -> None:
    rows = sim.to_dict()["policies"]
    try:
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    except OSError as exc:
        raise InputError(
            f"cannot write -o '{path}': {exc.strerror or exc}", field="output"
        ) from None


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
    as_json: bool,
) -> None:
    """Replay a job trace on a cluster under placement policies; every job's speed on the GPUs
    it gets comes from the cost model."""
    check_writable(output, "-o")
    degradations = tuple(_degradation(d) for d in degrade)
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
    if output:
        _write_csv(sim, output)
    if as_json:
        emit_json(sim.to_dict())
    else:
        _render(sim)


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
        try:
            with open(output, "w") as fh:
                fh.write(result.text)
        except OSError as exc:
            raise InputError(
                f"cannot write -o '{output}': {exc.strerror or exc}", field="output"
            ) from None
        console.print(f"wrote {fmt} topology of {result.cluster} to {output}")
    else:
        click.echo(result.text, nl=False)


def _render_adapt(result: AdaptResult) -> None:
    d = result.to_dict()
    console.print(
        f"{d['model']}: {d['event']}"
        + (f" x{d['factor']:g}" if d["event"] != "node-loss" else "")
        + f" at {d['at_s'] / 3600:g} h; horizon {d['horizon_s'] / 3600:g} h; "
        f"restart costs {d['restart_s']:.0f} s"
    )
    table = Table()
    for col in ("", "plan after the event", "tokens over the horizon"):
        table.add_column(col)
    table.add_row("before", d["plan_before"], "")
    table.add_row("static", d["plan_static"], f"{d['tokens_static']:.4g}")
    table.add_row("adaptive", d["plan_adaptive"], f"{d['tokens_adaptive']:.4g}")
    console.print(table)
    if d["gain"] is not None:
        console.print(f"adaptive / static: x{d['gain']:.2f}")


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
        factor=factor if event != "node-loss" else 1.0,
        at_h=at_h,
        horizon_h=horizon_h,
        restart_s=restart_s,
        checkpoint_read_gb_per_s=checkpoint_read_gb_s,
        repair_h=repair_h,
    )
    if as_json:
        emit_json(result.to_dict())
    else:
        _render_adapt(result)
