"""TensorRT-LLM 1.0.0rc3 gap rows: the per-request host cost they imply, and how it combines.

Diagnostic only, nothing here changes the model (docs/investigations/serving-gap-analysis-rows.md,
"TensorRT-LLM 1.0.0rc3: the per-iteration host cost", branch ``trt-host``). For the aggregated
TensorRT-LLM 1.0.0rc3 gap-analysis rows (``gap_rows.gap_rows``) it prints:

- marginal decode time: the least-squares slope of TPOT against the requests decoding, over the
  concurrencies of one (model, TP, ISL, OSL) grid line, measured (requests decoding by Little's
  law, ``gap_rows.decoding_requests``) and modelled (the model's running requests), median over
  ISL and the output lengths 256 and 512 (at OSL 128 a prompt joins almost every iteration and
  the eager context iterations dominate TPOT). A GPU-bound iteration's slope halves with twice
  the GPUs (each request's KV read and GEMM rows are split); a host-bound one does not.
- per grid line on TP4/TP8, the combination rule: ``h`` is the measured slope of the line
  whose modelled (GPU) slope is the smallest (ISL 1024, OSL 512: the most host-bound line of
  that TP); on the other lines of the same TP, ``sum`` (the host time added to the GPU
  iteration) predicts a slope of ``modelled + h``, ``max`` (the overlap scheduler hides the
  host behind the GPU, TensorRT-LLM docs "Overlap Scheduler": "CPU work (step n) and GPU
  computation (step n+1) to run concurrently") one of ``max(modelled, h)``: a floor at ``h``
  where the GPU's slope is below it, the GPU's slope above it (the longest prompts).
- the same on TPOT itself: the TP1 and TP2 rows at C >= 32, host time = TP8's ``h`` x the
  requests decoding: ``sum`` is ``model + host``, ``max`` is ``max(model, host)``, median
  signed and absolute error against the measured TPOT, beside the model alone.

    PYTHONPATH=src python benchmarks/trtllm_host_overlap.py
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

import numpy as np

from gap_rows import decoding_requests, gap_rows, predict_row
from gpuscale.validation.serving_rows import ServingRow

MODELS = ("Llama-3.1-8B-Instruct", "Qwen3-32B")
SLOPE_OSL = ("256", "512")
"""Output lengths whose TPOT is mostly decode-only iterations (module docstring)."""
TEST_MIN_C = 32
"""Combination test on rows where the implied host time is a sizeable share of the iteration."""

Lines = dict[tuple[str, int, str, str], list[tuple[ServingRow, dict[str, float]]]]
"""(model, TP, ISL, OSL) -> the grid line's rows by concurrency, each with its prediction."""


def _slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of ``y`` on ``x`` (ms per request)."""
    return float(np.polyfit(np.asarray(x), np.asarray(y), 1)[0])


def grid_lines() -> Lines:
    """The two dense models' grid lines (``Lines``)."""
    lines: Lines = defaultdict(list)
    for r in gap_rows():
        model = r.raw["model_path"].split("/")[1]
        if model not in MODELS:
            continue
        key = (model, int(r.raw["tp_size"]), r.raw["isl"], r.raw["osl"])
        lines[key].append((r, predict_row(r)))
    for v in lines.values():
        v.sort(key=lambda rp: rp[0].concurrency)
    return lines


def marginal_slopes(lines: Lines) -> dict[tuple[str, int], tuple[float, float, int]]:
    """(model, TP) -> median (measured, modelled) TPOT slope per running request, lines used."""
    meas: dict[tuple[str, int], list[float]] = defaultdict(list)
    mod: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (model, tp, _isl, osl), rows in lines.items():
        if osl not in SLOPE_OSL or len(rows) < 3:
            continue
        n_meas = [decoding_requests(r) for r, _ in rows]
        n_mod = [p["running_requests_per_rank"] for _, p in rows]
        meas[(model, tp)].append(_slope(n_meas, [r.tpot_ms for r, _ in rows]))
        mod[(model, tp)].append(_slope(n_mod, [p["tpot_ms"] for _, p in rows]))
    return {k: (statistics.median(meas[k]), statistics.median(mod[k]), len(meas[k])) for k in meas}


def line_slopes(lines: Lines, min_tp: int = 4) -> list[tuple[str, int, str, str, float, float]]:
    """(model, TP, ISL, OSL, measured slope, modelled slope) per grid line on TP >= ``min_tp``
    at the output lengths of ``SLOPE_OSL``."""
    out = []
    for (model, tp, isl, osl), rows in sorted(lines.items()):
        if tp < min_tp or osl not in SLOPE_OSL or len(rows) < 3:
            continue
        n_meas = [decoding_requests(r) for r, _ in rows]
        n_mod = [p["running_requests_per_rank"] for _, p in rows]
        meas = _slope(n_meas, [r.tpot_ms for r, _ in rows])
        out.append((model, tp, isl, osl, meas, _slope(n_mod, [p["tpot_ms"] for _, p in rows])))
    return out


def combination_errors(
    lines: Lines,
    host_ms_per_request: dict[str, float],
) -> dict[tuple[str, int], dict[str, list[float]]]:
    """(model, TP) for TP1/TP2 -> signed relative TPOT errors of the model alone, ``sum`` and
    ``max`` (module docstring), rows at C >= ``TEST_MIN_C``."""
    out: dict[tuple[str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (model, tp, _isl, _osl), rows in lines.items():
        if tp > 2:
            continue
        h = host_ms_per_request[model]
        for r, p in rows:
            if r.concurrency < TEST_MIN_C:
                continue
            host = h * decoding_requests(r)
            reads = {"model": p["tpot_ms"], "sum": p["tpot_ms"] + host}
            reads["max"] = max(p["tpot_ms"], host)
            for name, v in reads.items():
                out[(model, tp)][name].append(v / r.tpot_ms - 1.0)
    return out


def host_lines(lines: Lines) -> dict[tuple[str, int], tuple[str, str, float]]:
    """(model, TP >= 4) -> (ISL, OSL, measured slope) of the line with the smallest modelled
    slope: the host-bound end of that TP (module docstring)."""
    best: dict[tuple[str, int], tuple[str, str, float, float]] = {}
    for model, tp, isl, osl, m, p in line_slopes(lines):
        if (model, tp) not in best or p < best[(model, tp)][3]:
            best[(model, tp)] = (isl, osl, m, p)
    return {k: v[:3] for k, v in best.items()}


def main() -> None:
    # No options: --help prints the docstring's first line, anything else exits 2.
    argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0]).parse_args()
    lines = grid_lines()
    slopes = marginal_slopes(lines)
    print("marginal decode time per running request (TPOT slope over C), median over ISL and")
    print(f"OSL {'/'.join(SLOPE_OSL)}, ms per request per iteration: measured, modelled, lines")
    for (model, tp), (m, p, n) in sorted(slopes.items()):
        print(f"  {model:24s} TP {tp}  {m:6.3f}  {p:6.3f}  n={n}")
    hosts = host_lines(lines)
    print("per grid line, TP4/TP8 (ms per request per iteration): measured, modelled; h = the")
    print("measured slope of the TP's host line (*); sum = modelled + h, max = max(modelled, h)")
    for model, tp, isl, osl, m, p in line_slopes(lines):
        h_isl, h_osl, h = hosts[(model, tp)]
        if (isl, osl) == (h_isl, h_osl):
            print(f"  {model:24s} TP {tp}  ISL {isl:>4s}  OSL {osl}  {m:6.3f}  {p:6.3f}  *")
            continue
        print(
            f"  {model:24s} TP {tp}  ISL {isl:>4s}  OSL {osl}  {m:6.3f}  {p:6.3f}"
            f"  sum {p + h:6.3f}  max {max(p, h):6.3f}"
        )
    host = {model: hosts[(model, 8)][2] for model in MODELS}
    print("combination rule on TP1/TP2 rows at C >= 32, host = TP8's h x requests decoding:")
    print("TPOT error median signed / median absolute")
    for (model, tp), errs in sorted(combination_errors(lines, host).items()):
        cells = []
        for name in ("model", "sum", "max"):
            e = errs[name]
            med = statistics.median(e)
            mae = statistics.median(abs(x) for x in e)
            cells.append(f"{name} {med:+6.1%} / {mae:5.1%}")
        n = len(errs["model"])
        print(f"  {model:24s} TP {tp}  n={n:2d}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
