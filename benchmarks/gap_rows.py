"""What AIConfigurator's gap-analysis rows show about their launch (diagnostic only).

The aggregated TensorRT-LLM 1.0.0rc3 rows of ``aiconfigurator_silicon_hopper.csv`` whose
``silicon_data_source`` is ``source_file=.../aic-auto-gap-analysis/...`` record no launch
settings, image, date or client (docs/investigations/serving-gap-analysis-rows.md,
"AIConfigurator gap-analysis rows"). This script prints the two signatures in their measured TTFT
that a launch setting would have to explain, next to the serving model's reading
(``gpuscale.api.infer`` with the row's kwargs):

- light load: measured TTFT at the lowest concurrency over TTFT at the next one, per output
  length (a closed loop of C requests on an engine that admits them all has TTFT rising with C;
  a running cap S < C would make the wait grow with C, not fall);
- heavy load: TTFT at C = 128 over TTFT at C = 64, measured and modelled;
- TPOT: the measured TPOT above the modelled one, per request added from the lowest
  concurrency to C = 128 (ms per request in flight), per TP;
- waiting: requests the measured TTFT holds beyond the staggered steady state, by Little's law
  (``waiting_requests``): a run where one request is always queued (a running cap of C - 1,
  or one request per round held a whole request duration) reads 1.0 at every C; requests
  that arrive in partial cohorts read a fraction of C;
- held per completion (branch ``trt-dense``): the same hold measured without the model, from
  two rows that differ only in the output length (``hold_per_completion``): one request held
  a whole interval between completions reads 1.0, a fixed delay reads 0;
- output ceiling (branch ``trt-dense``): output tokens per second at C = 128, measured and
  modelled, per TP and output length, with the requests decoding by Little's law
  (``decoding_requests``): an engine-side limit scales with the GPUs, a host-side one does not;
- TP-independent decode (branch ``trt-dense``): measured TPOT on TP4 and TP8 at ISL 1024, per
  concurrency: an iteration the GPUs bound gets shorter with twice the GPUs, a host-bound one
  does not;
- prefill slope (branch ``trt-dense``): the light-load TTFT added per prompt token (C = 8,
  OSL 128, shortest to longest prompt), measured, over the model's for one prompt alone
  (C = 1): the prompts a request waits behind plus its own, about (C + 1) / 2 = 4.5 when the
  C prompts arrive together (lockstep), 1 when they arrive apart (staggered).

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


def predict_row(r: ServingRow) -> dict[str, float]:
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


def hold_per_completion(short: ServingRow, long: ServingRow) -> float:
    """Requests held a whole interval between completions, measured only.

    ``short`` and ``long`` differ only in the output length. If a mean TTFT carries ``k``
    intervals between completions (``e2e / C`` in a closed loop of C), lengthening the output
    adds ``k x (e2e_long - e2e_short) / C`` to it, while a delay that does not depend on the
    request's duration (queueing behind prompts, a first-wave stall) adds nothing; the prompt
    is the same, so the prefill cancels. Returns ``k``."""
    assert short.concurrency == long.concurrency and short.raw["isl"] == long.raw["isl"]
    e2e = [r.ttft_ms + (int(r.raw["osl"]) - 1) * r.tpot_ms for r in (short, long)]
    return (long.ttft_ms - short.ttft_ms) * short.concurrency / (e2e[1] - e2e[0])


def decoding_requests(r: ServingRow) -> float:
    """Requests decoding on average, by Little's law: ``rate x (OSL - 1) TPOT`` with the closed
    loop's ``rate = C / e2e``; the rest of C (``rate x TTFT``) are waiting or in prefill."""
    decode_ms = (int(r.raw["osl"]) - 1) * r.tpot_ms
    return r.concurrency * decode_ms / (r.ttft_ms + decode_ms)


def output_tokens_per_s(r: ServingRow) -> float:
    """The closed loop's measured output rate: ``C x OSL / e2e``."""
    return (
        r.concurrency * int(r.raw["osl"]) / (r.ttft_ms + (int(r.raw["osl"]) - 1) * r.tpot_ms) * 1e3
    )


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
            pred = [predict_row(x) for x in (lo, hi)]
            heavy[(model, osl)].append(
                (hi.ttft_ms / lo.ttft_ms, pred[1]["ttft_ms"] / pred[0]["ttft_ms"])
            )
        if 128 in by_c and cs[0] < 128:
            first, last = by_c[cs[0]], by_c[128]
            gap = [x.tpot_ms - predict_row(x)["tpot_ms"] for x in (first, last)]
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
    _extra(groups)


def _extra(groups: dict[tuple[str, str, str, str], dict[int, ServingRow]]) -> None:
    """The branch ``trt-dense`` signatures (module docstring)."""
    held: dict[tuple[str, int], list[float]] = defaultdict(list)
    for (model, tp, isl, osl), by_c in groups.items():
        longest = groups.get((model, tp, isl, "512"), {})
        if osl != "128":
            continue
        for c, r in by_c.items():
            if c in longest:
                held[(model, c)].append(hold_per_completion(r, longest[c]))
    print("held per completion: intervals between completions in the mean TTFT, OSL 128 -> 512,")
    print("measured only, median, range over TP and ISL")
    for (model, c), v in sorted(held.items()):
        lo, mid, hi = min(v), statistics.median(v), max(v)
        print(f"  {model:32s} C {c:>3d}  n={len(v):2d}  {mid:6.2f}  {lo:6.2f}..{hi:6.2f}")
    print("output ceiling at C = 128 (ISL 1024): output tokens/s measured, modelled;")
    print("requests decoding by Little's law measured, modelled")
    for (model, tp, isl, osl), by_c in sorted(groups.items()):
        if isl != "1024" or 128 not in by_c:
            continue
        r = by_c[128]
        o = predict_row(r)
        print(
            f"  {model:32s} TP {tp:>2s} OSL {osl:>4s}  {output_tokens_per_s(r):7.0f}"
            f"  {o['output_tokens_per_s']:7.0f}   {decoding_requests(r):6.1f}"
            f"  {o['running_requests_per_rank']:6.1f}"
        )
    print("TP-independent decode: measured TPOT on TP4 / TP8 at ISL 1024, ms, per C")
    for (model, tp, isl, osl), by_c in sorted(groups.items()):
        if tp != "4" or isl != "1024":
            continue
        tp8 = groups.get((model, "8", isl, osl), {})
        cells = [
            f"C{c} {by_c[c].tpot_ms:5.2f}/{tp8[c].tpot_ms:5.2f}" for c in sorted(by_c) if c in tp8
        ]
        print(f"  {model:32s} OSL {osl:>4s}  " + "  ".join(cells))
    print("prefill slope at C = 8, OSL 128: light-load TTFT per prompt token, ms/token,")
    print("shortest -> longest prompt: measured, modelled for one prompt alone (C = 1), ratio")
    for (model, tp, isl, osl), by_c in sorted(groups.items()):
        if osl != "128" or 8 not in by_c:
            continue
        isls = sorted(int(k[2]) for k in groups if k[0] == model and k[1] == tp and k[3] == osl)
        if int(isl) != isls[-1] or len(isls) < 2:
            continue
        lo, hi = groups[(model, tp, str(isls[0]), osl)].get(8), by_c[8]
        if lo is None:
            continue
        d = isls[-1] - isls[0]
        meas = (hi.ttft_ms - lo.ttft_ms) / d
        alone = [infer(x.raw["model_path"], **{**x.kwargs, "concurrency": 1}) for x in (lo, hi)]
        ttft = [a.to_dict()["options"][0]["ttft_ms"] for a in alone]
        mod = (ttft[1] - ttft[0]) / d
        print(
            f"  {model:32s} TP {tp:>2s} ISL {isls[0]}->{isls[-1]}  {meas:6.3f}  {mod:6.3f}"
            f"  {meas / mod:5.1f}"
        )


if __name__ == "__main__":
    main()
