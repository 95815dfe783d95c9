"""The prefill workers' throughput where a held-out disaggregated run queued at them, against the
model's capacity for the same workers.

A closed-loop run whose measured median TTFT is many times the model's prefill of one prompt
alone queued before its first token; when that queue is at the prefill workers, the client's
request rate times the prompt length is the rate the prefill workers sustained
(Little's law over the whole run: the client's output tokens/s over the output length). The
model's capacity is one full-budget prefill iteration per attention rank, back to back: the
prompt tokens the launch lets one rank batch from a deep queue (token budget, prompt cap and
SGLang's ``--max-prefill-tokens`` rule, as the closed-loop simulation deals them) over
that iteration's time (``IterationModel.time_s``, attention over half the mean prompt), times
the ranks and workers. A measured/modelled ratio well under 1 where the decode side has room
says the model's prefill iteration is too fast at that size; a ratio near 1 says the regime is
priced. Diagnostic only: the model is not changed or fitted here.

    PYTHONPATH=src python benchmarks/prefill_saturation.py [--min-queue 10] [--isl 8192]

Reads InferenceX's records (``data/validation/serving/inferencex_api_dsr1.csv``); one ``infer``
call per disaggregated record that states a client output rate (of the prompt length asked),
about 15 s at 8k.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

import gpuscale.planner.serving.deployment as deployment
from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.planner.serving.steady_state import prompts_under_prefill_limit
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import (
    API_FILE,
    distinct_measurements,
    load_records,
    read_records,
)
from gpuscale.validation.inferencex_tables import load_tables

SERVING = DATA_DIR / "serving"


@contextmanager
def _prefill_capacity(into: dict[str, float]) -> Iterator[None]:
    """While inside, every closed-loop disaggregated prediction records its prefill workers'
    full-budget iteration into ``into`` (tokens per rank, seconds, prompt tokens/s of all
    workers, and one prompt alone's seconds)."""
    original = deployment.closed_loop_ttft

    def recording(it_p: Any, eng_p: Any, prefill: Any, work: Any, *args: Any, **kw: Any) -> Any:
        budget = float(args[4] if len(args) > 4 else kw["rank_tokens"])
        rank_tokens = _rank_fill(
            budget, eng_p.max_prefill_tokens, prefill.max_batch or eng_p.max_num_seqs,
            float(work.input_len), eng_p.chunked_prefill,
        )  # fmt: skip
        z, half = np.zeros(1), np.array([work.input_len / 2.0])
        full = float(it_p.time_s(z, z, np.array([rank_tokens]), half)[0])
        one = float(it_p.time_s(z, z, np.array([float(work.input_len)]), half)[0])
        ranks = prefill.par.attention_dp * prefill.workers
        into.update(
            rank_tokens=rank_tokens, iteration_s=full, one_prompt_s=one,
            tokens_per_s=rank_tokens / full * ranks,
        )  # fmt: skip
        return original(it_p, eng_p, prefill, work, *args, **kw)

    deployment.closed_loop_ttft = recording  # type: ignore[assignment]
    try:
        yield
    finally:
        deployment.closed_loop_ttft = original


def _rank_fill(budget: float, limit: int | None, cap: int, prompt: float, chunked: bool) -> float:
    """Prompt tokens one rank takes into an iteration from a deep queue of equal prompts, as the
    closed-loop simulation deals them (``disagg_closed_loop``): up to ``cap`` prompts, a later
    one only while SGLang's ``--max-prefill-tokens`` rule lets it start
    (``steady_state.prompts_under_prefill_limit``); under chunked prefill the budget is filled
    with a chunk of the last, without it whole prompts within the budget (the first always)."""
    by_limit = (
        math.inf
        if limit is None
        else float(prompts_under_prefill_limit(float(limit), prompt, first=True))
    )
    prompts = min(float(cap), by_limit)
    if chunked:
        return min(budget, prompts * prompt)
    return max(min(prompts, math.floor(budget / prompt)), 1.0) * prompt


def _group(rec: dict[str, str]) -> str:
    """``hardware framework precision spec prefill-stage ISL`` of an InferenceX record, the
    prefill stage as its labels state it (``{workers}xtp{tp}ep{ep}``, ``dp`` with attention DP)."""
    dp = "dp" if rec["prefill_dp_attention"] == "true" else ""
    stage = f"{rec['prefill_num_workers']}xtp{rec['prefill_tp']}ep{rec['prefill_ep']}{dp}"
    fields = (rec["hardware"], rec["framework"], rec["precision"], rec["spec_method"])
    return " ".join([*fields, stage, rec["isl"]])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--min-queue",
        type=float,
        default=10.0,
        help="measured median TTFT over one prompt's modelled prefill (default 10)",
    )
    ap.add_argument("--isl", type=int, default=0, help="only this prompt length (1024, 8192)")
    args = ap.parse_args()
    rows = read_records(load_records(SERVING / API_FILE), load_tables(SERVING))
    ratios: dict[str, list[float]] = defaultdict(list)
    rates: dict[str, list[tuple[float, float]]] = defaultdict(list)
    cap: dict[str, float] = {}
    for row in distinct_measurements(rows):
        kw = row.kwargs
        if not row.expressible or kw.get("prefill_workers") is None:
            continue
        if args.isl and row.record["isl"] != str(args.isl):
            continue
        measured = row.measured
        if not measured.get("output_tokens_per_s") or not measured.get("ttft_ms_p50"):
            continue
        cap.clear()
        with _prefill_capacity(cap):
            try:
                infer(row.model, **kw)
            except InputError:
                continue
        if not cap or measured["ttft_ms_p50"] < args.min_queue * cap["one_prompt_s"] * 1e3:
            continue
        key = _group(row.record)
        prompt_rate = measured["output_tokens_per_s"] / kw["output_len"] * kw["input_len"]
        ratios[key].append(prompt_rate / cap["tokens_per_s"])
        rates[key].append((prompt_rate, cap["tokens_per_s"]))
    print(f"{'hardware framework precision spec prefill ISL':58} {'n':>3} {'meas/model':>10} "
          f"{'range':>11} {'meas tok/s':>11} {'model tok/s':>11}")  # fmt: skip
    for key in sorted(ratios):
        r = ratios[key]
        top = max(rates[key])
        print(f"{key:58} {len(r):3d} {statistics.median(r):10.2f} {min(r):5.2f}-{max(r):<5.2f} "
              f"{top[0]:11,.0f} {top[1]:11,.0f}")  # fmt: skip
    every = [x for r in ratios.values() for x in r]
    if every:
        print(f"all: {len(every)} queued records, median measured/modelled prefill rate "
              f"{statistics.median(every):.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
