"""Which regime the fixed-length closed-loop rows ran in: lockstep cohorts or staggered.

The serving model reads a closed-loop benchmark with fixed lengths as cohorts that stay in
lockstep (``gpuscale.planner.serving.cohort_sim``): requests that start together finish
together, so every round repeats the start burst. In lockstep, TPOT holds no other request's
prefill (a round's prompts all run before its decodes, or beside them in the same few
iterations) and TTFT holds the whole burst; staggered (``input_cv`` > 0: the steady state), the
prompts of the other requests interrupt every request's decode, so TPOT carries them and TTFT
does not. TPOT is the fingerprint: it needs no client setting, only which regime ran.

For every aggregated row read with fixed lengths that the cohort simulation answers with the
engine's default scheduler, this prints per engine, version, model and GPU the median TPOT and
TTFT error (and median signed bias) under both readings with the engine defaults (the launch
options of ``serving_launches.launch_options`` left out, so the fingerprint does not depend on
them), the requests the measured TTFT holds beyond the staggered steady state by Little's law
(``gap_rows.waiting_requests``), and the model's reading of the rows as it stands (launch
options included: ``read``). Diagnostic only: nothing here changes the model, and the regime
is never chosen from these figures. ::

    PYTHONPATH=src python benchmarks/cohort_regime.py [--engine sglang|trtllm|vllm]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from gpuscale.api.serving import MAX_NUM_REQUESTS, infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gap_rows import STAGGER_CV

COHORT_NOTE = "closed loop simulated by cohorts"


def _options(r: ServingRow, defaults: bool = True, **extra: Any) -> dict[str, Any]:
    kw = {k: v for k, v in r.kwargs.items() if not (defaults and k == "engine_options")}
    out: dict[str, Any] = infer(r.raw["model_path"], **{**kw, **extra}).to_dict()["options"][0]
    return out


def cohort_rows(engine: str | None = None) -> list[ServingRow]:
    """Aggregated expressible rows read with fixed lengths (the cohort simulation's input), of
    one engine (the rows' ``backend``) or all."""
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    return [
        r
        for r in rows
        if r.mode == "agg"
        and r.expressible
        and "input_cv" not in r.kwargs
        and engine in (None, r.raw["backend"])
    ]


def readings(r: ServingRow) -> dict[str, float] | None:
    """TTFT/TPOT relative errors of the lockstep and staggered readings, and the waiting
    requests; ``None`` when the model does not answer the row by cohorts."""
    lock = _options(r)
    if not any(COHORT_NOTE in n for n in lock.get("notes", [])):
        return None
    # No start burst either: num_requests far above the concurrency.
    stag = _options(r, input_cv=STAGGER_CV, num_requests=MAX_NUM_REQUESTS)
    e2e_ms = r.ttft_ms + (int(r.raw["osl"]) - 1) * r.tpot_ms
    read = _options(r, defaults=False)
    return {
        "read_tpot": read["tpot_ms"] / r.tpot_ms - 1,
        "read_ttft": read["ttft_ms"] / r.ttft_ms - 1,
        "lock_tpot": lock["tpot_ms"] / r.tpot_ms - 1,
        "stag_tpot": stag["tpot_ms"] / r.tpot_ms - 1,
        "lock_ttft": lock["ttft_ms"] / r.ttft_ms - 1,
        "stag_ttft": stag["ttft_ms"] / r.ttft_ms - 1,
        "waiting": (r.ttft_ms - stag["ttft_ms"]) * r.concurrency / e2e_ms,
    }


def _abs_med(v: list[float]) -> float:
    return statistics.median(abs(x) for x in v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--engine", choices=("sglang", "trtllm", "vllm"), help="only this engine's rows"
    )
    args = ap.parse_args()
    groups: dict[tuple[str, ...], list[dict[str, float]]] = defaultdict(list)
    for r in cohort_rows(args.engine):
        got = readings(r)
        if got is None:
            continue
        raw = r.raw
        key = (raw["backend"], raw["backend_version"], raw["model_path"].split("/")[1][:22])
        groups[(*key, raw["system"][:4])].append(got)
    print("median |error| (median bias) of the lockstep cohort reading and of the staggered steady")
    print("state with the engine defaults; waiting = requests held beyond the staggered TTFT")
    print("(Little's law), median; read = median |error| of the model's reading of the rows")
    head = "TPOT lock / stag          TTFT lock / stag          waiting   TPOT read TTFT read"
    print(f"{'engine':7s} {'version':12s} {'model':22s} {'gpu':4s} {'n':>3s}  {head}")
    for (eng, ver, model, gpu), v in sorted(groups.items()):
        cols = []
        for metric in ("tpot", "ttft"):
            lock = [g[f"lock_{metric}"] for g in v]
            stag = [g[f"stag_{metric}"] for g in v]
            cols.append(
                f"{_abs_med(lock):4.0%} ({statistics.median(lock):+4.0%}) / "
                f"{_abs_med(stag):4.0%} ({statistics.median(stag):+4.0%})"
            )
        wait = statistics.median(g["waiting"] for g in v)
        read = [_abs_med([g[f"read_{m}"] for g in v]) for m in ("tpot", "ttft")]
        print(
            f"{eng:7s} {ver:12s} {model:22s} {gpu:4s} {len(v):3d}  {cols[0]}  {cols[1]}  "
            f"{wait:6.1f}  {read[0]:8.0%}  {read[1]:8.0%}"
        )


if __name__ == "__main__":
    main()
