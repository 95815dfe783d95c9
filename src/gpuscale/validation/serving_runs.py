"""One measurement per run: the records of one deployment with the same TTFT and TPOT (the
exports repeating a run, AIConfigurator's db-dump copy of it, rounded copies) grouped by run
(:func:`same_run`) and counted once (:func:`distinct`), so an error statistic weighs each run
once."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence

from gpuscale.validation.serving_fields import (
    DB_DUMP,
)
from gpuscale.validation.serving_rows import STATED, TWIN, TWIN_RTOL, ServingRow

PROVENANCE = ("id", "silicon_data_source")
"""The columns that say where a row was copied from, not what was measured."""


DB_DUMP_R1 = "dsr1_"
"""AIConfigurator's db-dump writes InferenceX's DeepSeek-R1 runs (ids ``dsr1_...``) as
``deepseek-ai/DeepSeek-V3`` (``INFERENCEX_SOURCES``): the model is R1."""


def served_model(row: ServingRow) -> str:
    """The model the row ran (the dump's DeepSeek-V3 label read as R1, :data:`DB_DUMP_R1`)."""
    if row.raw["silicon_data_source"].startswith(DB_DUMP) and row.id.startswith(DB_DUMP_R1):
        return "deepseek-ai/DeepSeek-R1"
    return row.raw["model_path"]


def deployment_key(row: ServingRow, drop: tuple[str, ...] = ()) -> str:
    """Everything a model is told about an expressible row (its ``gpuscale.api.infer`` keyword
    arguments but ``drop``, the engine version, system, formats and lengths), as one string."""
    r = row.raw
    told = {
        "model": served_model(row),
        "engine_version": r["backend_version"],
        "system": r["system"],
        "precision": (r["precision"], r["gemm_quant_mode"], r["moe_quant_mode"]),
        "mode": r["mode"],
        "lengths": (r["isl"], r["osl"]),
        "kwargs": {k: v for k, v in row.kwargs.items() if k not in drop},
    }
    return json.dumps(told, sort_keys=True, default=str)


def same_measurement(a: ServingRow, b: ServingRow) -> bool:
    """Two records of one deployment with the same TTFT and TPOT (:data:`TWIN_RTOL`; the
    rows' typed figures, as :func:`same_latencies` compares raw columns)."""
    return math.isclose(a.ttft_ms, b.ttft_ms, rel_tol=TWIN_RTOL) and math.isclose(
        a.tpot_ms, b.tpot_ms, rel_tol=TWIN_RTOL
    )


RECORD_RANK = {STATED: 0, TWIN: 1}
"""Of one run's records, the better attested deployment first: a row that names its workers,
then its export twin, then a reading of the configuration (any other class)."""


def record_preference(row: ServingRow) -> tuple[int, bool]:
    """Sort key of one run's records, best first: :data:`RECORD_RANK`, then the publication over
    AIConfigurator's db-dump copy of it (:data:`DB_DUMP`)."""
    return RECORD_RANK.get(row.kind, len(RECORD_RANK)), row.raw["silicon_data_source"].startswith(
        DB_DUMP
    )


def same_run(rows: Sequence[ServingRow]) -> list[list[ServingRow]]:
    """The expressible ``rows`` grouped by run: the records of one deployment
    (:func:`deployment_key`) with the same TTFT and TPOT (:func:`same_measurement`), each group
    best attested first (:func:`record_preference`; ties in the order of ``rows``), the groups in
    the order their first record appears. Rows that are not expressible have no known deployment
    and are left out. The one rule :func:`distinct` and ``serving_noise.runs`` count runs by."""
    found: dict[str, list[list[ServingRow]]] = defaultdict(list)
    for row in rows:
        if not row.expressible:
            continue
        here = found[deployment_key(row)]
        group = next((g for g in here if same_measurement(g[0], row)), None)
        if group is None:
            here.append([row])
        else:
            group.append(row)
    return [sorted(g, key=record_preference) for here in found.values() for g in here]


def distinct(rows: list[ServingRow]) -> list[ServingRow]:
    """``rows`` with each measurement once. Dropped: a row that agrees with a kept one on every
    column but its provenance (:data:`PROVENANCE`: the InferenceX exports of 2026-03-25 and
    2026-04-06 and AIConfigurator's db-dump repeat earlier runs to the last digit); a rounded
    copy (``ServingRow.copy_of``: two gap-analysis files repeat the 2026-04-06 export to
    0.01 ms); and an expressible row that records a run another row records better
    (:func:`same_run`: the same deployment and TTFT/TPOT although the columns are written
    differently: the db-dump labels R1 runs V3, the 2026-04-06 export writes ``tp_size`` as
    TP x EP, the last bit of a float differs). An error statistic that counted each copy would
    weigh those runs twice."""
    by_columns = distinct_columns(rows)
    dropped = {id(row) for group in same_run(by_columns) for row in group[1:]}
    return [row for row in by_columns if id(row) not in dropped]


def distinct_columns(rows: list[ServingRow]) -> list[ServingRow]:
    """``rows`` without the rows that repeat another in every column but their provenance, and
    without rounded copies of a kept row (the first two rules of :func:`distinct`). Of rows
    that repeat each other the best attested stands (:func:`record_preference`: the publication
    over the db-dump's copy), whatever their order in ``rows``; the order of ``rows`` is kept."""
    ids = {row.id for row in rows}
    best: dict[tuple[tuple[str, str], ...], tuple[tuple[int, bool], int]] = {}
    keys: list[tuple[tuple[str, str], ...] | None] = []
    for i, row in enumerate(rows):
        if row.copy_of in ids:
            keys.append(None)  # a rounded copy of a row that is counted (``rounded_copies``)
            continue
        key = tuple(sorted((k, v) for k, v in row.raw.items() if k not in PROVENANCE))
        keys.append(key)
        rank = (record_preference(row), i)
        if key not in best or rank < best[key]:
            best[key] = rank
    return [
        row
        for i, (row, key) in enumerate(zip(rows, keys, strict=True))
        if key and best[key][1] == i
    ]
