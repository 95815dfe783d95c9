"""Is the missing MoE TTFT of TensorRT-LLM and SGLang engine time or not? (issue 10)

At light load the serving model's TTFT of MoE rows on TensorRT-LLM and SGLang is 150-480 ms
short, a part that does not grow with the prompt (``ttft_light_load.py --excess``). Two readings
predict different things at higher concurrency, and the rows at concurrency >= 8 tell them apart:

- **blocking**: the extra time is spent inside the engine's iteration that carries the prompt
  (an eager forward that cannot overlap its host launches, a host-device synchronisation, slow
  kernels). Every other running request then waits for it too, so TPOT grows with the rate of
  prompts, and a prompt queues behind other prompts' longer prefills;
- **not blocking**: the extra time is on the request's own path (admission, first-token
  delivery) while the engine keeps iterating for the others: TTFT moves by the same amount at
  every load, TPOT does not move.

Each reading is sized on the deployment's own light-load rows (concurrency <= 4: the median of
measured minus modelled TTFT) and applied to all its rows; only the rows above concurrency 4
judge it. A third variant tests one mechanism of the blocking kind without a fitted size: an
eager forward whose host launches add to the GPU work instead of running ahead of it
(``additive``: prompt-carrying iterations last GPU + the engine profile's host floor
``IterationModel.eager_prefill_floor_s`` instead of the larger of the two), as a host-device
synchronisation inside every MoE layer would make it.

None of this is shipped: the sizes are fitted here on purpose, to compare the two forms. It
patches ``IterationModel.time_s`` in this process only.

    PYTHONPATH=src python benchmarks/moe_prefill_probe.py [--engines sglang,trtllm] [--arch moe]
        [--model REGEX] [--ep N] [--by-concurrency] [--share S]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
LIGHT = 4
"""Rows at this concurrency or less size the fitted readings; the rows above judge them."""

_ORIGINAL = IterationModel.time_s
_STATE: dict[str, Any] = {"mode": "base", "add_s": 0.0}


def _patched(
    self: IterationModel,
    n_decode: np.ndarray,
    decode_context: np.ndarray,
    prefill_tokens: np.ndarray,
    prefill_context: np.ndarray,
) -> np.ndarray:
    mode = _STATE["mode"]
    if mode == "blocking" and self.model.is_moe:
        t = _ORIGINAL(self, n_decode, decode_context, prefill_tokens, prefill_context)
        prompt = np.asarray(prefill_tokens, dtype=float) * np.ones_like(t) > 0.0
        return np.asarray(t + np.where(prompt, _STATE["add_s"], 0.0))
    if mode == "additive" and self.model.is_moe and self.eager_prefill_host_s_per_kernel > 0.0:
        gpu_only = dataclasses.replace(self, eager_prefill_host_s_per_kernel=0.0)
        t = _ORIGINAL(gpu_only, n_decode, decode_context, prefill_tokens, prefill_context)
        prompt = np.asarray(prefill_tokens, dtype=float) * np.ones_like(t) > 0.0
        return np.asarray(t + np.where(prompt, self.eager_prefill_floor_s(), 0.0))
    return _ORIGINAL(self, n_decode, decode_context, prefill_tokens, prefill_context)


def _arch(model: str) -> str:
    try:
        return "moe" if catalog.model(model).is_moe else "dense"
    except InputError:
        return "?"


def _deployment(row: ServingRow) -> tuple[str, ...]:
    r = row.raw
    return (r["backend"], r["model_path"], r["system"], r["tp_size"], r["moe_ep_size"])


def _predict(row: ServingRow, mode: str, add_s: float = 0.0) -> tuple[float, float]:
    _STATE.update(mode=mode, add_s=add_s)
    out = infer(row.raw["model_path"], **row.kwargs).to_dict()["options"][0]
    _STATE.update(mode="base", add_s=0.0)
    return float(out["ttft_ms"]), float(out["tpot_ms"])


def _bucket(c: int) -> str:
    return "5-16" if c <= 16 else "17-64" if c <= 64 else "65+"


def _shared(row: ServingRow, gap_ms: float, share: float) -> tuple[float, float]:
    """``share`` of the gap spent inside the prompt's iterations, the rest on its own path."""
    ttft, tpot = _predict(row, "blocking", share * gap_ms * 1e-3)
    return ttft + (1.0 - share) * gap_ms, tpot


def _err(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="sglang,trtllm")
    ap.add_argument("--arch", default="moe", choices=["moe", "dense"])
    ap.add_argument(
        "--share",
        type=float,
        default=1.0,
        help="share of the gap the blocking variant puts inside prompt iterations (the rest is "
        "added to TTFT only)",
    )
    ap.add_argument("--ep", default="", help="only rows with this expert-parallel size")
    ap.add_argument("--model", default="", help="only models whose path matches this regex")
    ap.add_argument(
        "--by-concurrency", action="store_true", help="break the judged rows down by concurrency"
    )
    args = ap.parse_args()
    engines = set(args.engines.split(","))
    IterationModel.time_s = _patched  # type: ignore[method-assign]

    rows = [
        row
        for row in load(ROWS)
        if row.expressible
        and row.raw["mode"] == "agg"
        and row.raw["backend"] in engines
        and _arch(row.raw["model_path"]) == args.arch
        and re.search(args.model, row.raw["model_path"])
        and (not args.ep or row.raw["moe_ep_size"] == args.ep)
    ]
    base = {id(row): _predict(row, "base") for row in rows}
    # Size each deployment's extra time on its own light-load rows.
    gaps: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for row in rows:
        if row.concurrency <= LIGHT:
            gaps[_deployment(row)].append(float(row.raw["silicon_ttft_ms"]) - base[id(row)][0])
    add_ms = {dep: max(statistics.median(g), 0.0) for dep, g in gaps.items()}
    judged = [row for row in rows if row.concurrency > LIGHT and _deployment(row) in add_ms]

    variants: dict[str, Callable[[ServingRow], tuple[float, float]]] = {
        "model as is": lambda row: base[id(row)],
        "not blocking (TTFT + light-load gap)": lambda row: (
            base[id(row)][0] + add_ms[_deployment(row)],
            base[id(row)][1],
        ),
        f"blocking ({args.share:.0%} of gap in prompt iterations)": lambda row: _shared(
            row, add_ms[_deployment(row)], args.share
        ),
        "additive eager host (no fit)": lambda row: _predict(row, "additive"),
    }
    print(
        f"{len(rows)} aggregated {args.arch} rows of {sorted(engines)}; {len(add_ms)} deployments "
        f"with rows at concurrency <= {LIGHT} (median gap {statistics.median(add_ms.values()):.0f}"
        f" ms); judged on the {len(judged)} rows above {LIGHT}"
    )
    print(f"{'variant':42} {'engine':13} {'n':>4}  TTFT mean |err| bias   TPOT mean |err| bias")
    for name, fn in variants.items():
        by_engine: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for row in judged:
            t, p = fn(row)
            key = row.raw["backend"]
            if args.by_concurrency:
                key += f" c{_bucket(row.concurrency)}"
            by_engine[key].append(
                (
                    _err(t, float(row.raw["silicon_ttft_ms"])),
                    _err(p, float(row.raw["silicon_tpot_ms"])),
                )
            )
        for eng, errs in sorted(by_engine.items()):
            te = [e[0] for e in errs]
            pe = [e[1] for e in errs]
            print(
                f"{name:42} {eng:13} {len(errs):4}  {100 * statistics.mean(map(abs, te)):9.1f}% "
                f"{100 * statistics.median(te):+5.0f}%  {100 * statistics.mean(map(abs, pe)):9.1f}%"
                f" {100 * statistics.median(pe):+5.0f}%"
            )
    print("\nper deployment (gap sized at concurrency <= 4, ms):")
    for dep, ms in sorted(add_ms.items()):
        print(f"  {' '.join(dep):70} {ms:7.1f}")


if __name__ == "__main__":
    main()
