"""Eager prompt iterations: does the host's launch time overlap the GPU work (max) or add to it?

Diagnostic only: the model is unchanged. TensorRT-LLM and SGLang run iterations that carry prompt
tokens eagerly (engine profile ``prefill_cuda_graph: false``); the serving model prices such an
iteration as ``max(host launches, GPU work)`` (``IterationModel.parts_s``, the ``host_floor``
part), on the reading that PyTorch launches run ahead of the GPU asynchronously. Its size comes
from one datum, sgl-project/sglang PR #12160: a DeepSeek-V3 prefill of one new token took 82.6 ms
eagerly and 23.1 ms replaying a CUDA graph. Read with ``max``, the host spends 82.6 ms; read as
host + GPU, 82.6 - 23.1 = 59.5 ms. The datum cannot tell the two apart (one token); the way eager
time grows with the prompt can:

- additive: FastDeploy PR #3459 (PaddlePaddle, eager against prefill-CUDA-graph forward):
  21.26 / 9.28 ms at ~10 prompt tokens, 36.48 / 21.37 ms at ~480: the eager overhead, 12.0 then
  15.1 ms, stays while the GPU work grows past it (``max`` would give ~21.4 ms at 480 tokens);
- overlapping: wejoncy/sfllm PR #46 (Qwen3-4B, 22 requests): eager 16.61 / 16.37 ms against graph
  5.69 / 13.73 ms at 129 / 513 tokens: the overhead shrinks as the GPU work grows (``max``).

This script prices every public serving row three ways and prints the headline errors of each:
``max`` (as shipped), ``sum`` (the profile's host floor added to the GPU work) and ``sum, host
from the datum`` (the floor scaled by (82.6 - 23.1) / 82.6, the datum read as host + GPU). It
patches ``IterationModel.parts_s`` in its own process; engines without an eager floor (vLLM) are
untouched. In-sample: ``data/validation/serving`` (benchmarks/validate_serving.py); held out:
InferenceX's DeepSeek-R1 records (benchmarks/validate_serving_unseen.py).

    PYTHONPATH=src python benchmarks/eager_floor_form.py [--limit N]   # ~2.5 min
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validate_serving_unseen as unseen
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct
from validate_serving import ROWS, predict

EAGER_FORWARD_MS = 82.6
"""sgl-project/sglang PR #12160: DeepSeek-V3 prefill of 1 new token, eager ("forward cost")."""
GRAPH_FORWARD_MS = 23.1
"""The same forward replaying a prefill CUDA graph (PR #12160)."""
DATUM_HOST_SHARE = (EAGER_FORWARD_MS - GRAPH_FORWARD_MS) / EAGER_FORWARD_MS
"""Share of the profile's host floor left when the datum is read as host + GPU."""

FORMS: dict[str, float | None] = {
    "max (shipped)": None,
    "sum": 1.0,
    "sum, host from the datum": DATUM_HOST_SHARE,
}
"""Form -> scale on the host floor added to the GPU work (None: the shipped max)."""

HELD_OUT_GROUPS = (
    "all|all|all",
    "all|all|agg",
    "all|all|disagg",
    f"{unseen.NEW_HARDWARE}|all|all",
    "all|sglang|agg",
    "all|sglang|disagg",
    "all|trtllm|agg",
    "all|trtllm|disagg",
)


def additive_parts(scale: float) -> Any:
    """``IterationModel.parts_s`` with the eager host floor added to the GPU work, scaled."""
    shipped = IterationModel.parts_s

    def parts_s(
        self: IterationModel,
        n_decode: np.ndarray,
        decode_context: np.ndarray,
        prefill_tokens: np.ndarray,
        prefill_context: np.ndarray,
    ) -> dict[str, np.ndarray]:
        if self.eager_prefill_host_s_per_kernel <= 0.0:
            return shipped(self, n_decode, decode_context, prefill_tokens, prefill_context)
        graphs = dataclasses.replace(self, eager_prefill_host_s_per_kernel=0.0)
        parts = dict(shipped(graphs, n_decode, decode_context, prefill_tokens, prefill_context))
        eager = np.asarray(prefill_tokens, dtype=float) * np.ones_like(parts["total"]) > 0.0
        floor = np.where(eager, scale * self.eager_prefill_floor_s(), 0.0)
        parts["host_floor"] = floor
        parts["total"] = parts["total"] + floor
        return parts

    return parts_s


@contextmanager
def form(scale: float | None) -> Iterator[None]:
    shipped = IterationModel.parts_s
    if scale is not None:
        IterationModel.parts_s = additive_parts(scale)  # type: ignore[method-assign]
    try:
        yield
    finally:
        IterationModel.parts_s = shipped  # type: ignore[method-assign]


def in_sample(limit: int = 0) -> dict[str, dict[str, float]]:
    """Mean and median |error| of TTFT and TPOT per engine and mode on the expressible rows."""
    rows = [r for r in distinct(load(ROWS)) if r.expressible]
    if limit:
        rows = rows[:: max(len(rows) // limit, 1)]
    errs: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        o = predict(row)
        for g in (f"all {row.mode}", f"{row.engine} {row.mode}"):
            errs[g]["ttft"].append(abs(o["ttft_ms"] - row.ttft_ms) / row.ttft_ms)
            errs[g]["tpot"].append(abs(o["tpot_ms"] - row.tpot_ms) / row.tpot_ms)
    return {
        g: {
            "n": len(e["ttft"]),
            **{
                f"{k}_{f.__name__}": 100 * f(e[k])
                for k in ("ttft", "tpot")
                for f in (statistics.fmean, statistics.median)
            },
        }
        for g, e in sorted(errs.items())
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=0, help="every k-th row, about N of each set")
    args = ap.parse_args()
    results = {}
    for name, scale in FORMS.items():
        with form(scale):
            results[name] = (in_sample(args.limit), unseen.run([], args.limit)["groups"])
    print(f"host share of the datum read as host + GPU: {DATUM_HOST_SHARE:.3f}")
    print("\nin-sample (data/validation/serving): TTFT mean/median | TPOT mean/median, % error")
    for group in results["max (shipped)"][0]:
        for name in FORMS:
            s = results[name][0][group]
            print(
                f"  {group:14s} n={s['n']:4d} {name:26s} {s['ttft_fmean']:5.1f} "
                f"{s['ttft_median']:5.1f} | {s['tpot_fmean']:5.1f} {s['tpot_median']:5.1f}"
            )
    print(
        "\nheld out (InferenceX DeepSeek-R1): TTFT vs mean mean/median/bias | TTFT p50 vs "
        "median | TPOT vs mean, %"
    )
    for group in HELD_OUT_GROUPS:
        for name in FORMS:
            s = results[name][1].get(group)
            if not s:
                continue
            cols = [
                " ".join(
                    f"{s[c][k]:6.1f}" for k in ("mean_abs_pct", "median_abs_pct", "median_bias_pct")
                )
                for c in ("ttft_vs_mean", "ttft_p50_vs_median", "tpot_vs_mean")
            ]
            print(f"  {group:22s} n={s['n']:4d} {name:26s} " + " | ".join(cols))


if __name__ == "__main__":
    main()
