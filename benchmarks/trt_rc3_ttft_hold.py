"""TensorRT-LLM 1.0.0rc3 gap rows: where their TTFT is spent, and what the sourced launch
readings do to it (diagnostic only, docs/investigations/serving-gap-analysis-rows.md
"TensorRT-LLM 1.0.0rc3 gap rows: a TTFT hold beside the decodes, shared with the campaign's vLLM
rows", branch ``aic-trt10``).

**Span fit (measured figures only).** For one (model, TP, ISL, C) of the grid, the three output
lengths 128/256/512 give a request's decode span ``D = (OSL - 1) x TPOT`` three times. In a
closed loop the span holds ``OSL - 1`` iterations, a decode step of every running request
each, plus the prefill work of the other prompts that run inside it, so ``D = a + b (OSL - 1)``
by least squares: ``b`` is the measured decode iteration, ``a`` the prefill work inside a
span. When the other ``C - 1`` prompts all run inside it (each prompt's prefill lies in the
others' decode spans, none in its own wait), ``a / (C - 1)`` is one prompt's prefill, which is
compared with the model's iteration for one prompt alone (``IterationModel.time_s``, the same
clock the simulation uses). The TTFT (its mean over the three OSLs; Qwen3-32B's does not move
with the OSL) then splits into that prefill, one decode iteration, and a **hold** while the
engine runs decode iterations of the others: ``hold = TTFT - a / (C - 1) - b``, reported in decode iterations
(``hold / b``) and as prompt tokens per held iteration (``ISL / (hold / b)``).

A request waiting behind other prompts (a burst, prompts batched by the token budget) would
carry their prefill in its TTFT window and take it out of its decode span: ``a / (C - 1)`` far
below one prompt's prefill. Qwen3-32B reads 0.52-1.14 of it (median 0.95) at C = 8-64 on
every TP, so its wait is spent beside the others' decodes, not behind their prompts.

**The model through the same fit** (Qwen3-32B, C <= 32): the model's own TTFT and TPOT, as
shipped and with the generator launch, decomposed like the measurement: where the model puts
the wait (a per-prompt figure well below one prompt: behind other prompts).

**Same campaign, another engine.** The same fit on the campaign's vLLM 0.12.0 Qwen3-32B H100
grid (OSL 128/512/1024, run months later with another scheduler: chunked prefill, no overlap)
gives the hold in milliseconds beside TensorRT-LLM's at the same TP, ISL and C: an engine
scheduler default would not give both engines the same hold.

**Readings** (``--readings``, ~1 min): the serving model on all 1.0.0rc3 rows as shipped; with
AIConfigurator's TensorRT-LLM 1.0.0rc3 generator launch (ai-dynamo/aiconfigurator efcae124c,
2025-08-11, ``cli/backends/trtllm.py``: agg ``max_num_tokens = bs + isl + 1500``;
``templates/trtllm/dynamo/extra_engine_args.1.0.0rc3.yaml.j2``: ``enable_chunked_prefill``
false, ``free_gpu_memory_fraction`` 0.80; ``disable_overlap_scheduler`` false for agg from
552c24a2e, 2025-08-29), which nothing ties to these rows; and with a closed-loop successor
fetched one iteration later than the simulation has it (the PyTorch executor polls its queue
right after enqueueing the responses, ``_executor_loop_overlap`` at the 1.0 series: a
successor sent on a completion cannot be in the queue at that poll), applied to the cohort
simulation of every engine (``cohort_sim.successor_delay_iterations``). ::

    PYTHONPATH=src python benchmarks/trt_rc3_ttft_hold.py [--readings]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from gap_rows import GAP_SOURCE, gap_rows
from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.planner.serving import cohort_sim, deployment
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import AIC_PREFILL_SLACK, AIC_TRT_FREE_MEMORY_FRACTION
from gpuscale.validation.serving_rows import ServingRow, load

FIT_OSL = (128, 256, 512)
"""The grid's output lengths: a span fit needs all three."""
VLLM_OSL = (128, 512, 1024)
"""The output lengths of the same campaign's vLLM 0.12.0 Qwen3-32B H100 grid."""
HOLD_MAX_C = 64
"""Past C = 64 the token budget and the KV pool add a queue of their own."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanFit:
    """``D = (OSL - 1) x TPOT = span_prefill_ms + decode_ms x (OSL - 1)`` over the OSLs."""

    decode_ms: float
    span_prefill_ms: float
    ttft_ms: float
    """Mean measured TTFT over the output lengths."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    prompt_prefill_ms: float
    """``span_prefill_ms / (C - 1)``: one other prompt's prefill inside a decode span."""
    hold_ms: float
    iterations: float
    tokens_per_iteration: float


def span_fit(points: list[tuple[int, float, float]]) -> SpanFit:
    """Least squares over ``(osl, ttft_ms, tpot_ms)`` points (module docstring)."""
    if len({p[0] for p in points}) < 2:
        raise ValueError("a span fit needs at least two output lengths")
    steps = np.array([p[0] - 1.0 for p in points])
    span = steps * np.array([p[2] for p in points])
    slope, intercept = np.polyfit(steps, span, 1)
    return SpanFit(
        decode_ms=float(slope),
        span_prefill_ms=float(intercept),
        ttft_ms=float(np.mean([p[1] for p in points])),
    )


def hold(fit: SpanFit, concurrency: int, isl: int) -> Hold:
    """The TTFT beyond one prompt's prefill and one decode iteration (module docstring)."""
    if concurrency < 2:
        raise ValueError("a hold needs other requests in the loop (C >= 2)")
    prompt = fit.span_prefill_ms / (concurrency - 1)
    held = fit.ttft_ms - prompt - fit.decode_ms
    its = held / fit.decode_ms
    return Hold(
        prompt_prefill_ms=prompt,
        hold_ms=held,
        iterations=its,
        tokens_per_iteration=isl / its if its > 0 else float("inf"),
    )


Key = tuple[str, int, int, int]
"""(model, TP, ISL, C)."""


def grid(
    rows: list[ServingRow], osls: tuple[int, ...] = FIT_OSL
) -> dict[Key, dict[int, ServingRow]]:
    """The rows by (model, TP, ISL, C), then OSL; only groups with every one of ``osls``."""
    out: dict[Key, dict[int, ServingRow]] = defaultdict(dict)
    for r in rows:
        key = (
            r.raw["model_path"].split("/")[1],
            int(r.raw["tp_size"]),
            int(r.raw["isl"]),
            r.concurrency,
        )
        out[key][int(r.raw["osl"])] = r
    return {k: v for k, v in out.items() if all(o in v for o in osls)}


def vllm_rows() -> list[ServingRow]:
    """The same campaign's aggregated vLLM 0.12.0 Qwen3-32B H100 rows."""
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    return [
        r
        for r in rows
        if GAP_SOURCE in r.raw["silicon_data_source"]
        and r.mode == "agg"
        and (r.raw["backend"], r.raw["backend_version"]) == ("vllm", "0.12.0")
        and r.raw["model_path"] == "Qwen/Qwen3-32B"
        and r.raw["system"] == "h100_sxm"
    ]


def group_hold(by_osl: dict[int, ServingRow], osls: tuple[int, ...], c: int, isl: int) -> Hold:
    fit = span_fit([(o, by_osl[o].ttft_ms, by_osl[o].tpot_ms) for o in osls])
    return hold(fit, c, isl)


@contextmanager
def _captured_iteration_model() -> Iterator[dict[str, Any]]:
    """The IterationModel ``deployment`` builds for the next prediction."""
    box: dict[str, Any] = {}
    orig = deployment._iteration_model

    def grab(*a: Any, **k: Any) -> Any:
        box["it"] = orig(*a, **k)
        return box["it"]

    deployment._iteration_model = grab  # type: ignore[assignment]
    try:
        yield box
    finally:
        deployment._iteration_model = orig  # type: ignore[assignment]


def one_prompt_ms(r: ServingRow) -> float:
    """The model's iteration for the row's prompt alone (no decodes), ms."""
    with _captured_iteration_model() as box:
        infer(r.raw["model_path"], **r.kwargs)
    isl = float(r.raw["isl"])
    ctx = np.array([isl + float(r.raw["osl"]) / 2.0])
    t = box["it"].time_s(np.zeros(1), ctx, np.array([isl]), np.array([isl / 2.0]))
    return float(t[0]) * 1e3


def generator_options(r: ServingRow) -> dict[str, Any]:
    """AIConfigurator's TensorRT-LLM 1.0.0rc3 generator launch for the row (module docstring),
    on top of the row's own engine options."""
    isl = int(r.raw["isl"])
    batch = int(r.raw["batch_size"])
    opts = dict(r.kwargs.get("engine_options", {}))
    opts.update(
        chunked_prefill=False,
        memory_fraction=AIC_TRT_FREE_MEMORY_FRACTION,
        max_num_batched_tokens=batch + isl + AIC_PREFILL_SLACK,
        overlap_scheduler=True,
    )
    if batch < r.concurrency:
        opts["max_num_seqs"] = batch
    return opts


def refetch_delay(eng: EngineProfile) -> int:
    """A closed-loop successor one iteration later than ``successor_delay_iterations``."""
    return 2 if eng.overlap_scheduler else 1


@contextmanager
def _successor_delay(rule: Callable[[EngineProfile], int]) -> Iterator[None]:
    orig = cohort_sim.successor_delay_iterations
    cohort_sim.successor_delay_iterations = rule  # type: ignore[assignment]
    try:
        yield
    finally:
        cohort_sim.successor_delay_iterations = orig  # type: ignore[assignment]


def _errors(rows: list[ServingRow], generator: bool) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in rows:
        kw = dict(r.kwargs)
        if generator:
            kw["engine_options"] = generator_options(r)
        p = infer(r.raw["model_path"], **kw).to_dict()["options"][0]
        e = (p["ttft_ms"] / r.ttft_ms - 1.0, p["tpot_ms"] / r.tpot_ms - 1.0)
        out[r.raw["model_path"].split("/")[1]].append(e)
        out["all"].append(e)
    return out


def readings(rows: list[ServingRow]) -> None:
    cases = (
        ("as shipped", False, cohort_sim.successor_delay_iterations),
        ("generator launch", True, cohort_sim.successor_delay_iterations),
        ("refetch", False, refetch_delay),
        ("generator launch + refetch", True, refetch_delay),
    )
    print("readings: TTFT mean |e| / median signed, TPOT mean |e| (%), per model")
    for name, generator, rule in cases:
        with _successor_delay(rule):
            errs = _errors(rows, generator)
        for model, v in sorted(errs.items()):
            t = [x[0] for x in v]
            s = [x[1] for x in v]
            print(
                f"  {name:27s} {model:24s} n={len(v):3d}  TTFT {100 * np.mean(np.abs(t)):5.1f}"
                f" / {100 * statistics.median(t):+6.1f}  TPOT {100 * np.mean(np.abs(s)):5.1f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--readings", action="store_true", help="also the launch readings (~1 min)")
    args = ap.parse_args()
    rows = gap_rows()
    groups = grid(rows)
    print(
        "span fit per (model, TP, ISL, C): decode iteration b (ms), other prompt's prefill in a"
        " span a/(C-1) over the model's one prompt, TTFT, hold in decode iterations, ISL per"
        " held iteration"
    )
    summary: dict[tuple[str, int], list[float]] = defaultdict(list)
    share: dict[str, list[float]] = defaultdict(list)
    for key in sorted(groups, key=lambda k: (k[0], k[3], k[1], k[2])):
        model, tp, isl, c = key
        if c > HOLD_MAX_C:
            continue
        by_osl = groups[key]
        fit = span_fit([(o, by_osl[o].ttft_ms, by_osl[o].tpot_ms) for o in FIT_OSL])
        h = hold(fit, c, isl)
        alone = one_prompt_ms(by_osl[FIT_OSL[0]])
        print(
            f"  {model:22s} TP{tp} ISL {isl:4d} C {c:3d}  b {fit.decode_ms:6.2f}  prompt"
            f" {h.prompt_prefill_ms:6.1f}/{alone:6.1f} = {h.prompt_prefill_ms / alone:4.2f}"
            f"  TTFT {fit.ttft_ms:7.1f}  hold {h.iterations:5.1f} its  ISL/it"
            f" {h.tokens_per_iteration:6.1f}"
        )
        if c <= 32:
            summary[(model, isl)].append(h.iterations)
            share[model].append(h.hold_ms / fit.ttft_ms)
    print("hold in decode iterations at C = 8-32, median (range) over TP and C")
    for (model, isl), v in sorted(summary.items()):
        mid = statistics.median(v)
        print(
            f"  {model:22s} ISL {isl:4d}  n={len(v):2d}  {mid:5.1f} ({min(v):5.1f}..{max(v):5.1f})"
            f"  ISL/it {isl / mid:6.1f}"
        )
    print("hold / measured TTFT at C = 8-32, median (range) over TP, ISL and C")
    for model, v in sorted(share.items()):
        print(
            f"  {model:22s} n={len(v):2d}  {statistics.median(v):4.2f} ({min(v):4.2f}..{max(v):4.2f})"
        )
    model_through_fit(groups)
    cross_engine(groups)
    if args.readings:
        readings(rows)


def model_through_fit(groups: dict[Key, dict[int, ServingRow]]) -> None:
    """The same fit on the model's own TTFT and TPOT (Qwen3-32B, C <= 32): where the model
    puts the wait, as shipped and with the generator launch, beside the measurement."""
    found: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for key, by_osl in sorted(groups.items()):
        model, _tp, isl, c = key
        if model != "Qwen3-32B" or c > 32:
            continue
        alone = one_prompt_ms(by_osl[FIT_OSL[0]])
        cases: dict[str, list[tuple[int, float, float]]] = {
            "measured": [(o, by_osl[o].ttft_ms, by_osl[o].tpot_ms) for o in FIT_OSL]
        }
        for name, generator in (("model as shipped", False), ("model, generator launch", True)):
            pts = []
            for o in FIT_OSL:
                r = by_osl[o]
                kw = dict(r.kwargs)
                if generator:
                    kw["engine_options"] = generator_options(r)
                p = infer(r.raw["model_path"], **kw).to_dict()["options"][0]
                pts.append((o, p["ttft_ms"], p["tpot_ms"]))
            cases[name] = pts
        for name, pts in cases.items():
            fit = span_fit(pts)
            h = hold(fit, c, isl)
            found[name].append((h.prompt_prefill_ms / alone, h.iterations, h.hold_ms / fit.ttft_ms))
    print("Qwen3-32B C = 8-32 through the same fit, medians: prompt in a span / one prompt (well")
    print("below 1: prompts in the wait), hold (decode iterations), hold / TTFT")
    for name, v in found.items():
        med = [statistics.median(x[i] for x in v) for i in range(3)]
        print(f"  {name:24s} n={len(v):2d}  {med[0]:4.2f}  {med[1]:5.1f}  {med[2]:4.2f}")


def cross_engine(trt: dict[Key, dict[int, ServingRow]]) -> None:
    """The hold of the same campaign's vLLM 0.12.0 Qwen3-32B grid beside TensorRT-LLM's."""
    print("same campaign, Qwen3-32B H100: hold (ms) in vLLM 0.12.0 (OSL 128/512/1024) and")
    print("TensorRT-LLM 1.0.0rc3 (OSL 128/256/512) at the same TP, ISL, C")
    for key, by_osl in sorted(grid(vllm_rows(), VLLM_OSL).items()):
        _model, tp, isl, c = key
        if c > HOLD_MAX_C or key not in trt:
            continue
        v = group_hold(by_osl, VLLM_OSL, c, isl)
        t = group_hold(trt[key], FIT_OSL, c, isl)
        print(
            f"  TP{tp} ISL {isl:4d} C {c:3d}  vLLM {v.hold_ms:6.1f} ms ({v.iterations:5.1f} its)"
            f"  TensorRT-LLM {t.hold_ms:6.1f} ms ({t.iterations:5.1f} its)"
            f"  ratio {v.hold_ms / t.hold_ms:4.2f}"
        )


if __name__ == "__main__":
    main()
