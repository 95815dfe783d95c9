"""The ``--mem-fraction-static`` InferenceX's SGLang launches state, read by date.

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
branches on it, empty otherwise. Read from a run's engine, GPU, model, precision, date and
deployment only, never from its measured latency."""

from __future__ import annotations

import csv
from pathlib import Path

MEM_FRACTIONS_FILE = "inferencex_mem_fractions.csv"

Fractions = list[dict[str, str]]


def load_fractions(path: Path) -> Fractions:
    with path.open() as f:
        return list(csv.DictReader(f))


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
    note naming the versions read, reason it is unknown). A recipe is found by its ``path``;
    a script by system, engine, model, precision, speculative decoding, TP and the ``day`` the
    run was measured (``from_day`` <= day <= ``to_day``: a boundary day matches both versions).
    Every matching line must give one value; lines that disagree leave it unknown (the
    record's time of day is not stated). (None, "", "") when no line is on file."""
    hits = [
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
    if not hits:
        return None, "", ""
    versions = ", ".join(sorted({f"{s['path']}@{s['commit']}" for s in hits}))
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
