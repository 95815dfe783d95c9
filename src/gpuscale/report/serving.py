"""``infer``: the static-batch table per TP degree, the latency percentiles under load, and the
SLO search's ranking."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuscale.planner.serving.search import RESOLVED_PLACES

_STATIC_COLUMNS = (
    "TP",
    "fits",
    "GiB/GPU",
    "TTFT ms",
    "ms/tok",
    "tok/s",
    "per GPU",  # tok/s per GPU: "tok/s/GPU" took the table past 80 columns, truncated there
    "mem ms",
    "comm ms",
)


def _print_titled(console: Console, title: str, table: Table) -> None:
    # The title on its own line: as a table title rich wraps it to the table's width (four
    # narrow columns), splitting the model, GPU and engine over three padded lines.
    console.print(title, soft_wrap=False)
    console.print(table)


def print_static(console: Console, doc: Mapping[str, Any]) -> None:
    """The ``infer_static`` document (``StaticServingResult.to_dict()``): one row per TP."""
    title = (
        f"{doc['model']} on {doc['gpu']}: batch {doc['batch']}, {doc['input']} in / "
        f"{doc['output']} out, {doc['weights']} weights, {doc['kv_dtype']} KV, {doc['engine']}"
    )
    table = Table()
    for col in _STATIC_COLUMNS:
        table.add_column(col, justify="right")
    for r in doc["options"]:
        b = r["breakdown"]
        table.add_row(
            str(r["tp"]),
            "yes" if r["fits"] else "[red]no[/red]",
            f"{r['memory_per_gpu_gib']:.1f}",
            f"{r['ttft_ms']:.1f}",
            f"{r['tpot_ms']:.2f}",
            f"{r['output_tokens_per_s']:,.0f}",
            f"{r['output_tokens_per_s_per_gpu']:,.0f}",
            f"{(b['decode_gemm'] + b['decode_attention']) * 1e3:.2f}",
            f"{b['decode_tp_comm'] * 1e3:.2f}",
        )
    _print_titled(console, title, table)
    console.print(f"verdict: {doc['verdict']}")


def print_serving(console: Console, doc: Mapping[str, Any]) -> None:
    """The ``infer`` document under load (``ServingResult.to_dict()``): mean and percentiles."""
    o, client = doc["options"][0], doc["client"]
    if not o["fits"]:
        # Its figures are the pool of one request forced onto a GPU that holds none: no engine
        # would start, so they are not shown (the JSON keeps them, beside ``fits``: false).
        console.print(
            f"{doc['model']} on {doc['gpu']} ({doc['engine']}, {doc['weights']}): "
            f"{o['memory_per_gpu_gib']:.1f} GiB per GPU needed"
        )
        for note in o["notes"]:
            console.print(f"note: {note}")
        console.print(f"verdict: {doc['verdict']}")
        return
    load = (
        f"concurrency {client['concurrency']}"
        if client["concurrency"]
        else f"{client['request_rate']} req/s"
    )
    title = (
        f"{doc['model']} on {doc['gpu']} ({doc['engine']}, {doc['weights']}): "
        f"{doc['input']} in / {doc['output']} out, " + load
    )
    table = Table()
    for col in ("", "mean", "p50", "p90", "p99"):
        table.add_column(col, justify="right")
    table.add_row(
        "TTFT ms",
        *(f"{o[k]:.1f}" for k in ("ttft_ms", "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99")),
    )
    table.add_row(
        "TPOT ms",
        *(f"{o[k]:.2f}" for k in ("tpot_ms", "tpot_ms_p50", "tpot_ms_p90", "tpot_ms_p99")),
    )
    table.add_row(
        "e2e s", *(f"{o[k]:.2f}" for k in ("e2e_s", "e2e_s_p50", "e2e_s_p90", "e2e_s_p99"))
    )
    _print_titled(console, title, table)
    console.print(
        f"throughput: {o['output_tokens_per_s']:,.0f} output tok/s "
        f"({o['output_tokens_per_s_per_gpu']:,.0f}/GPU), {o['requests_per_s']:.2f} req/s; "
        f"KV cache {o['kv_cache_occupancy']:.0%} full, "
        f"{o['preemptions_per_request']:.2f} preemptions/request; TPOT excludes the first token"
    )
    for note in o["notes"]:
        console.print(f"note: {note}")
    _print_band(console, doc.get("uncertainty") or {})
    console.print(f"verdict: {doc['verdict']}")


_BAND_NAMES = {
    "ttft_ms": "mean TTFT",
    "tpot_ms": "mean TPOT",
    "output_tokens_per_s": "output tok/s",
}


def band_lines(band: Mapping[str, Any]) -> list[str]:
    """How far the figures fell from measured runs like this one (ServingBand.as_dict), in
    words: per metric, the 10th-90th percentile of measured / predicted and its median, then
    one note per difference between the deployment and those runs; none without a band. The
    CLI and the web page both say it so."""
    if not band:
        return []
    spans = ", ".join(
        f"{_BAND_NAMES[k]} {lo:.2f}-{hi:.2f}x (median {mid:.2f}x)"
        for k, (lo, mid, hi) in band["measured_over_predicted_p10_p50_p90"].items()
    )
    return [
        f"error band from {band['regime']}, per metric 80% of them measured within: {spans} "
        "the model's figure",
        *(f"note: {warning}" for warning in band["warnings"]),
    ]


def _print_band(console: Console, band: Mapping[str, Any]) -> None:
    for line in band_lines(band):
        console.print(line)


def print_sweep(console: Console, doc: Mapping[str, Any]) -> None:
    """The load sweep's document (``LoadSweepResult.to_dict()``): one row per load."""
    load = doc["load"]
    title = (
        f"{doc['model']} on {doc['gpu']} ({doc['engine']}, {doc['weights']}): "
        f"{doc['input']} in / {doc['output']} out, load by load"
    )
    table = Table()
    columns = {
        load: ("C" if load == "concurrency" else "req/s", "{:g}"),
        "ttft_ms": ("TTFT ms", "{:,.0f}"),
        "ttft_ms_p99": ("TTFT p99", "{:,.0f}"),
        "tpot_ms": ("TPOT ms", "{:.1f}"),
        "tpot_ms_p99": ("TPOT p99", "{:.1f}"),
        "output_tokens_per_s": ("tok/s", "{:,.0f}"),
        "output_tokens_per_s_per_gpu": ("tok/s/GPU", "{:,.0f}"),
        "kv_cache_occupancy": ("KV used", "{:.0%}"),
    }
    for name, _ in columns.values():
        table.add_column(name, justify="right")
    for row in doc["points"]:
        table.add_row(*(fmt.format(row[key]) for key, (_, fmt) in columns.items()))
    _print_titled(console, title, table)
    _print_band(console, doc.get("uncertainty") or {})
    console.print(f"verdict: {doc['verdict']}; TPOT excludes the first token")


def print_search(console: Console, doc: Mapping[str, Any]) -> None:
    """The SLO search's document (``SearchResult.to_dict()``): the best deployments, priced as
    ``infer --request-rate`` prices them (Poisson arrivals at the rate shown; in flight: the
    mean number of requests in flight at that rate)."""
    title = f"{doc['model']} on up to {doc['gpus']} x {doc['gpu']}: best deployments"
    shown = doc["options"][:RESOLVED_PLACES]
    table = Table()
    # The deployment wraps at its spaces, never inside a pool ("1 x TP8-EP8-DP-attn8"): at 80
    # columns the figures' headers left it ten wide and rich cut every pool to "TP8-EP8-D…".
    widest = max((len(word) for o in shown for word in o["label"].split()), default=10)
    table.add_column("deployment", justify="left", min_width=widest)
    cols = ("GPUs", "req/s", "in\nflight", "TTFT\np99 ms", "TPOT\np99 ms", "goodput\ntok/s/GPU")
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for o in shown:
        table.add_row(
            o["label"],
            str(o["gpus"]),
            f"{o['requests_per_s']:.3g}",
            str(o["mean_requests_in_flight"]),
            f"{o['ttft_ms_p99']:.0f}",
            f"{o['tpot_ms_p99']:.1f}",
            f"{o['goodput_tokens_per_s_per_gpu']:,.0f}",
        )
    _print_titled(console, title, table)
    console.print(doc["explanation"])
