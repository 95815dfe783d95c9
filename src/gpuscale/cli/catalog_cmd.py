"""``gpuscale catalog``: list the built-in GPUs, fabrics and models with their sources."""

from __future__ import annotations

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, json_option
from gpuscale.costmodel.params import total_params

KINDS = ("gpus", "links", "models")


@click.command("catalog")
@click.argument("kind", type=click.Choice(KINDS), default="gpus")
@click.option("--sources", is_flag=True, help="Show each entry's source in the table too.")
@json_option
def command(kind: str, sources: bool, as_json: bool) -> None:
    """List catalog entries: gpus (default), links (fabrics) or models. Every figure has a
    source (shown with --sources and always in --json)."""
    if kind == "gpus":
        rows = [
            {
                "id": d.id,
                "name": d.name,
                "memory_gib": d.memory_gib,
                "hbm_gb_per_s": d.hbm_bandwidth_gb_per_s,
                "tflops_16bit": d.peak(d.half_precision),
                "fp8_tflops": d.peak_tflops.get("fp8"),
                "intra_link": d.intra_link,
                "source": d.source,
            }
            for d in catalog.gpus().values()
        ]
    elif kind == "links":
        rows = [
            {
                "id": link.id,
                "name": link.name,
                "kind": link.kind,
                "gb_per_s_per_port": link.bandwidth_gb_per_s,
                "latency_us": link.latency_us,
                "rdma": link.rdma,
                "source": link.source,
            }
            for link in catalog.links().values()
        ]
    else:
        rows = [
            {
                "id": m.name,
                "params_b": round(total_params(m) / 1e9, 3),
                "layers": m.num_layers,
                "hidden": m.hidden_size,
                "heads": m.num_heads,
                "kv_heads": m.num_kv_heads,
                "experts": m.num_experts,
                "source": m.source,
            }
            for m in catalog.models().values()
        ]
    if as_json:
        emit_json({kind: rows})
        return
    keys = [k for k in rows[0] if sources or k != "source"]
    table = Table(title=f"gpuscale catalog: {kind}")
    for key in keys:
        table.add_column(key, overflow="fold", no_wrap=key == "id")
    for row in rows:
        table.add_row(*("" if row[k] is None else str(row[k]) for k in keys))
    console.print(table)
    if not sources:
        console.print(f"sources: gpuscale catalog {kind} --sources (or --json)")
