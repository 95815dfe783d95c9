"""Evidence for ``serving_recipes.EXPORT_RELIABLE``: how often each parallelism field of the
InferenceX export agrees with a deployment known without it (the ``twin`` rows)."""

from __future__ import annotations

from gpuscale.validation.serving_fields import (
    INFERENCEX_EXPORTS,
    _int,
)
from gpuscale.validation.serving_recipes import (
    EXPORT_FIELDS,
    Recipes,
    _candidates,
)
from gpuscale.validation.serving_rows import TWIN, ServingRow
from gpuscale.validation.serving_runs import (
    distinct_columns,
)


def export_field_agreement(rows: list[ServingRow], recipes: Recipes) -> dict[str, tuple[int, int]]:
    """For each :data:`EXPORT_FIELDS` field: (rows that agree, rows compared), over the distinct
    export rows of class ``twin`` whose deployment (workers, decode attention DP, speculative
    decoding, from the database row that names them) matches exactly one configuration entry.
    Their deployment does not come from the export's parallelism fields, so agreement here is
    evidence about those fields, not a consequence of reading them."""
    out = dict.fromkeys(EXPORT_FIELDS, (0, 0))
    # Column-level repeats only: the twins are the same measurement as their database rows, so
    # ``distinct`` would fold them away.
    for row in distinct_columns(rows):
        r, kw = row.raw, row.kwargs
        if row.kind != TWIN or not r["silicon_data_source"].startswith(INFERENCEX_EXPORTS):
            continue
        hits = [
            e
            for e in _candidates(r, row.concurrency, recipes)
            if e["spec"] == kw.get("speculative", "none")
            and (int(e["prefill_workers"]), int(e["decode_workers"]))
            == (kw["prefill_workers"], kw["decode_workers"])
            and int(e["decode_attention_dp"]) == kw["decode_attention_dp"]
        ]
        if len(hits) != 1:
            continue
        for name, (col, ecol) in EXPORT_FIELDS.items():
            agree, n = out[name]
            out[name] = (agree + (_int(r[col]) == int(hits[0][ecol])), n + 1)
    return out
