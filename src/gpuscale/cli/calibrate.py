"""``gpuscale calibrate``: measure (or read measurements), fit a profile, show how well it fits."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, json_option
from gpuscale.errors import require
from gpuscale.estimate.profile import load_profile, profile_names
from gpuscale.measure.calibrate import (
    Calibration,
    GemmFit,
    Topology,
    calibrate,
    fit_gemm,
    profile_document,
    write_profile,
)
from gpuscale.measure.results import GemmRun
from gpuscale.measure.sources import Measurements


def topology_option(func: Any) -> Any:
    func = click.option(
        "--nics-per-node",
        type=int,
        default=None,
        help="NICs per node, to turn the measured inter-node bus bandwidth into "
        "a per-NIC rate [default: one per GPU].",
    )(func)
    return click.option(
        "--gpus-per-node",
        type=int,
        default=None,
        help="GPUs per node, with --nics-per-node [default: as measured].",
    )(func)


def profile_options(func: Any) -> Any:
    func = click.option(
        "-o",
        "--output",
        default=None,
        help="Write the fitted profile YAML here (use it with --profile).",
    )(func)
    func = click.option(
        "--name", default="measured", show_default=True, help="Name of the profile."
    )(func)
    func = click.option(
        "--base",
        default="generic",
        show_default=True,
        help=f"Profile the measurement overrides ({', '.join(profile_names())} or a YAML path).",
    )(func)
    return click.option(
        "--html",
        "html_path",
        default=None,
        help="Write an HTML report with predicted-vs-measured plots.",
    )(func)


def topology(
    measured_per_node: int, gpus_per_node: int | None, nics_per_node: int | None
) -> Topology:
    if nics_per_node is None:
        return Topology()
    per_node = gpus_per_node or measured_per_node
    require(
        nics_per_node >= 1 and per_node >= 1, "--nics-per-node and --gpus-per-node must be >= 1"
    )
    return Topology(nics_per_gpu=nics_per_node / per_node)


def gemm_fit(runs: list[GemmRun], gpu: str | None) -> tuple[GemmFit | None, list[str]]:
    """Efficiency against the catalog peak of ``gpu`` (or the run's recognised GPU); on a CPU
    without ``--gpu`` the curve goes under ``cpu``, normalised to the best measured rate."""
    from gpuscale.measure.matmul_bench import peak_tflops

    if not runs:
        return None, []
    samples = [s for r in runs for s in r.samples]
    gpu_id = catalog.gpu(gpu).id if gpu else next((r.gpu_id for r in runs if r.gpu_id), None)
    notes = []
    if gpu_id:
        fit = fit_gemm(samples, gpu_id, peak_tflops(gpu_id, samples[0].dtype))
        if runs[0].device == "cpu" or not runs[0].gpu_id:
            notes.append(
                f"GEMM curve measured on {runs[0].device} but stored for {gpu_id} "
                "(--gpu): efficiency is against that GPU's datasheet peak"
            )
    else:
        fit = fit_gemm(samples, "cpu", None)
        notes.append(
            "GEMM curve stored under 'cpu', normalised to the best measured rate (no "
            "datasheet peak); the cost model only uses it for a device named 'cpu'. "
            "Pass --gpu ID to store it for a catalog GPU"
        )
    if fit.clipped:
        notes.append(
            f"{fit.clipped} GEMM points were above the {fit.peak_tflops:g} TFLOP/s peak "
            "and were clipped to efficiency 1: is --gpu right?"
        )
    return fit, notes


def print_calibration(cal: Calibration, notes: list[str]) -> None:
    if cal.links:
        table = Table(
            title="fitted links (alpha: latency per step; inter bw: per NIC)", title_justify="left"
        )
        for col in (
            "level",
            "alpha (us)",
            "bw (GB/s)",
            "max busbw",
            "points",
            "rms error",
            "max error",
        ):
            table.add_column(col, justify="left" if col == "level" else "right")
        for f in cal.links.values():
            table.add_row(
                f.level,
                f"{f.latency_us:.2f}",
                f"{f.bandwidth_gb_per_s:.3f}",
                f"{f.busbw_gb_per_s:.3f}",
                str(f.points),
                f"{f.rms_rel_residual:.1%}",
                f"{f.max_rel_residual:.1%}",
            )
        console.print(table)
        for f in cal.links.values():
            console.print(f"{f.level}: fitted on {', '.join(f.ops)}")
        comp = Table(
            title="predicted (cost model + fitted profile) vs measured", title_justify="left"
        )
        for col in ("level", "op", "ranks", "size (B)", "measured (us)", "predicted (us)", "error"):
            comp.add_column(col, justify="left" if col in ("level", "op") else "right")
        for c in cal.comparisons:
            err = c.rel_error
            style = "red" if abs(err) > 0.5 else ""
            comp.add_row(
                c.level,
                c.op,
                str(c.ranks),
                str(c.size_bytes),
                f"{c.measured_us:.1f}",
                f"{c.predicted_us:.1f}",
                f"[{style}]{err:+.0%}[/{style}]" if style else f"{err:+.0%}",
            )
        console.print(comp)
    if cal.gemm is not None:
        g = cal.gemm
        title = f"GEMM efficiency curve '{g.key}'"
        table = Table(
            title=title,
            title_justify="left",
            min_width=len(title) + 2,
            caption=f"vs {g.peak_source}: {g.peak_tflops:.4g} TFLOP/s",
            caption_justify="left",
        )
        table.add_column("GEMM FLOPs", justify="right")
        table.add_column("efficiency", justify="right")
        for x, y in zip(g.flops, g.efficiency, strict=True):
            table.add_row(f"{x:.3g}", f"{y:.4g}")
        console.print(table)
    for f in cal.links.values():
        for a in f.assumptions:
            console.print(f"assumed ({f.level}): {a}")
    for note in [*cal.skipped, *notes]:
        console.print(f"note: {note}")


def html_report(path: str, cal: Calibration, title: str, notes: list[str]) -> Path:
    import plotly.graph_objects as go

    from gpuscale.report.html import Section, write_report

    sections = []
    if cal.links:
        fig = go.Figure()
        groups: dict[tuple[str, str, int], list[Any]] = defaultdict(list)
        for c in cal.comparisons:
            groups[(c.level, c.op, c.ranks)].append(c)
        for (level, op, n), rows in sorted(groups.items()):
            rows.sort(key=lambda c: c.size_bytes)
            x = [c.size_bytes for c in rows]
            label = f"{op} {level} n={n}"
            fig.add_trace(
                go.Scatter(
                    x=x, y=[c.measured_us for c in rows], mode="markers", name=f"{label} measured"
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=x, y=[c.predicted_us for c in rows], mode="lines", name=f"{label} predicted"
                )
            )
        fig.update_layout(
            xaxis_type="log",
            yaxis_type="log",
            xaxis_title="message size (bytes)",
            yaxis_title="time (us)",
            height=520,
        )
        sections.append(
            Section(
                title="Collectives: predicted vs measured",
                text="Markers are measurements; lines are gpuscale's collective cost model "
                "(collective_time_s) with the fitted latency and bandwidth.",
                rows=[
                    {
                        "level": f.level,
                        "latency_us": f.latency_us,
                        "bandwidth_gb_per_s": f.bandwidth_gb_per_s,
                        "rms_rel_residual": f.rms_rel_residual,
                        "points": f.points,
                    }
                    for f in cal.links.values()
                ],
                figures=[fig],
            )
        )
        sections.append(
            Section(
                title="All points",
                rows=[{**asdict(c), "rel_error": c.rel_error} for c in cal.comparisons],
            )
        )
    if cal.gemm is not None:
        g = cal.gemm
        fig = go.Figure(
            go.Scatter(x=list(g.flops), y=list(g.efficiency), mode="lines+markers", name=g.key)
        )
        fig.update_layout(
            xaxis_type="log",
            xaxis_title="GEMM FLOPs (2mnk)",
            yaxis_title=f"efficiency vs {g.peak_source}",
            height=420,
        )
        sections.append(Section(title=f"GEMM efficiency curve ({g.key})", figures=[fig]))
    if notes:
        sections.append(Section(title="Notes and assumptions", text=" | ".join(notes)))
    return write_report(path, title, sections)


def finish(
    cal: Calibration,
    m: Measurements,
    *,
    name: str,
    base: str,
    output: str | None,
    html_path: str | None,
    topo: Topology,
    notes: list[str],
    as_json: bool,
    title: str,
    how: str = "gpuscale calibrate",
) -> None:
    """Write the profile, check it loads, and print or emit the fit."""
    load_profile(base)  # a wrong --base fails before anything is written
    doc = profile_document(cal, name=name, base=base, source=m.describe(), topo=topo, how=how)
    written = None
    if output:
        written = write_profile(output, doc)
        load_profile.cache_clear()
        load_profile(str(written))  # what we wrote must read back
    if html_path:
        html_report(html_path, cal, title, notes)
    if as_json:
        emit_json(
            {
                "profile": doc,
                "written": str(written) if written else None,
                "fits": {lv: asdict(f) for lv, f in cal.links.items()},
                "gemm": asdict(cal.gemm) if cal.gemm else None,
                "comparisons": [{**asdict(c), "rel_error": c.rel_error} for c in cal.comparisons],
                "notes": [*cal.skipped, *notes],
            }
        )
        return
    print_calibration(cal, notes)
    if written:
        console.print(f"wrote {written}: use it with --profile {written}")
    else:
        console.print("(add -o FILE to write the profile)")
    if html_path:
        console.print(f"wrote {html_path}")


@click.command("calibrate")
@click.option(
    "--from",
    "sources",
    multiple=True,
    help="Read measurements instead of running: gpuscale bench --json files or "
    "nccl-tests logs (repeatable).",
)
@click.option(
    "--gpu",
    default=None,
    help="Catalog GPU the GEMM curve is for [default: recognised; 'cpu' on a CPU].",
)
@click.option("--nproc", type=int, default=None, help="Ranks for the collective benchmark.")
@click.option("--sizes", default=None, help="Collective sizes, MIN:MAX (see bench collectives).")
@click.option("--iters", default=20, show_default=True)
@click.option("--backend", default="auto", type=click.Choice(["auto", "gloo", "nccl"]))
@click.option("--group-by-node", is_flag=True, help="Measure intra- and inter-node separately.")
@click.option(
    "--ranks-per-node",
    type=int,
    default=None,
    help="Treat every K ranks as a node (testing --group-by-node on one host).",
)
@click.option("--timeout", default=120.0, show_default=True)
@click.option("--shapes", default=None, help="GEMM shapes (see bench matmul).")
@topology_option
@profile_options
@json_option
def command(
    sources: tuple[str, ...],
    gpu: str | None,
    nproc: int | None,
    sizes: str | None,
    iters: int,
    backend: str,
    group_by_node: bool,
    ranks_per_node: int | None,
    timeout: float,
    shapes: str | None,
    gpus_per_node: int | None,
    nics_per_node: int | None,
    output: str | None,
    name: str,
    base: str,
    html_path: str | None,
    as_json: bool,
) -> None:
    """Fit a calibration profile (per-level latency and bandwidth, GEMM efficiency curve) from
    the collective and matmul benchmarks, run now or read with --from."""
    from gpuscale.cli.bench import run_collectives, run_matmul
    from gpuscale.measure.sources import load

    if gpu:
        gpu = catalog.gpu(gpu).id
    if sources:
        m = load(sources)
    else:
        m = Measurements()
        run = run_collectives(
            ops="all_reduce,all_gather,reduce_scatter,broadcast,send_recv",
            sizes=sizes,
            factor=2.0,
            iters=iters,
            warmup=5,
            dtype="float32",
            nproc=nproc,
            backend=backend,
            group_by_node=group_by_node,
            ranks_per_node=ranks_per_node,
            timeout=timeout,
        )
        if run is None:
            return  # a non-zero torchrun rank: rank 0 fits and writes
        m.collectives.append(run)
        m.gemm.append(
            run_matmul(shapes=shapes, dtype=None, device="auto", iters=10, warmup=3, gpu=gpu)
        )
    samples = m.collective_samples()
    topo = topology(m.ranks_per_node(), gpus_per_node, nics_per_node)
    gemm, gemm_notes = gemm_fit(m.gemm, gpu)
    cal = calibrate(samples, gemm, topo)
    finish(
        cal,
        m,
        name=name,
        base=base,
        output=output,
        html_path=html_path,
        topo=topo,
        notes=[*m.notes(), *gemm_notes],
        as_json=as_json,
        title=f"gpuscale calibrate: {name}",
    )
