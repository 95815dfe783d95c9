"""Rendering of the measurement commands' results (calibrate, import nccl-tests): rich tables
for the terminal, plotly figures, HTML sections. Given results, computes nothing."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from gpuscale.report.html import Section


def print_calibration(console: Console, cal: Any, notes: Sequence[str]) -> None:
    """The fitted links, predicted vs measured, and the GEMM curve, as rich tables."""
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


def print_fitted_profile(console: Console, fit: Any, html_path: str | None) -> None:
    """A fitted profile (``CalibrationResult.fit``): the tables, then what was written."""
    print_calibration(console, fit.calibration, list(fit.notes))
    if fit.written:
        console.print(f"wrote {fit.written}: use it with --profile {fit.written}")
    else:
        console.print("(add -o FILE to write the profile)")
    if html_path:
        console.print(f"wrote {html_path}")


def calibration_figures(cal: Any) -> list[Any]:
    """Predicted vs measured collective times, and the GEMM efficiency curve."""
    return [f for f in (_collectives_figure(cal), _gemm_figure(cal)) if f is not None]


def _collectives_figure(cal: Any) -> Any:
    import plotly.graph_objects as go

    if not cal.links:
        return None
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
    return fig


def _gemm_figure(cal: Any) -> Any:
    import plotly.graph_objects as go

    g = cal.gemm
    if g is None:
        return None
    fig = go.Figure(
        go.Scatter(x=list(g.flops), y=list(g.efficiency), mode="lines+markers", name=g.key)
    )
    fig.update_layout(
        xaxis_type="log",
        xaxis_title="GEMM FLOPs (2mnk)",
        yaxis_title=f"efficiency vs {g.peak_source}",
        height=420,
    )
    return fig


def calibration_sections(cal: Any, notes: Sequence[str]) -> list[Section]:
    """The HTML report of a calibration."""
    sections = []
    if cal.links:
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
                figures=[_collectives_figure(cal)],
            )
        )
        sections.append(
            Section(
                title="All points",
                rows=[{**asdict(c), "rel_error": c.rel_error} for c in cal.comparisons],
            )
        )
    if cal.gemm is not None:
        sections.append(
            Section(title=f"GEMM efficiency curve ({cal.gemm.key})", figures=[_gemm_figure(cal)])
        )
    if notes:
        sections.append(Section(title="Notes and assumptions", text=" | ".join(notes)))
    return sections


def print_runs(console: Console, runs: Sequence[Any]) -> None:
    """One line per nccl-tests run: where, what, and whether its numbers can be trusted."""
    table = Table(title="nccl-tests runs", title_justify="left")
    for col in ("log:line", "op", "ranks", "level", "type", "rows", "max busbw", "status"):
        table.add_column(
            col, justify="left" if col in ("log:line", "op", "level", "type", "status") else "right"
        )
    for r in runs:
        busbw = [t.busbw_gb_per_s for row in r.rows for t in (row.out_of_place,) if t]
        status = (
            "aborted"
            if r.aborted
            else "wrong values"
            if r.wrong_rows
            else "ok"
            if r.complete
            else "no footer"
        )
        table.add_row(
            f"{r.path.rsplit('/', 1)[-1]}:{r.line}",
            r.op,
            f"{r.nodes}x{r.ranks_per_node}",
            r.level,
            r.dtype,
            str(len(r.rows)),
            f"{max(busbw):.1f}" if busbw else "-",
            status,
        )
    console.print(table)


def collectives_figures(run: Any) -> list[Any]:
    """Bus bandwidth over message size, one line per (op, level): nccl-tests' plot."""
    import plotly.graph_objects as go

    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for s in run.samples:
        groups[(s.op, s.level)].append(s)
    fig = go.Figure()
    for (op, level), samples in sorted(groups.items()):
        samples.sort(key=lambda s: s.size_bytes)
        fig.add_trace(
            go.Scatter(
                x=[s.size_bytes for s in samples],
                y=[s.busbw_gb_per_s for s in samples],
                mode="lines+markers",
                name=f"{op} {level}",
            )
        )
    fig.update_layout(
        xaxis_type="log",
        xaxis_title="message size (bytes)",
        yaxis_title="bus bandwidth (GB/s)",
        title=f"collectives: {run.backend}, {run.world_size} ranks on {run.device}",
    )
    return [fig]


def matmul_figures(run: Any) -> list[Any]:
    """Achieved TFLOP/s over GEMM size."""
    import plotly.graph_objects as go

    samples = sorted(run.samples, key=lambda s: s.flops)
    fig = go.Figure(
        go.Scatter(
            x=[s.flops for s in samples], y=[s.tflops for s in samples], mode="lines+markers"
        )
    )
    fig.update_layout(
        xaxis_type="log",
        xaxis_title="GEMM FLOPs (2mnk)",
        yaxis_title="TFLOP/s",
        title=f"matmul on {run.device}",
    )
    return [fig]


def print_collectives(run: Any, jitter_cv_limit: float) -> None:
    """nccl-tests' own layout (fixed-width text, one row per size), with the jitter columns
    appended: people compare it line by line with nccl-tests output."""
    click.echo(
        f"# gpuscale bench collectives: {run.backend}, {run.world_size} ranks on "
        f"{run.nodes} node(s) x {run.ranks_per_node}, {run.device}, {run.software}"
    )
    head = (
        f"#{'level':>6} {'op':>14} {'ranks':>5} {'size':>12} {'count':>12} {'type':>8} "
        f"{'time':>9} {'algbw':>7} {'busbw':>7} {'p50':>9} {'p99':>9} {'cv':>5}"
    )
    units = (
        f"#{'':>6} {'':>14} {'':>5} {'(B)':>12} {'(elements)':>12} {'':>8} "
        f"{'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'(us)':>9} {'(us)':>9} {'(%)':>5}"
    )
    click.echo(head)
    click.echo(units)
    flagged = 0
    for s in run.samples:
        jittery = (s.cv or 0.0) > jitter_cv_limit
        flagged += jittery
        click.echo(
            f" {s.level:>6} {s.op:>14} {s.ranks:>5} {s.size_bytes:>12} {s.count:>12} "
            f"{s.dtype:>8} {s.time_us:>9.1f} {s.algbw_gb_per_s:>7.3f} "
            f"{s.busbw_gb_per_s:>7.3f} {s.p50_us or 0:>9.1f} {s.p99_us or 0:>9.1f} "
            f"{100 * (s.cv or 0):>5.0f}" + ("  jitter" if jittery else "")
        )
    if flagged:
        click.echo(
            f"# network jitter: expect slow training ({flagged} of {len(run.samples)} "
            f"sizes vary by more than {jitter_cv_limit:.0%} from iteration to iteration)"
        )
    for note in run.notes:
        click.echo(f"# note: {note}")


def print_matmul(console: Console, run: Any, peak: float | None) -> None:
    table = Table(
        title=f"matmul on {run.device}" + (f" ({run.gpu_id})" if run.gpu_id else ""),
        title_justify="left",
    )
    for col in ("m", "n", "k", "dtype", "GFLOP", "time (us)", "TFLOP/s", "of peak", "cv"):
        table.add_column(col, justify="left" if col == "dtype" else "right")
    for s in run.samples:
        table.add_row(
            str(s.m),
            str(s.n),
            str(s.k),
            s.dtype,
            f"{s.flops / 1e9:.3g}",
            f"{s.time_us:.1f}",
            f"{s.tflops:.3f}",
            f"{s.tflops / peak:.0%}" if peak else "-",
            f"{s.cv:.0%}",
        )
    console.print(table)
    for note in run.notes:
        console.print(f"note: {note}")
