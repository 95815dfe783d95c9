"""Serving error bands: the 10th, 50th and 90th percentiles of measured / predicted mean TTFT,
TPOT and output tokens/s, per engine, mode, speculative decoding and GPU generation, on runs the
serving model never saw and on the rows it was built against
(``gpuscale.validation.serving_bands``).

- held out: InferenceX's DeepSeek-R1 records on every GPU but the H100/H200
  (``data/validation/serving/inferencex_api_dsr1.csv``; ``validate_serving_unseen.py``'s
  ``not-hopper`` runs: hardware the model was never checked on);
- in sample: the distinct measurements of ``aiconfigurator_silicon_hopper.csv`` whose deployment
  is stated (``validate_serving.py``'s expressible rows; they carry no output tokens/s).

``--write`` stores them in ``src/gpuscale/catalog/data/serving_validation_bands.yaml``, which
``gpuscale infer`` reads to say how far off its figures were on runs like the one asked about.

    PYTHONPATH=src python benchmarks/serving_bands.py [--write] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import yaml

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.costmodel.serving.uncertainty import METRICS, regime_keys
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    ROW_SYSTEMS,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables
from gpuscale.validation.serving_bands import HELD_OUT, IN_SAMPLE, RunError, document
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct

SERVING = DATA_DIR / "serving"
HOPPER_ROWS = SERVING / "aiconfigurator_silicon_hopper.csv"
SEEN_HARDWARE = frozenset(ROW_SYSTEMS)
"""The GPUs of the rows the model was built against: their InferenceX records are not held out."""
BANDS = Path(catalog.__file__).parent / "data" / "serving_validation_bands.yaml"
SOURCE = (
    "benchmarks/serving_bands.py --write: 10th, 50th and 90th percentiles of measured / "
    "predicted mean TTFT, TPOT and output tokens/s per engine, mode and speculative decoding; "
    "held_out: InferenceX DeepSeek-R1 records on GPUs other than H100/H200 "
    "(data/validation/serving/inferencex_api_dsr1.csv; some launch readings were added after "
    "looking at their errors: docs/benchmarks.md, Held-out serving runs); in_sample: the "
    "expressible distinct measurements of data/validation/serving/aiconfigurator_silicon_hopper.csv"
)


def _predict(model: str, kwargs: dict, cache: dict[str, dict[str, float] | None]) -> dict | None:
    key = json.dumps([model, kwargs], sort_keys=True, default=str)
    if key not in cache:
        try:
            o = infer(model, **kwargs).to_dict()["options"][0]
            cache[key] = {m: float(o[m]) for m in METRICS}
        except InputError:
            cache[key] = None
    return cache[key]


def _run(kind: str, model: str, kwargs: dict, measured: dict, pred: dict) -> RunError:
    return RunError(
        kind=kind,
        engine=kwargs["engine"],
        mode="disagg" if kwargs.get("prefill_workers") else "agg",
        speculative=bool(kwargs.get("speculative")),
        generation=catalog.gpu(kwargs["gpu"]).generation,
        model=catalog.model(model).name,
        measured=measured,
        predicted=pred,
    )


def _priced(
    kind: str, rows: list[tuple[bool, str, dict, dict]], left_out: Counter[str], limit: int
) -> list[RunError]:
    """Each expressible row (expressible, model, infer kwargs, measured) priced by ``infer``;
    rows not expressible or refused are counted in ``left_out``."""
    left_out[f"{kind}: not expressible"] += sum(not ok for ok, *_ in rows)
    rows = [r for r in rows if r[0]]
    if limit:
        rows = rows[:: max(len(rows) // limit, 1)]
    cache: dict[str, dict[str, float] | None] = {}
    out = []
    for _, model, kwargs, measured in rows:
        pred = _predict(model, kwargs, cache)
        if pred is None:
            left_out[f"{kind}: refused by infer"] += 1
            continue
        out.append(_run(kind, model, kwargs, measured, pred))
    return out


def held_out_runs(left_out: Counter[str], limit: int = 0) -> list[RunError]:
    records = read_records(load_records(SERVING / API_FILE), load_tables(SERVING))
    rows = [
        (r.expressible, r.model, r.kwargs, r.measured)
        for r in distinct_measurements(records)
        if r.hardware not in SEEN_HARDWARE
    ]
    return _priced(HELD_OUT, rows, left_out, limit)


def in_sample_runs(left_out: Counter[str], limit: int = 0) -> list[RunError]:
    rows = [
        (
            r.expressible,
            r.raw["model_path"],
            r.kwargs,
            {"ttft_ms": r.ttft_ms, "tpot_ms": r.tpot_ms},
        )
        for r in distinct(load(HOPPER_ROWS))
    ]
    return _priced(IN_SAMPLE, rows, left_out, limit)


def _runs(limit: int) -> tuple[list[RunError], Counter[str]]:
    left_out: Counter[str] = Counter()
    return held_out_runs(left_out, limit) + in_sample_runs(left_out, limit), left_out


def bands(limit: int = 0) -> dict:
    """The bands document of every held-out and in-sample run (every k-th with ``limit``)."""
    runs, left_out = _runs(limit)
    return document(runs, SOURCE, dict(sorted(left_out.items())))


def joint_coverage(runs: list[RunError], doc: dict) -> dict[str, float]:
    """Per kind, the share of runs inside their own narrowest regime's 10th-90th band for every
    metric they measure at once (each band holds 80% of its runs per metric, not jointly)."""
    inside: dict[str, list[bool]] = {}
    for r in runs:
        key = next(
            k
            for k in regime_keys(r.kind, r.engine, r.mode, r.speculative, r.generation)
            if k in doc["regimes"]
        )
        band = doc["regimes"][key]
        ok = all(
            band[m][0] <= r.measured[m] / r.predicted[m] <= band[m][2]
            for m in METRICS
            if m in band and r.measured.get(m) and r.predicted.get(m)
        )
        inside.setdefault(r.kind, []).append(ok)
    return {k: sum(v) / len(v) for k, v in sorted(inside.items())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {BANDS.name}")
    ap.add_argument("--limit", type=int, default=0, help="every k-th run, about N of each set")
    args = ap.parse_args(argv)
    if args.write and args.limit:
        ap.error("--write stores the bands of every run: leave out --limit")
    t0 = time.perf_counter()
    runs, left_out = _runs(args.limit)
    doc = document(runs, SOURCE, dict(sorted(left_out.items())))
    print(
        f"{time.perf_counter() - t0:.0f} s; measured / predicted, 10th / 50th / 90th percentile "
        f"per metric; left out: {doc['left_out']}"
    )
    print(f"{'regime':36} {'runs':>5} {'TTFT':>16} {'TPOT':>16} {'tok/s':>16}")
    for key, r in doc["regimes"].items():
        cells = ["{:.2f}/{:.2f}/{:.2f}".format(*r[m]) if m in r else "-" for m in METRICS]
        print(f"{key:36} {r['rows']:5d} " + " ".join(f"{c:>16}" for c in cells))
    joint = ", ".join(f"{k} {v:.0%}" for k, v in joint_coverage(runs, doc).items())
    print(f"runs inside their own regime's band for every metric at once: {joint}")
    if args.write:
        BANDS.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
        print(f"wrote {BANDS}")


if __name__ == "__main__":
    main()
