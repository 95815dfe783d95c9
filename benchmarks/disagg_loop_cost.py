"""The disaggregated closed loop followed request by request: one reading from fixed to varying
lengths, and a cost bounded in the run's length (``planner/serving/disagg_closed_loop.py``).

Prints, for the H200 DeepSeek-R1 1k/1k deployment of ``c64_ctx1_gen9_tep8_batch256`` (one TP8
EP8 attention-DP 8 context worker, nine TP8 EP8 generation workers, decode batch 256):

1. mean TTFT against the client's length spread (CV 0 to 0.0645) at C = 64 and 576: one
   reading, the fixed-length run its limit (review-b found 390 ms at CV 0 and 1,435 at 1e-6);
2. the per-round mean TTFT of a 40-round run followed whole (CV 0.0645, C = 576): how many
   rounds the re-bunched waves take to settle (``SETTLE_ROUNDS``);
3. against the run's length (``num_requests`` up to the accepted 10^6): mean TTFT, requests and
   prefill iterations followed (counted), seconds per prediction;
4. seconds per prediction over the validation set's disaggregated rows;
5. the edge loads a fuzz found slow: requests and prefill iterations followed, seconds.

    PYTHONPATH=src python benchmarks/disagg_loop_cost.py
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpuscale.planner.serving.deployment as deployment
from gpuscale.api.serving import infer
from gpuscale.planner.serving.disagg_closed_loop import ClosedLoopTTFT, PrefillStage
from gpuscale.validation.serving_rows import load
from validate_serving import ROWS, predict

KW: dict[str, Any] = {
    "gpu": "h200-sxm",
    "engine": "tensorrt-llm",
    "weights": "fp8",
    "input_len": 922,
    "output_len": 922,
    "prefill_workers": 1,
    "prefill_tp": 8,
    "prefill_ep": 8,
    "prefill_attention_dp": 8,
    "decode_workers": 9,
    "decode_tp": 8,
    "decode_ep": 8,
    "decode_attention_dp": 1,
    "decode_batch": 256,
    "kv_dtype": "fp8",
}
SA_BENCH_CV = 0.0645
"""sa-bench's lengths, uniform over [0.8 L, L]: standard deviation 0.2 L / sqrt(12) over the
mean 0.9 L."""


def _followed(conc: int, num_requests: int, cv: float) -> tuple[float, int, int, float]:
    """(mean TTFT ms, requests followed, prefill iterations followed, seconds)."""
    return _counted(
        "deepseek-r1",
        {**KW, "concurrency": conc, "num_requests": num_requests, "input_cv": cv, "output_cv": cv},
    )


EDGES: dict[str, tuple[str, dict[str, Any]]] = {
    # A one-token budget: every 1,024-token prompt is 1,024 chunks on one TP16 prefill worker.
    "budget 1 token, 1024/1, C 512": (
        "deepseek-r1",
        dict(
            gpu="gb200", engine="sglang", weights="int8_wo", input_len=1024, output_len=1,
            concurrency=512, prefill_workers=4, prefill_tp=16, decode_workers=1, decode_tp=4,
            engine_options={"max_num_batched_tokens": 1},
        ),
    ),
    # 50,000 clients, 83k-token prompts in 11 chunks each.
    "83k/8.3k, C 50,000": (
        "gpt-oss-120b",
        dict(
            gpu="h100-pcie", engine="vllm", weights="fp8", input_len=83378, output_len=8300,
            concurrency=50000, prefill_workers=1, decode_workers=2, decode_batch=512,
            decode_tp=4, decode_ep=4, decode_attention_dp=4,
        ),
    ),
}  # fmt: skip
"""Loads a fuzz of the API found running for a minute (2026-12-03): 12.6M and 13M prefill
iterations followed one by one."""


def _counted(model: str, kw: dict[str, Any]) -> tuple[float, int, int, float]:
    """(mean TTFT ms, requests followed, prefill iterations priced, seconds) of one answer."""
    seen: list[int] = []
    calls = [0]
    real = deployment.simulate

    def spy(**kw: Any) -> ClosedLoopTTFT:
        stage: PrefillStage = kw["prefill"]
        inner = stage.iteration_s

        def counted(tokens: float) -> float:
            calls[0] += 1
            return inner(tokens)

        seen.append(len(kw["input_lens"]))
        return real(**{**kw, "prefill": dataclasses.replace(stage, iteration_s=counted)})

    deployment.simulate = spy  # type: ignore[assignment]
    try:
        t = time.perf_counter()
        out = infer(model, **kw).to_dict()["options"][0]
        dt = time.perf_counter() - t
    finally:
        deployment.simulate = real  # type: ignore[assignment]
    return float(out["ttft_ms"]), seen[0], calls[0], dt


def _rounds(conc: int, rounds: int, cv: float) -> np.ndarray:
    """Per-round mean TTFT (ms) of a run of ``rounds`` rounds followed whole."""
    got: list[ClosedLoopTTFT] = []
    real = deployment.simulate

    def grab(**kw: Any) -> ClosedLoopTTFT:
        sim = real(**kw)
        got.append(sim)
        return sim

    deployment.simulate = grab  # type: ignore[assignment]
    try:
        # a run no longer than the rounds followed is followed whole
        infer(
            "deepseek-r1",
            **KW,
            concurrency=conc,
            num_requests=rounds * conc,
            input_cv=cv,
            output_cv=cv,
        )
    finally:
        deployment.simulate = real  # type: ignore[assignment]
    sim = got[0]
    if len(sim.ttft_s) < rounds * conc:
        # longer than SETTLE_ROUNDS: follow it whole with the same inputs
        raise SystemExit("pass fewer rounds than the whole-run limit")
    return 1e3 * sim.ttft_s.reshape(rounds, conc).mean(axis=1)


def main() -> None:
    infer("llama3.1-8b", gpu="h100-sxm", concurrency=1)  # warm the catalog and profile caches
    print("1. mean TTFT (ms) against the length spread, num_requests 5 C (sa-bench)")
    cvs = (0.0, 1e-6, 1e-4, 1e-3, 1e-2, SA_BENCH_CV)
    print(f"   {'C':>5} " + " ".join(f"{'CV ' + format(cv, 'g'):>10}" for cv in cvs))
    for conc in (64, 576):
        row = [_followed(conc, 5 * conc, cv)[0] for cv in cvs]
        print(f"   {conc:5d} " + " ".join(f"{v:10.0f}" for v in row))
    print()
    conc = 576
    print(f"2. per-round mean TTFT (ms), C = {conc}, CV {SA_BENCH_CV}, 24 rounds followed whole")
    means = _rounds(conc, 24, SA_BENCH_CV)
    print("   " + " ".join(f"{v:.0f}" for v in means))
    print()
    print(f"3. against the run's length, C = {conc}, CV {SA_BENCH_CV}")
    print(f"   {'requests':>9} {'TTFT ms':>8} {'followed':>9} {'iterations':>10} {'s':>6}")
    for n in (5 * conc, 10 * conc, 24 * conc, 10**5, 10**6):
        ttft, followed, iterations, dt = _followed(conc, n, SA_BENCH_CV)
        print(f"   {n:9d} {ttft:8.1f} {followed:9d} {iterations:10d} {dt:6.3f}")
    print()
    rows = [r for r in load(ROWS) if r.expressible and r.raw["mode"] == "disagg"]
    times = []
    for row in rows:
        t = time.perf_counter()
        predict(row)
        times.append(time.perf_counter() - t)
    times.sort()
    print(
        f"4. disaggregated validation rows ({len(times)}): mean {1e3 * statistics.mean(times):.0f} "
        f"ms, median {1e3 * statistics.median(times):.0f} ms, max {1e3 * times[-1]:.0f} ms"
    )
    print()
    print("5. edge loads: repeated full-budget chunks priced at once, many clients followed for")
    print("   fewer rounds (MOST_FOLLOWED)")
    print(f"   {'load':<30} {'TTFT s':>10} {'followed':>9} {'iterations':>10} {'s':>6}")
    for name, (model, kw) in EDGES.items():
        ttft, followed, iterations, dt = _counted(model, kw)
        print(f"   {name:<30} {ttft / 1e3:10.1f} {followed:9d} {iterations:10d} {dt:6.2f}")


if __name__ == "__main__":
    main()
