"""The shape of the TensorRT-LLM context servers' TTFT miss: a host floor per iteration, or a
slower iteration at every batch size?

Diagnostic only: it changes nothing in the model, and none of the values it tries is shipped.
Two readings of the DeepSeek-R1 H200 rows (1k prompts: disaggregated on attention-DP 8 context
servers, aggregated TP8; 8k prompts: disaggregated on TP8 context servers):

1. **A host floor.** TensorRT-LLM runs prompt-carrying iterations eagerly (engine profile
   ``prefill_cuda_graph: false``); a host-bound forward lasts max(host launches, GPU work)
   (``IterationModel.eager_prefill_floor_s``). The profile borrows SGLang's 60 us per counted
   kernel. The script tries larger per-kernel host times (not sourced: a scan) and prints the
   median measured/modelled TTFT of each group. A floor only lifts iterations whose GPU work is
   below it: light-load 1k prompts, not 8k prompts nor full 1k batches.
2. **A factor on the context servers' iteration.** For every disaggregated run, the factor k on
   the prefill workers' iteration time (``IterationModel.time_s``, all of it) at which the
   modelled mean TTFT equals the measured one, found by bisection. A floor would give k falling
   with load; a slower iteration, one k at every load.

    PYTHONPATH=src python benchmarks/disagg_ctx_shape.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuscale.planner.serving import deployment
from gpuscale.validation.serving_rows import ServingRow, load
from validate_serving import ROWS, predict

HOST_US = (60.0, 120.0, 180.0, 240.0)
"""Per-kernel host times tried (us); 60 is the shipped profile's (SGLang PR #12160's 82.6 ms)."""
LIGHT = 150
"""Client concurrency up to which a run is called light here (one prompt per iteration and
rank, mostly: C = 36-144 on eight attention-DP ranks)."""

_orig = deployment._iteration_model


@contextmanager
def _patched(factory: Callable[..., Any]) -> Iterator[None]:
    deployment._iteration_model = factory  # type: ignore[assignment]
    try:
        yield
    finally:
        deployment._iteration_model = _orig  # type: ignore[assignment]


def _host_floor(us: float) -> Callable[..., Any]:
    def make(*args: Any, **kw: Any) -> Any:
        it = _orig(*args, **kw)
        if it.eager_prefill_host_s_per_kernel > 0.0:
            it = dataclasses.replace(it, eager_prefill_host_s_per_kernel=us * 1e-6)
        return it

    return make


class _Scaled:
    """An iteration model whose every iteration lasts ``k`` times as long."""

    def __init__(self, it: Any, k: float) -> None:
        self._it, self._k = it, k

    def time_s(self, *args: Any) -> np.ndarray:
        return np.asarray(self._it.time_s(*args)) * self._k

    def __getattr__(self, name: str) -> Any:
        return getattr(self._it, name)


def _prefill_scaled(k: float) -> Callable[..., Any]:
    calls = [0]

    def make(*args: Any, **kw: Any) -> Any:
        it = _orig(*args, **kw)
        # disaggregated_curves builds the prefill workers' model first, then the decode one; the
        # memory checks (kv_pool) build models of their own, which price no iteration.
        if sys._getframe(1).f_code.co_name != "disaggregated_curves":
            return it
        calls[0] += 1
        return _Scaled(it, k) if calls[0] == 1 else it

    return make


def _ttft(row: ServingRow, factory: Callable[..., Any] | None = None) -> float:
    if factory is None:
        return float(predict(row)["ttft_ms"])
    with _patched(factory):
        return float(predict(row)["ttft_ms"])


def factor(row: ServingRow) -> float:
    """k on the prefill workers' iteration at which the modelled TTFT is the measured one."""
    lo, hi = 0.25, 8.0
    if _ttft(row, _prefill_scaled(hi)) < row.ttft_ms:
        return float("inf")
    if _ttft(row, _prefill_scaled(lo)) > row.ttft_ms:
        return float("nan")
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        if _ttft(row, _prefill_scaled(mid)) < row.ttft_ms:
            lo = mid
        else:
            hi = mid
    return (lo * hi) ** 0.5


def _group(row: ServingRow) -> str | None:
    r = row.raw
    if r["backend"] != "trtllm" or r["system"] != "h200_sxm" or "DeepSeek" not in r["model_path"]:
        return None
    if r["mode"] == "agg":
        return f"agg    {r['isl']:>4} C<=64" if row.concurrency <= 64 else None
    layout = f"prefill TP{row.kwargs['prefill_tp']}/ADP{row.kwargs['prefill_attention_dp']}"
    load_class = f"C<={LIGHT}" if row.concurrency <= LIGHT else f"C>{LIGHT}"
    return f"disagg {r['isl']:>4} {load_class:6} {layout}"


def main() -> None:
    seen: set[tuple[object, ...]] = set()
    groups: dict[str, list[ServingRow]] = defaultdict(list)
    for row in load(ROWS):
        if not row.expressible:
            continue
        key = (row.raw["mode"], row.raw["isl"], row.raw["osl"], row.concurrency, row.ttft_ms)
        name = _group(row)
        if name is None or key in seen:
            continue
        seen.add(key)
        groups[name].append(row)

    print("1. median measured/modelled TTFT with a TensorRT-LLM eager host floor of H us/kernel")
    print(f"{'group':40} {'runs':>4} " + " ".join(f"{f'H={h:.0f}':>7}" for h in HOST_US))
    for name in sorted(groups):
        rows = groups[name]
        cols = [
            statistics.median(r.ttft_ms / _ttft(r, _host_floor(h)) for r in rows) for h in HOST_US
        ]
        print(f"{name:40} {len(rows):>4} " + " ".join(f"{c:7.2f}" for c in cols))

    print("\n2. factor k on the prefill workers' iteration that matches each disaggregated run")
    print(f"{'group':40} {'C':>5} {'meas ms':>8} {'model ms':>8} {'k':>6}")
    ks: dict[str, list[float]] = defaultdict(list)
    for name in sorted(g for g in groups if g.startswith("disagg")):
        for row in sorted(groups[name], key=lambda r: r.concurrency):
            k = factor(row)
            ks[name].append(k)
            print(f"{name:40} {row.concurrency:>5} {row.ttft_ms:8.0f} {_ttft(row):8.0f} {k:6.2f}")
    print("\nmedian k (min-max) per group:")
    for name, values in sorted(ks.items()):
        finite = [v for v in values if np.isfinite(v)]
        if finite:
            print(
                f"  {name:40} {statistics.median(finite):5.2f} "
                f"({min(finite):.2f}-{max(finite):.2f}), {len(finite)} of {len(values)} runs"
            )


if __name__ == "__main__":
    main()
