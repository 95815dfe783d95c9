"""What AIConfigurator's gap-analysis rows show about their launch (diagnostic only).

The aggregated TensorRT-LLM 1.0.0rc3 rows of ``aiconfigurator_silicon_hopper.csv`` whose
``silicon_data_source`` is ``source_file=.../aic-auto-gap-analysis/...`` record no launch
settings, image, date or client (docs/benchmarks.md, "AIConfigurator gap-analysis rows"). This
script prints the two signatures in their measured TTFT that a launch setting would have to
explain, next to the serving model's reading (``gpuscale.api.infer`` with the row's kwargs):

- light load: measured TTFT at the lowest concurrency over TTFT at the next one, per output
  length (a closed loop of C requests on an engine that admits them all has TTFT rising with C;
  a running cap S < C would make the wait grow with C, not fall);
- heavy load: TTFT at C = 128 over TTFT at C = 64, measured and modelled;
- TPOT: the measured TPOT above the modelled one, per request added from the lowest
  concurrency to C = 128 (ms per request in flight), per TP;
- waiting: requests the measured TTFT holds beyond the staggered steady state, by Little's law
  (``waiting_requests``): a run where one request is always queued (a running cap of C - 1,
  or one request per round held a whole request duration) reads 1.0 at every C; requests
  that arrive in partial cohorts read a fraction of C.

Nothing here changes the model. ::

    PYTHONPATH=src python benchmarks/gap_rows.py
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from gpuscale.api.serving import MAX_NUM_REQUESTS, infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

GAP_SOURCE = "aic-auto-gap-analysis"
WAITING_MAX_C = 32
"""Light load: past C = 32 the engine's own queue (KV pages, the token budget) adds to it."""
VERSION = "1.0.0rc3"


def gap_rows() -> list[ServingRow]:
    """The expressible aggregated TensorRT-LLM 1.0.0rc3 gap-analysis rows."""
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    return [
        r
        for r in rows
        if GAP_SOURCE in r.raw["silicon_data_source"]
        and r.mode == "agg"
        and r.raw["backend"] == "trtllm"
        and r.raw["backend_version"] == VERSION
        and r.expressible
    ]


def _predict(r: ServingRow) -> dict[str, float]:
    out: dict[str, float] = infer(r.raw["model_path"], **r.kwargs).to_dict()["options"][0]
    return out


def waiting_requests(r: ServingRow) -> float:
    """Requests in the system beyond the staggered steady state's, by Little's law.

    A closed loop of C clients completes ``rate = C / e2e`` requests per second, with ``e2e =
    TTFT + (OSL - 1) TPOT`` measured. A TTFT longer than the model's staggered steady state
    (``infer`` with lengths that break cohorts, ``input_cv`` > 0, and no start burst:
    ``num_requests`` far above C) by ``dt`` holds ``rate x dt`` more requests in the system on
    average (Little's law, L = lambda W). Measured figures only, except the baseline."""
    kw = {**r.kwargs, "input_cv": STAGGER_CV, "num_requests": MAX_NUM_REQUESTS}
    staggered = infer(r.raw["model_path"], **kw).to_dict()["options"][0]["ttft_ms"]
    e2e_ms = r.ttft_ms + (int(r.raw["osl"]) - 1) * r.tpot_ms
    return (r.ttft_ms - staggered) * r.concurrency / e2e_ms


STAGGER_CV = 1e-6
"""Lengths that differ at all break the lockstep cohorts (``deployment.predict_aggregated``):
the smallest spread selects the staggered steady state without moving the mean lengths."""


def main() -> None:
    groups: dict[tuple[str, str, str, str], dict[int, ServingRow]] = defaultdict(dict)
    for r in gap_rows():
        key = (r.raw["model_path"].split("/")[1], r.raw["tp_size"], r.raw["isl"], r.raw["osl"])
        groups[key][r.concurrency] = r

    light: dict[tuple[str, str], list[float]] = defaultdict(list)
    heavy: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    excess: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (model, _tp, _isl, osl), by_c in groups.items():
        cs = sorted(by_c)
        if len(cs) >= 2:
            light[(model, osl)].append(by_c[cs[0]].ttft_ms / by_c[cs[1]].ttft_ms)
        if 64 in by_c and 128 in by_c:
            lo, hi = by_c[64], by_c[128]
            pred = [_predict(x) for x in (lo, hi)]
            heavy[(model, osl)].append(
                (hi.ttft_ms / lo.ttft_ms, pred[1]["ttft_ms"] / pred[0]["ttft_ms"])
            )
        if 128 in by_c and cs[0] < 128:
            first, last = by_c[cs[0]], by_c[128]
            gap = [x.tpot_ms - _predict(x)["tpot_ms"] for x in (first, last)]
            excess[(model, _tp)].append((gap[1] - gap[0]) / (128 - cs[0]))

    print("light load: measured TTFT(lowest C) / TTFT(next C), median over TP and ISL")
    for (model, osl), v in sorted(light.items()):
        print(f"  {model:32s} OSL {osl:>4s}  n={len(v):2d}  {statistics.median(v):5.2f}")
    print("heavy load: TTFT(C=128) / TTFT(C=64), median over TP and ISL: measured, modelled")
    for (model, osl), pairs in sorted(heavy.items()):
        m = statistics.median(p[0] for p in pairs)
        p = statistics.median(p[1] for p in pairs)
        print(f"  {model:32s} OSL {osl:>4s}  n={len(pairs):2d}  {m:5.2f}  {p:5.2f}")
    print("TPOT measured - modelled, added per request in flight (lowest C -> 128), median, ms")
    for (model, tp), v in sorted(excess.items()):
        print(f"  {model:32s} TP {tp:>2s}  n={len(v):2d}  {statistics.median(v):6.3f}")
    waiting: dict[tuple[str, int], list[float]] = defaultdict(list)
    for by_c in groups.values():
        for c, r in by_c.items():
            if c <= WAITING_MAX_C:
                waiting[(r.raw["model_path"].split("/")[1], c)].append(waiting_requests(r))
    print("waiting: requests held beyond the staggered steady state (Little's law), median, range")
    for (model, c), v in sorted(waiting.items()):
        lo, mid, hi = min(v), statistics.median(v), max(v)
        print(f"  {model:32s} C {c:>3d}  n={len(v):2d}  {mid:5.2f}  {lo:5.2f}..{hi:5.2f}")


if __name__ == "__main__":
    main()
