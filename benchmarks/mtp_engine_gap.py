"""MTP on InferenceX's held-out DeepSeek-R1 runs, by engine: is SGLang's TPOT gap the
acceptance or the speculative step? (issue 10, held-out set; diagnostic, nothing here feeds
the model.)

Every held-out record that states MTP (``data/validation/serving/inferencex_api_dsr1.csv``,
read by ``validation.inferencex_api`` with the project's launch tables, as
``validate_serving_unseen.py`` reads it) is predicted with ``gpuscale.api.infer``. Two readings
per GPU x framework x mode x draft count:

- ``implied E``: TPOT = iteration / E, so with the model's iteration time the measured TPOT
  implies ``E_measured = E_model x TPOT_model / TPOT_measured`` (the catalog's E for DeepSeek-R1
  MTP is TensorRT-LLM tech blog 1's 1.92 / 2.58 / 2.82 at 1 / 2 / 3 drafts);
- ``speedup``: where the same deployment (GPU, framework, precision, per-stage TP/EP/attention
  DP/workers, lengths, concurrency) was also run without MTP, the measured speedup
  ``TPOT_plain / TPOT_mtp`` against the modelled one. Their ratio leaves out the model's error
  on the plain step that both runs share: 1 where the model's E and speculative step cost are
  right together, below 1 where it overstates E or understates the step.

    PYTHONPATH=src python benchmarks/mtp_engine_gap.py [--only REGEX] [--by-concurrency]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from typing import Any

from gpuscale.api import infer
from gpuscale.catalog import model as catalog_model
from gpuscale.catalog.speculative import draft_module
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    ApiRow,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables

SERVING = DATA_DIR / "serving"
TWIN_FIELDS = (
    "hardware",
    "framework",
    "precision",
    "disagg",
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_num_workers",
    "decode_tp",
    "decode_ep",
    "decode_dp_attention",
    "decode_num_workers",
    "isl",
    "osl",
    "conc",
)
"""Record fields an MTP run and its plain twin share: the same deployment, lengths and load."""


def twin_key(record: dict[str, str]) -> tuple[str, ...]:
    """The deployment, lengths and concurrency of a record, without its speculative method."""
    return tuple(record[f] for f in TWIN_FIELDS)


def implied_tokens(model_e: float, model_tpot_ms: float, measured_tpot_ms: float) -> float:
    """Tokens per verification the measured TPOT implies at the model's iteration time."""
    return model_e * model_tpot_ms / measured_tpot_ms


def speedup_ratio(
    plain_measured_ms: float, mtp_measured_ms: float, plain_model_ms: float, mtp_model_ms: float
) -> tuple[float, float, float]:
    """(measured speedup, modelled speedup, measured / modelled) of MTP over its plain twin."""
    measured = plain_measured_ms / mtp_measured_ms
    modelled = plain_model_ms / mtp_model_ms
    return measured, modelled, measured / modelled


def group_of(row: ApiRow) -> str:
    """GPU, framework, mode and draft count (``k0`` for a plain run)."""
    k = int(row.kwargs.get("draft_tokens") or 0)
    return f"{row.hardware} {row.framework} {row.mode} k{k}"


def _rows() -> list[ApiRow]:
    rows = read_records(load_records(SERVING / API_FILE), load_tables(SERVING))
    return [r for r in distinct_measurements(rows) if r.expressible]


def _predict(row: ApiRow, cache: dict[str, float | None]) -> float | None:
    key = json.dumps([row.model, row.kwargs], sort_keys=True)
    if key not in cache:
        try:
            cache[key] = float(infer(row.model, **row.kwargs).to_dict()["options"][0]["tpot_ms"])
        except InputError:
            cache[key] = None
    return cache[key]


def readings(only: str = "") -> dict[str, dict[str, Any]]:
    """Per group: the implied E of every MTP record and the speedup readings of those with a
    plain twin, each with its concurrency."""
    pattern = re.compile(only) if only else None
    rows = [r for r in _rows() if pattern is None or pattern.search(r.id)]
    mtp = [r for r in rows if r.record["spec_method"] == "mtp"]
    twins: dict[tuple[str, ...], list[ApiRow]] = defaultdict(list)
    wanted = {twin_key(r.record) for r in mtp}
    for r in rows:
        if r.record["spec_method"] == "none" and twin_key(r.record) in wanted:
            twins[twin_key(r.record)].append(r)
    cache: dict[str, float | None] = {}
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"implied": [], "speedup": []})
    for r in mtp:
        k = int(r.kwargs["draft_tokens"])
        module = draft_module("mtp", catalog_model(r.model).name)
        model = _predict(r, cache)
        if module is None or k not in module.acceptance_length or model is None:
            continue
        e = module.acceptance_length[k]
        g = out[group_of(r)]
        g["e_model"] = e
        g["implied"].append((r.concurrency, implied_tokens(e, model, r.measured["tpot_ms"])))
        for p in twins.get(twin_key(r.record), []):
            plain = _predict(p, cache)
            if plain is not None:
                ratio = speedup_ratio(p.measured["tpot_ms"], r.measured["tpot_ms"], plain, model)
                g["speedup"].append((r.concurrency, *ratio))
    return dict(out)


def _median(xs: list[float]) -> str:
    return f"{statistics.median(xs):5.2f}" if xs else "    -"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="records whose id matches this regex")
    ap.add_argument(
        "--by-concurrency", action="store_true", help="also print the speedup ratio by concurrency"
    )
    args = ap.parse_args(argv)
    data = readings(args.only)
    print(
        "group                                 | n  E_model E_implied (c<=16) | "
        "pairs speedup measured modelled ratio (c<=16)"
    )
    for name in sorted(data):
        g = data[name]
        imp = [e for _, e in g["implied"]]
        imp_lo = [e for c, e in g["implied"] if c <= 16]
        sp = g["speedup"]
        lo = [s for s in sp if s[0] <= 16]
        print(
            f"{name:<37} | {len(imp):3d} {g['e_model']:5.2f} {_median(imp)} {_median(imp_lo)} | "
            f"{len(sp):3d} {_median([s[1] for s in sp])} {_median([s[2] for s in sp])} "
            f"{_median([s[3] for s in sp])} {_median([s[3] for s in lo])}"
        )
        if args.by_concurrency and sp:
            by: dict[int, list[float]] = defaultdict(list)
            for c, *_, ratio in sp:
                by[c].append(ratio)
            print(
                "    ratio by c: "
                + " ".join(f"c{c}:{_median(v).strip()}" for c, v in sorted(by.items()))
            )


if __name__ == "__main__":
    main()
