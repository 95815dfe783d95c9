"""The measurement side of the API: fit a calibration profile from measurements, import
nccl-tests logs, analyze profiler traces. Torch-free: these read files; benchmarks that run
torch are ``gpuscale bench`` / ``gpuscale calibrate`` without ``--from``.

>>> import gpuscale.api as gs
>>> cal = gs.import_nccl_tests(["all_reduce.log"], output="measured.yaml")  # doctest: +SKIP
>>> cal.to_dict()["fits"]["inter"]["bandwidth_gb_per_s"]  # doctest: +SKIP
>>> gs.analyze_trace(["traces/"]).to_dict()["trace"]["diagnoses"]  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuscale import files
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.costmodel.collectives import OPS
from gpuscale.costmodel.profile import profile_names
from gpuscale.errors import PLAIN_DIGITS, InputError, closest, parse_float, parse_int, require
from gpuscale.measure.bench_run import reporting_rank
from gpuscale.measure.bench_setup import CPU_SIZES, GPU_SIZES
from gpuscale.measure.doctor import Report as DoctorReport
from gpuscale.measure.launcher import RankFailure
from gpuscale.measure.nccl_tests import NcclTestsRun, parse_files
from gpuscale.measure.profile_fit import ProfileFit, distinct_files, fit_profile, topology
from gpuscale.measure.results import CollectiveRun, GemmRun
from gpuscale.measure.sources import Measurements, load
from gpuscale.measure.stats import JITTER_CV_LIMIT
from gpuscale.measure.trace import (
    Prediction,
    TraceReport,
    analyze,
    load_prediction,
    prediction_from_document,
)
from gpuscale.measure.trace.analysis import ProgressFn

PathArg = str | Path

COLLECTIVE_OPS = OPS
"""The collectives ``bench_collectives`` times, in nccl-tests' order."""
__all__ = [
    "COLLECTIVE_OPS",
    "CPU_SIZES",
    "GPU_SIZES",
    "CalibrationResult",
    "CollectivesResult",
    "DoctorResult",
    "MatmulResult",
    "RankFailure",
    "TraceResult",
    "analyze_trace",
    "bench_collectives",
    "bench_matmul",
    "calibrate",
    "calibrate_runs",
    "doctor",
    "import_nccl_tests",
    "profile_names",
    "reporting_rank",
]


def _quiet(done: int, total: int) -> None:
    del done, total


def _ignore(message: str) -> None:
    del message


# ------------------------------------------------------------------------------ calibration


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationResult:
    """A fitted calibration profile: ``to_dict()`` is ``gpuscale calibrate --from ... --json``
    (and ``gpuscale import nccl-tests ... --json``)."""

    fit: ProfileFit
    runs: tuple[NcclTestsRun, ...] = ()
    """The nccl-tests runs read (import_nccl_tests only)."""
    title: str = "gpuscale calibrate"

    def to_dict(self) -> dict[str, Any]:
        cal = self.fit.calibration
        return document(
            {
                "profile": self.fit.profile,
                "written": str(self.fit.written) if self.fit.written else None,
                "fits": {lv: asdict(f) for lv, f in cal.links.items()},
                "gemm": asdict(cal.gemm) if cal.gemm else None,
                "comparisons": [{**asdict(c), "rel_error": c.rel_error} for c in cal.comparisons],
                "notes": [*cal.skipped, *self.fit.notes],
                "warnings": list(self.fit.warnings),
            }
        )

    def figures(self) -> list[Any]:
        from gpuscale.report.measure import calibration_figures

        return calibration_figures(self.fit.calibration)

    def write_html(self, path: PathArg) -> Path:
        """The HTML report (predicted-vs-measured plots, the fit, notes)."""
        from gpuscale.report.html import write_report
        from gpuscale.report.measure import calibration_sections

        notes = list(self.fit.notes)
        return write_report(path, self.title, calibration_sections(self.fit.calibration, notes))


def check_outputs(
    *, output: PathArg | None = None, html: PathArg | None = None, name: str = "measured"
) -> None:
    """Everything about where results go, checked before any measurement is read or run."""
    require(
        bool(name.strip()) and name == name.strip(),
        f"--name {name!r} is empty or padded; accepted: a non-empty name such as 'my-cluster'",
        field="name",
    )
    # "" is a path a user typed (-o "$UNSET"), refused as one: it would otherwise read as no
    # output at all and exit 0 with nothing written.
    if output is not None:
        files.output_path(output, label="-o", field="output")
    if html is not None:
        files.output_path(html, label="--html", field="html")


def check_calibration_inputs(
    *,
    output: PathArg | None = None,
    html: PathArg | None = None,
    name: str = "measured",
    base: str = "generic",
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    shapes: str | None = None,
) -> str | None:
    """Everything a calibration is told, checked before any measurement is read or run (a
    sweep of minutes must not end in a typo); returns the catalog id of ``gpu``."""
    from gpuscale import catalog
    from gpuscale.costmodel.profile import load_profile

    check_outputs(output=output, html=html, name=name)
    topology(None, gpus_per_node, nics_per_node)
    load_profile(base)
    if shapes is not None:
        from gpuscale.measure.matmul_bench import parse_shapes

        parse_shapes(shapes)
    return catalog.gpu(gpu).id if gpu else None


@checks_arguments
def calibrate(
    sources: Sequence[PathArg],
    *,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    output: PathArg | None = None,
    name: str = "measured",
    base: str = "generic",
    html: PathArg | None = None,
) -> CalibrationResult:
    """Fit a calibration profile (per-level latency and bandwidth, GEMM efficiency curve) to
    measurements read from ``sources``: ``gpuscale bench --json`` files or nccl-tests logs.
    ``output``: write the profile YAML there; ``html``: the report."""
    gpu = check_calibration_inputs(
        output=output,
        html=html,
        name=name,
        base=base,
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
    )
    names = tuple(str(s) for s in sources)
    require(bool(names), "no measurements given; pass --from FILE (repeatable)", field="sources")
    distinct_files(names, "--from")
    return calibrate_measurements(
        load(names),
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        output=output,
        name=name,
        base=base,
        html=html,
    )


def calibrate_measurements(
    m: Measurements,
    *,
    gpu: str | None = None,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    output: PathArg | None = None,
    name: str = "measured",
    base: str = "generic",
    html: PathArg | None = None,
    notes: Sequence[str] | None = None,
    runs: Sequence[NcclTestsRun] = (),
    how: str = "gpuscale calibrate",
    title: str | None = None,
) -> CalibrationResult:
    """:func:`calibrate` on measurements in memory (a benchmark just run, parsed logs)."""
    fit = fit_profile(
        m,
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        name=name,
        base=base,
        output=output,
        notes=notes,
        how=how,
    )
    result = CalibrationResult(
        fit=fit, runs=tuple(runs), title=title or f"gpuscale calibrate: {name}"
    )
    if html is not None:  # "" was refused by check_outputs
        result.write_html(html)
    return result


def calibrate_runs(
    collectives: Sequence[CollectivesResult] = (),
    matmuls: Sequence[MatmulResult] = (),
    **kwargs: Any,
) -> CalibrationResult:
    """:func:`calibrate` on benchmark results just run (``bench_collectives``,
    ``bench_matmul``); keyword arguments as :func:`calibrate_measurements`."""
    m = Measurements(collectives=[c.run for c in collectives], gemm=[g.run for g in matmuls])
    return calibrate_measurements(m, **kwargs)


@checks_arguments
def import_nccl_tests(
    logs: Sequence[PathArg],
    *,
    op: str | None = None,
    in_place: bool = False,
    gpus_per_node: int | None = None,
    nics_per_node: int | None = None,
    output: PathArg | None = None,
    name: str = "measured",
    base: str = "generic",
    html: PathArg | None = None,
) -> CalibrationResult:
    """Parse nccl-tests text logs (any version, mpirun --tag-output too) or -J JSON reports and
    fit the same profile as :func:`calibrate`. A single-node log gives the 'intra' level, a
    multi-node one 'inter'; ``in_place`` fits the in-place columns."""
    check_calibration_inputs(
        output=output,
        html=html,
        name=name,
        base=base,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
    )
    names = tuple(str(p) for p in logs)
    # positional on the command line: no field, so the CLI puts no flag in front
    require(bool(names), "no nccl-tests logs given")
    distinct_files(names, "log")
    runs = parse_files(names, op)
    usable = [r for r in runs if r.samples(in_place=in_place)]
    if not usable:
        reasons = "; ".join(w for r in runs for w in r.warnings()) or "no data rows"
        raise InputError(f"nothing to calibrate: {reasons}")
    notes = [w for r in runs for w in r.warnings()]
    for r in usable:
        notes.append(
            f"{r.path}:{r.line}: {r.nodes} node(s) of {r.ranks_per_node} ranks -> '{r.level}' level"
        )
    m = Measurements(nccl=usable, in_place=in_place)
    return calibrate_measurements(
        m,
        gpus_per_node=gpus_per_node,
        nics_per_node=nics_per_node,
        output=output,
        name=name,
        base=base,
        html=html,
        notes=notes,
        runs=runs,
        how="gpuscale import nccl-tests",
        title=f"gpuscale import nccl-tests: {name}",
    )


# ------------------------------------------------------------------------------------ trace


@dataclass(frozen=True, kw_only=True, slots=True)
class TraceResult:
    """``to_dict()`` is ``gpuscale trace analyze ... --json``."""

    report: TraceReport
    html: str | None = None
    """Where the HTML report was written, if it was."""

    def to_dict(self) -> dict[str, Any]:
        doc = self.report.to_dict()
        if self.html:
            doc["html"] = self.html
        return document({"trace": doc})

    def figures(self) -> list[Any]:
        from gpuscale.report.trace import trace_figures

        return trace_figures(self.report)

    def write_html(self, path: PathArg) -> Path:
        from gpuscale.report.html import write_report
        from gpuscale.report.trace import trace_sections

        return write_report(path, "gpuscale trace analyze", trace_sections(self.report))


_INLINE_EXAMPLE = "model=llama3.1-8b,gpu=h100-sxm,gpus=8,tp=2,dp=4"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _converted(key: str, value: str, annotation: str) -> Any:
    """``value`` as the estimate argument's type (read from its annotation)."""
    kinds = annotation.replace(" ", "").split("|")
    if "bool" in kinds:
        truth = value.lower()
        if truth not in _TRUE + _FALSE:
            raise InputError(
                f"--predict-with {key}={value!r} is not true or false; accepted: {key}=true or "
                f"{key}=false",
                field="predict_with",
            )
        return truth in _TRUE
    parsers: tuple[tuple[str, Callable[[str], float], str], ...] = (
        ("int", parse_int, "an integer"),
        ("float", parse_float, "a number"),
    )
    for name, parse, noun in parsers:
        if name in kinds:
            try:
                number = parse(value)
            except InputError:
                raise InputError(
                    f"--predict-with {key}={value!r}: not {noun}; accepted: {noun} "
                    f"({PLAIN_DIGITS})",
                    field="predict_with",
                ) from None
            if isinstance(number, float) and not math.isfinite(number):
                raise InputError(
                    f"--predict-with {key}={value!r}: not a finite number", field="predict_with"
                )
            return number
    return value


def inline_prediction(text: str) -> Prediction:
    """``model=llama3.1-8b,gpu=h100-sxm,gpus=8,tp=2`` -> the step ``gpuscale.estimate``
    predicts for that plan (keys are estimate's arguments, dashes or underscores)."""
    import gpuscale.api as api

    estimate = getattr(api, "estimate", None)
    if estimate is None:
        raise InputError(
            "an inline plan needs gpuscale.estimate, which this build lacks; pass the JSON "
            "file of `gpuscale estimate ... --json` instead",
            field="predict_with",
        )
    params = {
        name: str(p.annotation)
        for name, p in inspect.signature(estimate).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    given: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        raw, sep, value = (s.strip() for s in item.partition("="))
        key = raw.replace("-", "_")
        if not sep or not value:
            raise InputError(
                f"--predict-with: '{item}' is not key=value; write e.g. {_INLINE_EXAMPLE}",
                field="predict_with",
            )
        if key in given:
            raise InputError(
                f"--predict-with: {raw} is given twice ({raw}={given[key]} and {raw}={value}); "
                "give each key once",
                field="predict_with",
            )
        if key != "model" and key not in params:
            accepted = sorted(k.replace("_", "-") for k in params)
            near = closest(raw, ["model", *accepted])
            hint = (
                f"did you mean {', '.join(near)}?"
                if near
                else f"accepted: model, {', '.join(accepted)}"
            )
            raise InputError(f"--predict-with: unknown key '{raw}'; {hint}", field="predict_with")
        given[key], spelled[key] = value, raw
    model = given.pop("model", None)
    if model is None:
        raise InputError(
            "--predict-with: an inline plan needs model=NAME (catalog id or config.json path); "
            f"e.g. {_INLINE_EXAMPLE}",
            field="predict_with",
        )
    signature = inspect.signature(estimate).parameters
    for name, p in signature.items():
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is p.empty and name not in given:
            raise InputError(
                f"--predict-with: the plan lacks {name.replace('_', '-')}= (gpuscale.estimate "
                f"needs {name}); e.g. {_INLINE_EXAMPLE}",
                field="predict_with",
            )
    kwargs = {k: _converted(spelled[k], v, params[k]) for k, v in given.items()}
    try:
        result = estimate(model, **kwargs)
    except InputError as exc:
        raise InputError(f"--predict-with: {exc}", field="predict_with") from None
    except TypeError as exc:  # a required argument left out
        raise InputError(
            f"--predict-with: {exc}; e.g. {_INLINE_EXAMPLE}", field="predict_with"
        ) from None
    label = f"estimate {model} " + " ".join(f"{k}={v}" for k, v in given.items())
    return prediction_from_document(result.to_dict(), label.strip())


def prediction(plan: PathArg | None) -> Prediction | None:
    """A ``gpuscale estimate --json`` file, or an inline plan (:func:`inline_prediction`)."""
    if plan is None:
        return None
    if isinstance(plan, Path) or files.exists(plan):
        return load_prediction(Path(plan))
    if "=" in str(plan):
        return inline_prediction(str(plan))
    raise InputError(
        f"--predict-with: '{files.shown(plan)}' is neither a file nor key=value pairs; pass "
        "the JSON of `gpuscale estimate ... --json` or model=...,gpu=...,gpus=...",
        field="predict_with",
    )


@checks_arguments
def analyze_trace(
    paths: Sequence[PathArg],
    *,
    predict_with: PathArg | Prediction | None = None,
    html: PathArg | None = None,
    workers: int | None = None,
    progress: ProgressFn | None = None,
) -> TraceResult:
    """Where the step time goes in PyTorch profiler traces (one per rank, or folders of them)
    and why: breakdown per rank, collectives, skew, ranked diagnoses; compared with a
    prediction (an estimate JSON file, an inline plan, or a :class:`Prediction`)."""
    if html is not None:  # "" too: an empty path is refused, not taken as no report
        files.output_path(html, label="--html", field="html")
    if workers is not None:
        require(workers >= 1, f"--workers must be >= 1, got {workers}", field="workers")
    expected = predict_with if isinstance(predict_with, Prediction) else prediction(predict_with)
    report = analyze(list(paths), workers=workers, prediction=expected, progress=progress)
    result = TraceResult(report=report, html=None if html is None else str(html))
    if html is not None:
        result.write_html(html)
    return result


# ------------------------------------------------------------------- benchmarks and doctor


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectivesResult:
    """``to_dict()`` is ``gpuscale bench collectives ... --json``."""

    run: CollectiveRun
    jitter_cv_limit: float = JITTER_CV_LIMIT
    """Coefficient of variation above which a size is flagged as jittery."""

    def rows(self) -> list[dict[str, Any]]:
        """One row per (op, level, size), flagged ``jittery`` past the CV limit."""
        return [{**asdict(s), "jittery": (s.cv or 0.0) > JITTER_CV_LIMIT} for s in self.run.samples]

    def to_dict(self) -> dict[str, Any]:
        return document(
            {**self.run.to_dict(), "samples": self.rows(), "jitter_cv_limit": self.jitter_cv_limit}
        )

    def figures(self) -> list[Any]:
        from gpuscale.report.measure import collectives_figures

        return collectives_figures(self.run)


@dataclass(frozen=True, kw_only=True, slots=True)
class MatmulResult:
    """``to_dict()`` is ``gpuscale bench matmul ... --json``."""

    run: GemmRun
    peak_tflops: float | None
    """The catalog peak the efficiency is against (None: no catalog GPU)."""

    def rows(self) -> list[dict[str, Any]]:
        peak = self.peak_tflops
        return [
            {**asdict(s), "flops": s.flops, "efficiency": s.tflops / peak if peak else None}
            for s in self.run.samples
        ]

    def to_dict(self) -> dict[str, Any]:
        return document(
            {**self.run.to_dict(), "samples": self.rows(), "peak_tflops": self.peak_tflops}
        )

    def figures(self) -> list[Any]:
        from gpuscale.report.measure import matmul_figures

        return matmul_figures(self.run)


@checks_arguments
def bench_collectives(
    *,
    ops: str | Sequence[str] = ",".join(OPS),
    sizes: str | None = None,
    factor: float = 2.0,
    iters: int = 20,
    warmup: int = 5,
    dtype: str = "float32",
    nproc: int | None = None,
    backend: str = "auto",
    group_by_node: bool = False,
    ranks_per_node: int | None = None,
    timeout: float = 120.0,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    command: str = "gpuscale.bench_collectives",
) -> CollectivesResult | None:
    """Time collectives over a size sweep on ranks started here (every GPU with NCCL, else 2
    gloo ranks), with nccl-tests' columns and per-size jitter. Under torchrun, this process is
    one rank: rank 0 gets the result, the others None. Needs torch."""
    from gpuscale.measure.bench_run import run_collectives

    run = run_collectives(
        ops=ops if isinstance(ops, str) else ",".join(ops),
        sizes=sizes,
        factor=factor,
        iters=iters,
        warmup=warmup,
        dtype=dtype,
        nproc=nproc,
        backend=backend,
        group_by_node=group_by_node,
        ranks_per_node=ranks_per_node,
        timeout=timeout,
        command=command,
        progress=progress or _quiet,
        warn=warn or _ignore,
    )
    return None if run is None else CollectivesResult(run=run)


@checks_arguments
def bench_matmul(
    *,
    shapes: str | None = None,
    dtype: str | None = None,
    device: str = "auto",
    iters: int = 10,
    warmup: int = 3,
    gpu: str | None = None,
    progress: ProgressFn | None = None,
    warn: Callable[[str], None] | None = None,
    command: str = "gpuscale.bench_matmul",
) -> MatmulResult:
    """GEMM TFLOP/s over a shape sweep (the cost model's efficiency curve). Needs torch."""
    from gpuscale.measure.bench_run import run_matmul
    from gpuscale.measure.matmul_bench import peak_tflops

    run = run_matmul(
        shapes=shapes,
        dtype=dtype,
        device=device,
        iters=iters,
        warmup=warmup,
        gpu=gpu,
        command=command,
        progress=progress or _quiet,
        warn=warn or _ignore,
    )
    peak = peak_tflops(run.gpu_id, run.samples[0].dtype) if run.gpu_id else None
    return MatmulResult(run=run, peak_tflops=peak)


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorResult:
    """``to_dict()`` is ``gpuscale doctor --json``; ``exit_code`` 1 only when something will
    break training."""

    report: DoctorReport

    @property
    def exit_code(self) -> int:
        return 1 if self.report.verdict == "not ready" else 0

    def to_dict(self) -> dict[str, Any]:
        r = self.report
        return document(
            {
                "verdict": r.verdict,
                "facts": r.facts,
                "findings": r.findings,
                "next_steps": r.next_steps(),
            }
        )

    def figures(self) -> list[Any]:
        return []


@checks_arguments
def doctor(
    *, bench: bool = True, timeout: float = 60.0, on_step: Callable[[str], None] | None = None
) -> DoctorResult:
    """Check torch/CUDA/NCCL, GPUs, NVLink/PCIe, NCCL_* and network settings, and (``bench``)
    run a short all-reduce and matmul."""
    from gpuscale.measure.doctor import diagnose

    require(
        math.isfinite(timeout) and timeout > 0,
        f"--timeout must be a finite number of seconds > 0, got {timeout:g}; accepted: e.g. 60",
        field="timeout",
    )
    return DoctorResult(report=diagnose(benchmarks=bench, timeout_s=timeout, on_step=on_step))
