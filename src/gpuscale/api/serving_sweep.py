"""``gpuscale.api.infer_sweep``: one deployment at several loads, the latency-throughput curve.

The curve serving engineers read first (vLLM's and SGLang's benchmark posts, NVIDIA's NIM and
TensorRT-LLM performance pages plot it the same way): each point is one client load, x is the
throughput it buys, y the latency it costs. Past the knee more load adds queueing, not tokens.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuscale.api._arguments import checks_arguments
from gpuscale.api.serving import ServingResult, check_requests, infer
from gpuscale.errors import InputError, require
from gpuscale.specs import ModelSpec

SCHEMA_VERSION = 1
MAX_POINTS = 64
"""A sweep is a curve to read, not a grid search: 64 points is more than any published one."""

_GAIN_AT_KNEE = 0.05
"""The knee: the first load after which doubling-ish steps buy < 5% more throughput. Same
reading as vLLM's and NIM's "throughput saturates" curves; the number only picks a point to name,
every point is reported."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadSweepResult:
    """The same deployment at each load, in the order given (ascending)."""

    load: str
    """``"concurrency"`` (closed loop) or ``"request_rate"`` (open loop, requests/s)."""
    points: tuple[ServingResult, ...]

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for p in self.points:
            option = p.to_dict()["options"][0]
            rows.append({self.load: p.client[self.load], **option})
        return rows

    def to_dict(self) -> dict[str, Any]:
        first = self.points[0].to_dict()
        rows = self.rows()
        knee = _knee(rows)
        return {
            "schema_version": SCHEMA_VERSION,
            "model": first["model"],
            "gpu": first["gpu"],
            "engine": first["engine"],
            "weights": first["weights"],
            "input": first["input"],
            "output": first["output"],
            "deployment": self.points[0].deployment,
            "load": self.load,
            "points": rows,
            "knee": {self.load: knee[self.load], **_summary(knee)},
            "verdict": _verdict(self.load, rows, knee),
            # One band for every load: it is of the deployment's engine, mode, GPU and model.
            "uncertainty": first["uncertainty"],
        }

    def figures(self) -> list[Any]:
        """Latency against throughput per GPU: TPOT and TTFT (mean and p99), each point a load."""
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        doc = self.to_dict()
        rows = doc["points"]
        x = [r["output_tokens_per_s_per_gpu"] for r in rows]
        labels = [f"{self.load.replace('_', ' ')} {r[self.load]:g}" for r in rows]
        fig = make_subplots(
            rows=1, cols=2, subplot_titles=("TPOT (ms) vs throughput", "TTFT (ms) vs throughput")
        )
        for col, metric in enumerate(("tpot_ms", "ttft_ms"), start=1):
            for stat, dash in (("", "solid"), ("_p99", "dot")):
                fig.add_trace(
                    go.Scatter(
                        x=x,
                        y=[r[metric + stat] for r in rows],
                        text=labels,
                        mode="lines+markers",
                        line={"dash": dash},
                        name=f"{metric.split('_')[0].upper()} {'p99' if stat else 'mean'}",
                    ),
                    row=1,
                    col=col,
                )
            fig.update_xaxes(title_text="output tokens/s per GPU", row=1, col=col)
        fig.update_yaxes(type="log", row=1, col=2)
        fig.update_layout(
            title=f"{doc['model']} on {rows[0]['gpus']} x {doc['gpu']}, {doc['engine']}, "
            f"{doc['input']} in / {doc['output']} out: latency against throughput"
        )
        return [fig]


def _knee(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The last point whose throughput still grew by at least 5% over the one before."""
    best = rows[0]
    for prev, cur in itertools.pairwise(rows):
        prev_tps = prev["output_tokens_per_s"]
        if prev_tps > 0 and cur["output_tokens_per_s"] / prev_tps - 1.0 >= _GAIN_AT_KNEE:
            best = cur
    return best


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("ttft_ms", "ttft_ms_p99", "tpot_ms", "output_tokens_per_s_per_gpu", "saturated")
    return {k: row[k] for k in keys}


def _verdict(load: str, rows: list[dict[str, Any]], knee: dict[str, Any]) -> str:
    name = "concurrency" if load == "concurrency" else "request rate"
    last = rows[-1]
    text = (
        f"throughput grows to {knee['output_tokens_per_s_per_gpu']:,.0f} output tok/s per GPU at "
        f"{name} {knee[load]:g} (TTFT {knee['ttft_ms']:.0f} ms, TPOT {knee['tpot_ms']:.1f} ms)"
    )
    if knee["saturated"]:
        text += ", saturated: requests queue for a running slot"
    if last[load] == knee[load]:
        return text + "; it has not levelled off in this range"
    gain = last["output_tokens_per_s"] / max(knee["output_tokens_per_s"], 1e-12) - 1.0
    return text + (
        f"; beyond it, {name} {last[load]:g} buys {gain:+.0%} throughput for TTFT "
        f"{last['ttft_ms']:.0f} ms and TPOT {last['tpot_ms']:.1f} ms"
    )


@checks_arguments
def infer_sweep(
    model: str | ModelSpec,
    *,
    concurrency: Sequence[int] | None = None,
    request_rate: Sequence[float] | None = None,
    **deployment: Any,
) -> LoadSweepResult:
    """:func:`gpuscale.api.infer` at each load of ``concurrency`` (or ``request_rate``), same
    deployment; ``deployment`` takes every other keyword of ``infer``."""
    require(
        (concurrency is None) != (request_rate is None),
        "give exactly one of --concurrency (closed loop) or --request-rate (open loop)",
        field="concurrency",
    )
    load = "concurrency" if concurrency is not None else "request_rate"
    values = list(concurrency if concurrency is not None else request_rate or ())
    require(
        1 <= len(values) <= MAX_POINTS,
        f"--{load.replace('_', '-')} takes 1 to {MAX_POINTS} loads, got {len(values)}",
        field=load,
    )
    if values != sorted(set(values)):
        raise InputError(
            f"--{load.replace('_', '-')} loads must be distinct and ascending, got "
            f"{','.join(f'{v:g}' for v in values)}",
            field=load,
        )
    if concurrency is not None:
        for c in concurrency:  # every load refused before the first is priced (1.5 was 1)
            check_requests(c, "concurrency")
        points = tuple(infer(model, **deployment, concurrency=int(c)) for c in concurrency)
    else:
        points = tuple(infer(model, **deployment, request_rate=float(r)) for r in values)
    return LoadSweepResult(load=load, points=points)
