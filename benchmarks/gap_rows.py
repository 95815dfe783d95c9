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
  concurrency to C = 128 (ms per request in flight), per TP.

Nothing here changes the model. ::

    PYTHONPATH=src python benchmarks/gap_rows.py
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

GAP_SOURCE = "aic-auto-gap-analysis"
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


if __name__ == "__main__":
    main()
