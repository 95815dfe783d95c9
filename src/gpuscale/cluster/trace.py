"""Job traces: CSV import (the Philly trace as Pollux published it loads as it is), CSV export,
and a synthetic generator matching the published statistics of the Philly trace."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import files, shipped_yaml
from gpuscale.cluster.choices import SYNTHETIC as SYNTHETIC
from gpuscale.cluster.spec import MAX_GPUS
from gpuscale.errors import InputError, require

# Bounds a row must lie in: the largest public training clusters hold ~10^5 GPUs (Meta's 24k-GPU
# Llama 3 clusters, xAI's 10^5), so a job of more than 2^20 GPUs is a typo, not a job; a run of
# more than 10^9 s (~32 years) likewise. Both keep the simulator's int64/float sums exact.
MAX_JOB_GPUS = 1 << 20
MAX_JOB_SECONDS = 1e9

# Accepted header names per field (first match wins); the Philly/Pollux names are included.
_COLUMNS: dict[str, tuple[str, ...]] = {
    "job_id": ("job_id", "id", "job", "jobid"),
    "submit": ("submit_s", "submit_time", "submit", "arrival_s", "timestamp", "time"),
    "gpus": ("gpus", "num_gpus", "n_gpus"),
    "work": ("duration_s", "duration", "work_s", "runtime_s", "runtime"),
    "model": ("model", "application", "app"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Trace:
    """Jobs sorted by submit time. ``work_s``: seconds the job runs on a packed allocation of
    the reference node type (its trace duration)."""

    job_id: tuple[str, ...]
    submit_s: np.ndarray
    gpus: np.ndarray
    work_s: np.ndarray
    model: tuple[str, ...]
    """Catalog model id per job; empty when the trace names none."""

    def __len__(self) -> int:
        return int(self.submit_s.shape[0])

    def gpu_seconds(self) -> float:
        return float((self.gpus * self.work_s).sum())


def _pick(header: list[str], field: str) -> str | None:
    low = {h.strip().lower(): h for h in header}
    for name in _COLUMNS[field]:
        if name in low:
            return low[name]
    return None


def _time(value: str, row: int, path: str) -> float:
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise InputError(
                f"--trace {path} row {row}: submit time must be a finite number of seconds, "
                f"got '{value}'",
                field="trace",
            )
        return seconds
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise InputError(
            f"--trace {path} row {row}: submit time '{value}' is neither seconds nor "
            "'YYYY-MM-DD HH:MM:SS'",
            field="trace",
        ) from None


def read_trace(path: str | Path) -> Trace:
    """Read a job CSV. Columns (by header): job id (optional), submit time (seconds or
    ``YYYY-MM-DD HH:MM:SS``), GPUs, duration/work in seconds, model (optional)."""
    # the one file rule: a regular file, size-capped, text (gpuscale.files)
    text = files.read_text(path, label="--trace", field="trace", expected="a job CSV")
    try:
        return _parse_trace(text, path)
    except csv.Error as exc:
        # the csv module's own refusals (a field over its 131,072-character limit, a NUL byte)
        raise InputError(
            f"--trace {path} is not a job CSV ({exc}); accepted: a CSV with a header row",
            field="trace",
        ) from None


def _parse_trace(text: str, path: str | Path) -> Trace:
    with io.StringIO(text, newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        if not header:
            raise InputError(
                f"--trace {path} is empty; accepted: a CSV with a header row", field="trace"
            )
        cols = {f: _pick(header, f) for f in _COLUMNS}
        missing = [f for f in ("submit", "gpus", "work") if cols[f] is None]
        if missing:
            wants = "; ".join(f"{f}: {' or '.join(_COLUMNS[f])}" for f in missing)
            raise InputError(f"--trace {path}: no column for {wants}", field="trace")
        index = {f: header.index(c) for f, c in cols.items() if c is not None}
        ids: list[str] = []
        submit: list[float] = []
        gpus: list[int] = []
        work: list[float] = []
        models: list[str] = []
        for row_no, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            # A row with more fields than the header has columns was read by its first ones,
            # the rest dropped without a word (a stray comma shifts every field after it).
            if len(row) != len(header):
                raise InputError(
                    f"--trace {path} line {reader.line_num}: {len(row)} fields, the header has "
                    f"{len(header)} columns ({', '.join(h.strip() for h in header)}); accepted: "
                    "one field per column",
                    field="trace",
                )
            submit.append(_time(row[index["submit"]], row_no, str(path)))
            try:
                g = float(row[index["gpus"]])
                w = float(row[index["work"]])
            except ValueError:
                raise InputError(
                    f"--trace {path} row {row_no}: GPUs and duration must be numbers, got "
                    f"'{row[index['gpus']]}', '{row[index['work']]}'",
                    field="trace",
                ) from None
            if not (math.isfinite(g) and 1 <= g <= MAX_JOB_GPUS and g == int(g)):
                raise InputError(
                    f"--trace {path} row {row_no}: GPUs must be an integer from 1 to "
                    f"{MAX_JOB_GPUS:,}, got {g:g}",
                    field="trace",
                )
            if not (math.isfinite(w) and 0 < w <= MAX_JOB_SECONDS):
                raise InputError(
                    f"--trace {path} row {row_no}: duration must be > 0 and at most "
                    f"{MAX_JOB_SECONDS:g} seconds, got {w:g}",
                    field="trace",
                )
            gpus.append(int(g))
            work.append(w)
            ids.append(row[index["job_id"]].strip() if "job_id" in index else str(row_no - 1))
            models.append(row[index["model"]].strip().lower() if "model" in index else "")
    require(len(submit) > 0, f"--trace {path} has no jobs", field="trace")
    sub = np.asarray(submit, dtype=float)
    order = np.argsort(sub, kind="stable")
    sub = sub[order] - sub[order[0]]
    # A span past the longest job's bound: submit times of 1e300 s left every duration below
    # float precision there (1e300 + 3600 == 1e300).
    require(
        float(sub[-1]) <= MAX_JOB_SECONDS,
        f"--trace {path}: submit times span {float(sub[-1]):.3g} s; accepted: a span of at most "
        f"{MAX_JOB_SECONDS:g} s (about 31 years)",
        field="trace",
    )
    return Trace(
        job_id=tuple(ids[i] for i in order),
        submit_s=sub,
        gpus=np.asarray(gpus, dtype=np.int64)[order],
        work_s=np.asarray(work, dtype=float)[order],
        model=tuple(models[i] for i in order),
    )


def write_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` as CSV, whole or not at all (gpuscale.files)."""
    with io.StringIO(newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["job_id", "submit_s", "gpus", "duration_s", "model"])
        for i in range(len(trace)):
            w.writerow(
                [
                    trace.job_id[i],
                    f"{trace.submit_s[i]:.3f}",
                    int(trace.gpus[i]),
                    f"{trace.work_s[i]:.3f}",
                    trace.model[i],
                ]
            )
        files.write_text(path, fh.getvalue(), label="-o", field="output")


@cache
def philly_statistics() -> dict[str, Any]:
    """The published Philly statistics the generator matches (``cluster/data/philly.yaml``)."""
    text = resources.files("gpuscale.cluster").joinpath("data").joinpath("philly.yaml").read_text()
    data = shipped_yaml.load(text)
    if not isinstance(data, dict):
        raise RuntimeError("cluster/data/philly.yaml is not a mapping")
    return data


def _burst_sigma(stats: dict[str, Any]) -> float:
    """Log-normal sigma of an hourly rate multiplier B (mean 1) that, with the hour-of-day
    factors d and Poisson counts at rate r, gives the measured CV of hourly counts:
    CV^2 = E[d^2] E[B^2] - 1 + 1/r (law of total variance), E[B^2] = exp(sigma^2)."""
    d = np.asarray(stats["hour_of_day_factor"], dtype=float)
    d = d / d.mean()
    cv = float(stats["hourly_count_cv"])
    eb2 = (cv * cv + 1.0 - 1.0 / float(stats["jobs_per_hour"])) / float((d * d).mean())
    return math.sqrt(math.log(max(eb2, 1.0)))


MAX_LOAD_GPUS = MAX_GPUS
"""Most busy GPUs a synthetic trace may offer: the most a cluster file holds; 10^9 asked numpy
for 33 GiB."""


def synthetic_philly(jobs: int, *, seed: int = 0, load_gpus: float | None = None) -> Trace:
    """A Philly-like trace of ``jobs`` jobs.

    GPU counts follow the trace's shares; durations follow its per-size percentiles
    (log-linear between them, so the heavy tail up to weeks is kept); arrivals are Poisson within
    each hour at the trace's mean rate times its hour-of-day factor times a log-normal burst
    factor sized to the trace's hourly-count CV. ``load_gpus``: scale the arrival rate so the
    offered load is that many busy GPUs on average (the trace itself offers about 374)."""
    require(jobs >= 1, f"--jobs must be >= 1, got {jobs}", field="jobs")
    require(
        load_gpus is None or 0 < load_gpus <= MAX_LOAD_GPUS,
        f"--load-gpus must be > 0 and at most {MAX_LOAD_GPUS:,} (a cluster file's GPUs), "
        f"got {load_gpus}",
        field="load_gpus",
    )
    stats = philly_statistics()
    rng = np.random.default_rng(seed)
    share = stats["gpu_share"]
    sizes = np.array([int(k) for k in share], dtype=np.int64)
    p = np.array([float(v) for v in share.values()])
    gpus = rng.choice(sizes, size=jobs, p=p / p.sum())

    pct = np.asarray(stats["duration_percentiles"], dtype=float)
    table = stats["duration_s"]
    work = np.empty(jobs)
    u = rng.uniform(0.0, 100.0, size=jobs)
    for key, values in table.items():
        mask = (gpus >= 12) if str(key) == ">=12" else (gpus == int(key))
        logq = np.log(np.asarray(values, dtype=float))
        work[mask] = np.exp(np.interp(u[mask], pct, logq))

    rate = float(stats["jobs_per_hour"])
    if load_gpus is not None:
        rate = load_gpus * 3600.0 / float(stats["targets"]["mean_gpu_seconds_per_job"])
    diurnal = np.asarray(stats["hour_of_day_factor"], dtype=float)
    diurnal = diurnal / diurnal.mean()
    sigma = _burst_sigma(stats)
    hours = int(jobs / rate * 2.0) + 48
    counts = np.zeros(0, dtype=np.int64)
    while counts.sum() < jobs:
        h = np.arange(counts.shape[0], counts.shape[0] + hours)
        burst = rng.lognormal(-sigma * sigma / 2.0, sigma, size=hours)
        counts = np.concatenate([counts, rng.poisson(rate * diurnal[h % 24] * burst)])
    # the hour of each of the first ``jobs`` arrivals, without materialising every arrival drawn
    # (at a large --load-gpus the hours drawn hold far more than ``jobs``)
    hour_of_job = np.searchsorted(np.cumsum(counts), np.arange(jobs), side="right")
    submit = np.sort(hour_of_job * 3600.0 + rng.uniform(0.0, 3600.0, size=jobs))
    submit -= submit[0]
    return Trace(
        job_id=tuple(f"s{i}" for i in range(jobs)),
        submit_s=submit,
        gpus=gpus,
        work_s=work,
        model=("",) * jobs,
    )


def trace_statistics(trace: Trace) -> dict[str, float]:
    """The statistics :func:`synthetic_philly` matches, measured on ``trace``."""
    gpu_time = trace.gpus * trace.work_s
    hours = np.bincount((trace.submit_s // 3600).astype(np.int64))
    return {
        "jobs": float(len(trace)),
        "one_gpu_job_share": float((trace.gpus == 1).mean()),
        "median_duration_s": float(np.median(trace.work_s)),
        "p90_duration_s": float(np.percentile(trace.work_s, 90)),
        "gpu_time_share_8_or_more": float(gpu_time[trace.gpus >= 8].sum() / gpu_time.sum()),
        "mean_gpu_seconds_per_job": float(gpu_time.mean()),
        "hourly_count_cv": float(hours.std() / hours.mean()),
    }
