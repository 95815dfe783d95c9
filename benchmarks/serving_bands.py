"""Serving error bands: the 10th-90th percentiles of measured / predicted mean TTFT, TPOT and
output tokens/s, per engine and mode, on runs the serving model never saw and on the rows it was
built against (``gpuscale.validation.serving_bands``).

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
from pathlib import Path

import yaml

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables
from gpuscale.validation.serving_bands import (
    HELD_OUT,
    IN_SAMPLE,
    METRICS,
    RunError,
    document,
)
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct

SERVING = DATA_DIR / "serving"
HOPPER_ROWS = SERVING / "aiconfigurator_silicon_hopper.csv"
SEEN_HARDWARE = ("h100", "h200")
"""The GPUs of the rows the model was built against: their InferenceX records are not held out."""
BANDS = Path(catalog.__file__).parent / "data" / "serving_validation_bands.yaml"
SOURCE = (
    "benchmarks/serving_bands.py --write: 10th and 90th percentiles of measured / predicted "
    "mean TTFT, TPOT and output tokens/s per engine and mode; held_out: InferenceX DeepSeek-R1 "
    "records on GPUs other than H100/H200 (data/validation/serving/inferencex_api_dsr1.csv); "
    "in_sample: the expressible distinct measurements of "
    "data/validation/serving/aiconfigurator_silicon_hopper.csv"
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


def held_out_runs(limit: int = 0) -> list[RunError]:
    rows = [
        r
        for r in distinct_measurements(
            read_records(load_records(SERVING / API_FILE), load_tables(SERVING))
        )
        if r.expressible and r.hardware not in SEEN_HARDWARE
    ]
    if limit:
        rows = rows[:: max(len(rows) // limit, 1)]
    cache: dict[str, dict[str, float] | None] = {}
    out = []
    for row in rows:
        pred = _predict(row.model, row.kwargs, cache)
        if pred is None:
            continue
        gpu = catalog.gpu(row.kwargs["gpu"])
        out.append(
            RunError(HELD_OUT, row.kwargs["engine"], row.mode, gpu.generation, row.measured, pred)
        )
    return out


def in_sample_runs(limit: int = 0) -> list[RunError]:
    rows = [r for r in distinct(load(HOPPER_ROWS)) if r.expressible]
    if limit:
        rows = rows[:: max(len(rows) // limit, 1)]
    cache: dict[str, dict[str, float] | None] = {}
    out = []
    for row in rows:
        pred = _predict(row.raw["model_path"], row.kwargs, cache)
        if pred is None:
            continue
        gpu = catalog.gpu(row.kwargs["gpu"])
        measured = {"ttft_ms": row.ttft_ms, "tpot_ms": row.tpot_ms}
        out.append(
            RunError(IN_SAMPLE, row.kwargs["engine"], row.mode, gpu.generation, measured, pred)
        )
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help=f"write {BANDS.name}")
    ap.add_argument("--limit", type=int, default=0, help="every k-th run, about N of each set")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    runs = held_out_runs(args.limit) + in_sample_runs(args.limit)
    doc = document(runs, SOURCE)
    print(
        f"{len(runs)} runs ({time.perf_counter() - t0:.0f} s); measured / predicted, "
        "10th-90th percentile (80% of runs within):"
    )
    print(f"{'regime':30} {'runs':>5} {'TTFT':>11} {'TPOT':>11} {'tok/s':>11}")
    for key, r in doc["regimes"].items():
        cells = [f"{r[m][0]:5.2f}-{r[m][1]:<5.2f}" if m in r else f"{'-':>11}" for m in METRICS]
        print(f"{key:30} {r['rows']:5d} {' '.join(cells)}")
    print(f"validated generations: {', '.join(doc['validated']['generations'])}")
    if args.write:
        BANDS.write_text(yaml.safe_dump(doc, sort_keys=False, width=100))
        print(f"wrote {BANDS}")


if __name__ == "__main__":
    main()
