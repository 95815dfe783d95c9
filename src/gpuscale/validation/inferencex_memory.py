"""The ``--mem-fraction-static`` and ``--kv-cache-dtype`` InferenceX's SGLang launches state,
read by date.

SGLang's own default fraction (``catalog.serving_engines.sglang_mem_fraction_static``) applies
only where a launch leaves the flag out. InferenceX's DeepSeek-R1 launches state it:

- the single-node scripts (``benchmarks/dsr1_*.sh``, from 2026-02-19 ``benchmarks/single_node/``;
  until 2026-01-22 a ``_slurm.sh`` and a ``_docker.sh`` copy per runner): B200 FP8 0.82
  (from #411, 1d29967c4, 2026-01-13: 0.82 at TP 8, 0.95 at TP 4), B200/B300 FP4 0.85, B200/B300
  FP8 MTP 0.82, H200 FP8 0.82, MI300X/MI325X/MI355X 0.8;
- the MI355X MoRI-SGLang disaggregated launches from 8d81e0bf4 (2026-02-19, #666):
  ``benchmarks/multi_node/amd_utils/models.yaml`` ``mem_fraction_static`` 0.8 prefill, 0.85
  decode (``server.sh`` passes them as ``--mem-fraction-static``; the same values are its
  defaults);
- the H100/H200 Dynamo-SGLang srt-slurm recipes of ``inferencex_disagg_recipes.csv``, per
  recipe and stage.

``inferencex_mem_fractions.csv`` holds one line per script or recipe version (path, commit,
repository) and stage, with the days it was in force (SOURCES.md). A line's ``spec`` is the
script's (``mtp`` for the ``_mtp`` scripts) or ``any``; ``tp`` the TP branch of a script that
branches on it, empty otherwise. ``kv_cache_dtype`` is, for the single-node (``agg``) script
lines only, the ``--kv-cache-dtype`` that version passes to ``sglang.launch_server``, ``auto``
where it passes none: B200/B300 ``fp8_e4m3`` in every version; H200 ``auto``; MI300X ``auto``
until ``dsr1_fp8_mi300x.sh`` 32772c579 (2026-01-23) and MI325X until e9b6e0fde (2026-01-23),
``fp8_e4m3`` from then; MI355X FP4 ``fp8_e4m3`` from 332fec529 (2025-12-17; only the
``_docker.sh`` copy until 6d7145d0b, 2025-12-19), MI355X FP8 from 9d39c92ee (2026-03-05). The
disaggregated recipe lines leave it empty (not read). Read from a run's engine, GPU, model,
precision, date and deployment only, never from its measured latency."""

from __future__ import annotations

import csv
from pathlib import Path

MEM_FRACTIONS_FILE = "inferencex_mem_fractions.csv"

Fractions = list[dict[str, str]]


def load_fractions(path: Path) -> Fractions:
    with path.open() as f:
        return list(csv.DictReader(f))


def _in_force(
    table: Fractions,
    *,
    system: str,
    backend: str,
    stage: str,
    day: str,
    model: str = "",
    precision: str = "",
    spec: str = "none",
    tp: int | None = None,
    path: str = "",
) -> Fractions:
    """The lines of ``table`` in force for a launch: a recipe by its ``path``; a script by
    system, engine, model, precision, speculative decoding (the script's or ``any``), TP (the
    branch, or every TP where ``tp`` is empty) and the ``day`` the run was measured
    (``from_day`` <= day <= ``to_day``: a boundary day matches both versions)."""
    return [
        s
        for s in table
        if (s["system"], s["backend"], s["stage"]) == (system, backend, stage)
        and s["from_day"] <= day <= s["to_day"]
        and (
            s["path"] == path
            if path
            else (
                (s["model"], s["precision"]) == (model, precision)
                and s["spec"] in (spec, "any")
                and (not s["tp"] or tp == int(s["tp"]))
            )
        )
    ]


def _versions(lines: Fractions) -> str:
    return ", ".join(sorted({f"{s['path']}@{s['commit']}" for s in lines}))


def stated_fraction(
    table: Fractions,
    *,
    system: str,
    backend: str,
    stage: str,
    day: str,
    model: str = "",
    precision: str = "",
    spec: str = "none",
    tp: int | None = None,
    path: str = "",
) -> tuple[float | None, str, str]:
    """The fraction a launch stated for ``stage`` (``agg``, ``prefill`` or ``decode``): (value,
    note naming the versions read, reason it is unknown), from the lines in force
    (:func:`_in_force`). Every such line must give one value; lines that disagree leave it
    unknown (the record's time of day is not stated). (None, "", "") when no line is on file."""
    hits = _in_force(
        table,
        system=system,
        backend=backend,
        stage=stage,
        day=day,
        model=model,
        precision=precision,
        spec=spec,
        tp=tp,
        path=path,
    )
    if not hits:
        return None, "", ""
    versions = _versions(hits)
    values = {float(s["mem_fraction_static"]) for s in hits}
    if len(values) != 1:
        return (
            None,
            "",
            f"not expressible: the launches in force on {day} ({versions}) state different "
            f"--mem-fraction-static ({sorted(values)})",
        )
    (value,) = values
    return value, f"--mem-fraction-static {value:g} ({stage}; {versions})", ""


SGLANG_KV_CACHE_DTYPES = {"auto": "auto", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
"""SGLang ``--kv-cache-dtype`` values (``auto``: the model's data type; ``fp8_e5m2``,
``fp8_e4m3``: SGLang's server arguments) as the ``kv_dtype`` the API accepts
(``catalog.serving_engines.kv_cache_dtype``: ``auto`` or one of the engine's ``kv_dtypes``, read
as storage widths: both FP8 formats store one byte per element). ``auto`` keeps the engine's own
rule (the checkpoint's declared KV quantization, else the model dtype). Any other value (the
InferenceX DeepSeek-R1 scripts state none) is not modelled."""


def stated_kv_cache(
    table: Fractions,
    *,
    system: str,
    backend: str,
    day: str,
    model: str,
    precision: str,
    spec: str = "none",
    tp: int | None = None,
) -> tuple[str | None, str, str]:
    """The KV-cache dtype an aggregated single-node launch stated, as the API's ``kv_dtype``
    (:data:`SGLANG_KV_CACHE_DTYPES`; ``auto`` where the script passes no ``--kv-cache-dtype``):
    (value, note naming the versions read, reason it is unknown), from the ``agg`` lines in
    force (:func:`_in_force`) whose ``kv_cache_dtype`` was read. Lines that disagree, or a
    value the model does not express, leave it unknown. (None, "", "") when no line is on
    file."""
    hits = [
        s
        for s in _in_force(
            table,
            system=system,
            backend=backend,
            stage="agg",
            day=day,
            model=model,
            precision=precision,
            spec=spec,
            tp=tp,
        )
        if s.get("kv_cache_dtype")
    ]
    if not hits:
        return None, "", ""
    versions = _versions(hits)
    stated = sorted({s["kv_cache_dtype"] for s in hits})
    if unknown := [v for v in stated if v not in SGLANG_KV_CACHE_DTYPES]:
        return (
            None,
            "",
            f"not expressible: --kv-cache-dtype {', '.join(unknown)} ({versions}) is not modelled",
        )
    values = {SGLANG_KV_CACHE_DTYPES[v] for v in stated}
    if len(values) != 1:
        return (
            None,
            "",
            f"not expressible: the launches in force on {day} ({versions}) state different "
            f"--kv-cache-dtype ({', '.join(stated)})",
        )
    (value,) = values
    return value, f"--kv-cache-dtype {'/'.join(stated)} ({versions})", ""
