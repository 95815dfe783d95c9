"""``gpuscale calibrate``: measure (or read measurements), fit a profile, show how well it fits."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.table import Table

from gpuscale import catalog
from gpuscale.cli._common import console, emit_json, json_option
from gpuscale.cli.bench import warn
from gpuscale.costmodel.profile import load_profile, profile_names
from gpuscale.errors import InputError, require
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
    measured_per_node: int | None, gpus_per_node: int | None, nics_per_node: int | None
) -> Topology:
    """The NIC share the fit assumes. ``--gpus-per-node`` only divides ``--nics-per-node``, and
    a node has at least as many GPUs as the measurement ran ranks on it (``None``: not known
    yet, for checking the options before the work)."""
    measured = measured_per_node or 1
    if gpus_per_node is not None:
        require(
            gpus_per_node >= 1,
            f"--gpus-per-node must be >= 1, got {gpus_per_node}; accepted: the GPUs of one node",
        )
        require(
            nics_per_node is not None,
            f"--gpus-per-node {gpus_per_node} has no effect without --nics-per-node; accepted: "
            "both (the NIC share per GPU), or neither",
        )
        require(
            gpus_per_node >= measured,
            f"--gpus-per-node must be at least the {measured} ranks per node the "
            f"measurement ran, got {gpus_per_node}; accepted: {measured} or more",
        )
    if nics_per_node is None:
        return Topology()
    require(
        nics_per_node >= 1,
        f"--nics-per-node must be >= 1, got {nics_per_node}; accepted: the NICs of one node",
    )
    return Topology(nics_per_gpu=nics_per_node / (gpus_per_node or measured))


def check_outputs(*, output: str | None, html_path: str | None, name: str) -> None:
    """Everything about where results go, checked before any measurement is read or run."""
    from gpuscale.cli._common import check_writable

    require(
        bool(name.strip()) and name == name.strip(),
        f"--name {name!r} is empty or padded; accepted: a non-empty name such as 'my-cluster'",
    )
    if output:
        check_writable(output, "-o")
    if html_path:
        check_writable(html_path, "--html")


def distinct_files(paths: tuple[str, ...], what: str) -> None:
    """The same file twice would count its points twice and weight the fit towards it."""
    seen: dict[Path, str] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            alias = "" if seen[key] == p else f" (as '{seen[key]}')"
            raise InputError(f"{what} '{p}' is given twice{alias}; accepted: each file once")
        seen[key] = p


POOR_FIT_RMS = 0.5
"""RMS relative residual above which a fit is warned about, not just tabled. The real nccl-tests
sweeps in tests/data/nccl-tests fit at 0.5% to 43% RMS, because one alpha-beta line cannot follow
NCCL's protocol switches between latency and bandwidth regimes (see measure/calibrate.py); past
50% the line is off by more than that effect explains."""


def profile_warnings(cal: Calibration, m: Measurements) -> list[str]:
    """What makes the written profile wrong for the GPUs it will be used on: printed on stderr
    in every output mode, and kept in the JSON document."""
    out = []
    if cal.gemm is not None and cal.gemm.key != "cpu" and any(r.on_cpu for r in m.gemm):
        lo, hi = min(cal.gemm.efficiency), max(cal.gemm.efficiency)
        out.append(
            f"the GEMM curve was measured on a CPU and is stored as {cal.gemm.key}'s "
            f"(efficiency {lo:.2g} to {hi:.2g} of its peak): estimates with this profile price "
            f"{cal.gemm.key} compute at CPU speed; use it only to test the pipeline"
        )
    cpu_links = [r for r in m.collectives if r.backend != "nccl"]
    if cal.links and cpu_links:
        rates = ", ".join(f"{lv} {f.bandwidth_gb_per_s:.3g} GB/s" for lv, f in cal.links.items())
        out.append(
            f"links fitted from {cpu_links[0].backend} on a CPU ({rates}): every GPU estimate "
            "with this profile uses host-loopback bandwidth for NVLink and the network"
        )
    for f in cal.links.values():
        if f.rms_rel_residual > POOR_FIT_RMS:
            out.append(
                f"the {f.level} fit misses the measurements by {f.rms_rel_residual:.0%} RMS "
                f"({f.max_rel_residual:.0%} at worst): one latency-bandwidth line does not "
                "describe them; see the predicted-vs-measured table"
            )
    return out


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
            table.add_column(
                col, justify="left" if col == "level" else "right", no_wrap=col == "alpha (us)"
            )
        for f in cal.links.values():
            table.add_row(
                f.level,
                "not determined" if f.latency_us is None else f"{f.latency_us:.2f}",
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
    try:
        return write_report(path, title, sections)
    except OSError as exc:
        raise InputError(f"--html: cannot write '{path}': {exc.strerror}") from None


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
    today = f"{datetime.now(timezone.utc):%Y-%m-%d}"
    doc = profile_document(
        cal,
        name=name,
        base=base,
        source=m.describe(),
        topo=topo,
        how=how,
        measured_on=m.measured_on(today),
    )
    warnings = profile_warnings(cal, m)
    for w in warnings:
        warn(w)
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
                "warnings": warnings,
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


BENCHMARK_OPTIONS = (
    "nproc",
    "sizes",
    "iters",
    "backend",
    "group_by_node",
    "ranks_per_node",
    "timeout",
    "shapes",
)
"""Options that configure the benchmarks calibrate runs, and so mean nothing with --from."""


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
    the collective and matmul benchmarks, run now or read with --from. From one measured
    training run instead: gpuscale calibrate run --help."""
    from gpuscale.cli.bench import run_collectives, run_matmul
    from gpuscale.measure.matmul_bench import parse_shapes
    from gpuscale.measure.sources import load

    check_outputs(output=output, html_path=html_path, name=name)
    topology(None, gpus_per_node, nics_per_node)
    load_profile(base)
    if gpu:
        gpu = catalog.gpu(gpu).id
    if sources:
        ctx = click.get_current_context()
        for param in ctx.command.params:
            if param.name in BENCHMARK_OPTIONS and ctx.get_parameter_source(param.name) not in (
                None,
                ParameterSource.DEFAULT,
            ):
                raise InputError(
                    f"{param.opts[-1]} has no effect with --from (it sets up a benchmark run); "
                    "accepted: drop it, or drop --from to measure here"
                )
        distinct_files(sources, "--from")
        m = load(sources)
    else:
        if shapes is not None:
            parse_shapes(shapes)  # fails now, not after the collective sweep
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
