"""What-if, not shipped: TensorRT-LLM's attention-DP balance releases one iteration at a time.

``PyExecutor._schedule`` balances the *scheduled* context requests (``_balance_adp_requests`` is
given the micro-batch scheduler's output, already cut to ``max_num_tokens``): a release runs
every rank's scheduled prompts in one iteration, and a rank's prompts that did not fit its
budget stay held until the next release (the next iteration in which every rank has one, or the
``timeout_iters`` counter). ``adp_lockstep.lockstep_mix`` instead runs a release for as many
consecutive iterations as the fullest rank needs (``E[max_r ceil(X_r / c)]``). This prints the
aggregated TensorRT-LLM attention-DP rows with the release as one iteration, the prompt
iterations at the larger of one per release cycle and ``a / c`` (each rank's prompts per
iteration over the prompts its budget takes: the flow a release of at most ``c`` per rank must
carry), the release's own prompt its only wait.

    PYTHONPATH=src python benchmarks/adp_release_whatif.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.planner.serving import adp_lockstep, steady_state

sys.path.insert(0, str(Path(__file__).resolve().parent))


def one_iteration_release(
    it: IterationModel,
    eng: EngineProfile,
    n: np.ndarray,
    ctx: np.ndarray,
    half: np.ndarray,
    new_tokens: float,
    prompts_per_iteration: np.ndarray,
    mean: np.ndarray,
    with_prompt: np.ndarray,
    decode_only: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``adp_lockstep.lockstep_mix`` with each balanced release one iteration (see above)."""
    shipped = adp_lockstep.lockstep_mix(
        it, eng, n, ctx, half, new_tokens, prompts_per_iteration, mean, with_prompt, decode_only
    )
    if not adp_lockstep.in_step(it) or new_tokens <= 0.0 or eng.adp_balance_timeout_iters <= 0:
        return shipped
    ranks = it.par.attention_dp
    a = np.asarray(prompts_per_iteration, dtype=float)
    share = np.clip((mean - decode_only) / np.maximum(with_prompt - decode_only, 1e-30), 0.0, 1.0)
    free = (1.0 - (1.0 - share) ** ranks) * (with_prompt - decode_only) + decode_only
    cycle = adp_lockstep.balance_cycle_iterations(a, ranks, float(eng.adp_balance_timeout_iters))
    room = float(eng.max_num_batched_tokens) - n * it.queries
    fits = np.maximum(np.floor(room / max(new_tokens, 1.0)), 1.0)
    fullest = np.minimum(np.maximum(adp_lockstep.expected_max_poisson(a * cycle, ranks), 1.0), fits)
    release = np.asarray(it.time_s(n, ctx, fullest * new_tokens, half), dtype=float)
    per_release = np.clip(np.maximum(1.0 / cycle, a / fits), 0.0, 1.0)
    balanced = (1.0 - per_release) * decode_only + per_release * release
    busy = (1.0 - np.exp(-n)) ** ranks
    t = busy * balanced + (1.0 - busy) * free
    return np.asarray(t), np.asarray(busy * release + (1.0 - busy) * with_prompt)


def main() -> None:
    from gpuscale.validation.serving_rows import load
    from gpuscale.validation.serving_runs import distinct
    from validate_serving import ROWS, predict

    rows = [
        r
        for r in distinct(load(ROWS))
        if r.expressible
        and r.raw["mode"] == "agg"
        and r.raw["backend"] == "trtllm"
        and r.kwargs.get("attention_dp", 1) > 1
    ]
    shipped = [predict(r) for r in rows]
    orig = steady_state.lockstep_mix
    steady_state.lockstep_mix = one_iteration_release  # type: ignore[assignment]
    try:
        what_if = [predict(r) for r in rows]
    finally:
        steady_state.lockstep_mix = orig  # type: ignore[assignment]
    print("isl x osl  C     TTFT measured  shipped  what-if   TPOT measured shipped what-if")
    for r, b, w in zip(rows, shipped, what_if, strict=True):
        print(
            f"{r.raw['isl']:>5}x{r.raw['osl']:<5} {r.concurrency:>4} {r.ttft_ms:14.0f} "
            f"{b['ttft_ms']:8.0f} {w['ttft_ms']:8.0f} {r.tpot_ms:14.1f} {b['tpot_ms']:7.1f} "
            f"{w['tpot_ms']:7.1f}"
        )

    def err(preds: list[dict[str, float]], key: str) -> float:
        return statistics.mean(
            abs(p[key] / getattr(r, key) - 1.0) * 100.0 for r, p in zip(rows, preds, strict=True)
        )

    for key in ("ttft_ms", "tpot_ms"):
        print(f"{len(rows)} rows {key}: mean |error| {err(shipped, key):.1f}% shipped, "
              f"{err(what_if, key):.1f}% what-if")  # fmt: skip


if __name__ == "__main__":
    main()
