"""The page's answers: API calls for one query, the figures, the report and the exports.

Everything here goes through :mod:`gpuscale.api` and :mod:`gpuscale.report`; the page decides
nothing the CLI would not.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass, replace
from typing import Any

from gpuscale.api.export import TARGETS, ExportResult, export_plan
from gpuscale.api.fitting import FitResult, fit
from gpuscale.api.planning import PlanResult, ScaleResult
from gpuscale.api.planning import plan as api_plan
from gpuscale.api.planning import scale as api_scale
from gpuscale.api.serving import ServingResult
from gpuscale.api.serving_search import SearchResult, search
from gpuscale.api.serving_sweep import LoadSweepResult, infer_sweep
from gpuscale.errors import InputError
from gpuscale.report.html import Section, render, result_sections
from gpuscale.report.serving import band_lines
from gpuscale.specs import ModelSpec
from gpuscale.web.forms import ServingQuery, TrainingQuery, message

PLAN_COLUMNS: dict[str, str] = {
    "description": "plan",
    "memory_per_gpu_gib": "memory/GPU (GiB)",
    "step_time_s": "step (s)",
    "tokens_per_s": "tokens/s",
    "mfu": "MFU",
    "time_to_train_days": "days",
    "bottleneck": "bottleneck",
}
"""Columns of the top-plans table: ``plan --json`` keys -> headings."""


def _rows(options: list[dict[str, Any]], columns: dict[str, str]) -> list[dict[str, Any]]:
    return [{title: o.get(key) for key, title in columns.items()} for o in options]


def _titled(prefix: str, sections: list[Section]) -> list[Section]:
    return [replace(s, title=f"{prefix}: {s.title}") for s in sections]


@dataclass(frozen=True, slots=True)
class Download:
    """One export of the chosen plan: its files, or why the target refuses the plan."""

    target: str
    result: ExportResult | None
    refused: str = ""

    def payload(self) -> tuple[str, bytes, str]:
        """(file name, bytes, MIME type): the file itself, or a zip when there are several."""
        assert self.result is not None
        files = self.result.export.files
        if len(files) == 1:
            return files[0].name, files[0].content.encode(), "text/plain; charset=utf-8"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for item in files:
                info = zipfile.ZipInfo(f"gpuscale-{self.target}/{item.name}")
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = (0o755 if item.executable else 0o644) << 16
                archive.writestr(info, item.content)
        return f"gpuscale-{self.target}.zip", buffer.getvalue(), "application/zip"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingAnswer:
    query: TrainingQuery
    fit: FitResult
    plan: PlanResult | None
    scale: ScaleResult | None
    refused: str
    """Why no plan fits the GPUs asked for (empty when one does)."""
    spec: str | ModelSpec
    """What the API was given as the model (catalog id or the pasted spec)."""

    @property
    def verdict(self) -> str:
        if self.plan is None:
            return self.refused
        v = self.plan.to_dict()["verdict"]
        return f"{v['choice']}: {v['reason']}" if v else ""

    @property
    def top_plans(self) -> list[dict[str, Any]]:
        return _rows(self.plan.to_dict()["plans"], PLAN_COLUMNS) if self.plan else []

    def figures(self) -> list[tuple[str, Any]]:
        out = [("Memory per GPU", f) for f in self.fit.figures()]
        if self.plan is not None:
            out += [("Top plans", f) for f in self.plan.figures()]
        if self.scale is not None:
            out += [("Scale curve", f) for f in self.scale.figures()]
        return out

    def downloads(self) -> list[Download]:
        return [self.download(t) for t in TARGETS] if self.plan is not None else []

    def download(self, target: str) -> Download:
        if self.plan is None:
            return Download(target, None, self.refused)
        model = None if isinstance(self.spec, str) else self.spec
        try:
            return Download(target, export_plan(self.plan.to_dict(), to=target, model=model))
        except InputError as exc:
            return Download(target, None, message(exc))

    def report_html(self) -> str:
        q = self.query
        title = f"gpuscale: {q.model.title} on {q.gpus} x {q.gpu} over {q.inter}"
        sections = _titled("Fit", result_sections(self.fit.verdict, self.fit.to_dict(), []))
        sections[0].figures = list(self.fit.figures())
        if self.plan is not None:
            sections += _titled(
                "Plan", result_sections(self.verdict, self.plan.to_dict(), self.plan.figures())
            )
        else:
            sections.append(Section(title="Plan", text=self.refused))
        if self.scale is not None:
            answer = self.scale.to_dict()["verdict"]["reason"]
            sections += _titled(
                "Scale", result_sections(answer, self.scale.to_dict(), self.scale.figures())
            )
        return render(title, sections)


def training_answer(q: TrainingQuery) -> TrainingAnswer:
    """Fit on one GPU, the top plans on ``q.gpus`` GPUs and the scale curve up to them."""
    spec = q.model.arg()
    memory = fit(spec, gpu=q.gpu, seq=q.seq)
    try:
        ranked: PlanResult | None = api_plan(spec, gpu=q.gpu, inter=q.inter, seq=q.seq, gpus=q.gpus)
        curve: ScaleResult | None = api_scale(
            spec, gpu=q.gpu, inter=q.inter, seq=q.seq, max_gpus=q.gpus
        )
        refused = ""
    except InputError as exc:
        # the GPUs asked for hold no plan: the fit verdict and its memory still answer
        ranked, curve, refused = None, None, message(exc)
    return TrainingAnswer(query=q, fit=memory, plan=ranked, scale=curve, refused=refused, spec=spec)


SEARCH_COLUMNS: dict[str, str] = {
    "label": "deployment",
    "mode": "mode",
    "gpus": "GPUs",
    # Priced under Poisson arrivals (``planner.serving.search.price``): the rate and the mean
    # number in flight, as the CLI's table (``report.serving.print_search``).
    "requests_per_s": "req/s",
    "mean_requests_in_flight": "in flight",
    "ttft_ms_p99": "TTFT p99 (ms)",
    "tpot_ms_p99": "TPOT p99 (ms)",
    "goodput_tokens_per_s_per_gpu": "goodput tok/s/GPU",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingAnswer:
    query: ServingQuery
    load: ServingResult
    sweep: LoadSweepResult
    best: SearchResult

    @property
    def verdict(self) -> str:
        return str(self.load.to_dict().get("verdict", ""))

    @property
    def band(self) -> list[str]:
        """The load's error band in the CLI's words (report.serving.band_lines)."""
        return band_lines(self.load.to_dict().get("uncertainty") or {})

    @property
    def deployments(self) -> list[dict[str, Any]]:
        return _rows(self.best.to_dict()["options"][:5], SEARCH_COLUMNS)

    def figures(self) -> list[tuple[str, Any]]:
        return [("Latency and throughput", f) for f in self.load.figures()] + [
            ("Latency against throughput, load by load", f) for f in self.sweep.figures()
        ]

    def report_html(self) -> str:
        q = self.query
        title = f"gpuscale: serving {q.model.title} on {q.gpu}"
        sections = _titled(
            "Load", result_sections(self.verdict, self.load.to_dict(), self.load.figures())
        )
        sweep = self.sweep.to_dict()
        sections += _titled(
            "Load sweep", result_sections(sweep["verdict"], sweep, self.sweep.figures())
        )
        sections += _titled(
            "Best deployment", result_sections(self.best.explanation(), self.best.to_dict(), [])
        )
        return render(title, sections)


def serving_answer(q: ServingQuery) -> ServingAnswer:
    """Latency and throughput at ``q.concurrency`` on TP ``q.tp``, and the deployment on
    ``q.gpus`` GPUs with the most goodput under the SLO."""
    spec = q.model.arg()

    # The curve around the asked load: powers of 4 up to 4x past it (vLLM's and NIM's plots);
    # the asked load is one of its points, priced once.
    loads = sorted({*(4**i for i in range(6) if 4**i <= 4 * q.concurrency), q.concurrency})
    sweep = infer_sweep(
        spec,
        concurrency=loads,
        gpu=q.gpu,
        tp=q.tp,
        input_len=q.input_len,
        output_len=q.output_len,
    )
    load = sweep.points[loads.index(q.concurrency)]
    best = search(
        spec,
        gpu=q.gpu,
        gpus=q.gpus,
        input_len=q.input_len,
        output_len=q.output_len,
        slo_ttft_ms=q.slo_ttft_ms,
        slo_tpot_ms=q.slo_tpot_ms,
    )
    return ServingAnswer(query=q, load=load, sweep=sweep, best=best)
