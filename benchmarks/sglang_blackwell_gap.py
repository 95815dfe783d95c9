"""What the serving model still misses on InferenceX's aggregated SGLang DeepSeek-R1 runs on B200
and B300 (held-out set, issue 10): the prompt-length slope of TTFT (the prefill rate the runs
imply) and, for MTP, the acceptance length the measured TPOT implies.

Diagnostic only: nothing here feeds the model. For each held-out record
(``data/validation/serving/inferencex_api_dsr1.csv``, read by ``validation.inferencex_api``)
it predicts with ``gpuscale.api.infer`` and groups the records by deployment (GPU, precision,
MTP, TP/EP, run day). Two readings:

- ``prefill``: at light load (concurrency <= ``LIGHT``) TTFT is the waits plus one prompt's
  prefill, so the growth of the median TTFT from 1k to 8k prompts over the growth of the mean
  prompt the server counted (the client draws lengths uniform in [0.8, 1] x ISL; the B300 runs'
  server saw about 5 times that, ``validation.client_tokenizer``) is the time per prompt token:
  ``rate = d(tokens) / d(TTFT) / GPUs``, measured and modelled, per GPU;
- ``acceptance``: TPOT = iteration / E, so with the model's iteration time the measured TPOT
  implies ``E_measured = E_model x TPOT_model / TPOT_measured`` (light load, where prefill
  stalls are rare). The model's ``E`` for DeepSeek-R1's MTP at 2 drafts is 2.58 (TensorRT-LLM
  tech blog 1, catalog/data/speculative.yaml), measured on real text; InferenceX's prompts are
  random tokens in the chat template (``--use-chat-template`` in ``dsr1_fp8_b200_mtp.sh``).

    PYTHONPATH=src python benchmarks/sglang_blackwell_gap.py [--only REGEX]
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from typing import Any

from gpuscale.api import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import load_records, read_records
from gpuscale.validation.inferencex_sweeps import load_scripts
from gpuscale.validation.inferencex_tables import InferenceXTables

SERVING = DATA_DIR / "serving"
LIGHT = 8
"""Concurrency up to which a run is read as light load (at most 8 requests in flight)."""
RANGE_RATIO = 0.8
"""InferenceX's ``--random-range-ratio``: prompt lengths uniform in [0.8, 1] x ISL."""


def mean_prompt(isl: int) -> float:
    """Mean prompt of the client: uniform in [0.8 ISL, ISL]."""
    return isl * (1.0 + RANGE_RATIO) / 2.0


def prefill_rate_per_gpu(
    prompt_lo: float, ttft_lo_s: float, prompt_hi: float, ttft_hi_s: float, gpus: int
) -> float:
    """Prompt tokens per second per GPU that the TTFT growth from a mean prompt of
    ``prompt_lo`` tokens to one of ``prompt_hi`` implies (``inf`` when TTFT does not grow)."""
    dt = ttft_hi_s - ttft_lo_s
    if dt <= 0.0:
        return float("inf")
    return (prompt_hi - prompt_lo) / dt / gpus


LINEAR = mean_prompt(8192) / mean_prompt(1024)
"""The prompt grows 8x from 1k to 8k: a per-token cost grows 8x, a quadratic one 64x."""


def gap_ratio(lo: tuple[float, float], hi: tuple[float, float]) -> float:
    """(measured - modelled) TTFT at the long prompt over that at the short one (``inf`` when
    the short one's gap is not positive)."""
    g_lo, g_hi = lo[0] - lo[1], hi[0] - hi[1]
    return g_hi / g_lo if g_lo > 0.0 else float("inf")


def implied_acceptance(e_model: float, tpot_model_ms: float, tpot_measured_ms: float) -> float:
    """Tokens per verification the measured TPOT implies at the model's iteration time."""
    return e_model * tpot_model_ms / tpot_measured_ms


def rows(only: str) -> list[dict[str, Any]]:
    records = [
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if r["hardware"] in ("b200", "b300")
        and r["framework"] == "sglang"
        and r["disagg"] != "true"
    ]
    out = []
    scripts = load_scripts(SERVING / "inferencex_mtp_scripts.csv")
    for row in read_records(records, InferenceXTables(scripts=scripts)):
        if not row.expressible or not re.search(only, row.id):
            continue
        o = infer(row.model, **row.kwargs).to_dict()["options"][0]
        rec = row.record
        out.append(
            {
                "dep": (rec["hardware"], rec["precision"], rec["spec_method"],
                        f"tp{rec['decode_tp']}ep{rec['decode_ep']}", rec["date"]),
                "isl": int(rec["isl"]),
                # The mean prompt the server counted: the client's uniform draw, or what the
                # server saw where the client's tokenizer differed (client_tokenizer).
                "prompt": float(row.kwargs["input_len"]),
                "conc": int(rec["conc"]),
                "gpus": int(rec["decode_tp"]),
                "ttft": (row.measured["ttft_ms_p50"], float(o["ttft_ms_p50"])),
                "tpot": (row.measured["tpot_ms"], float(o["tpot_ms"])),
                "e": float(row.kwargs.get("draft_tokens", 0)),
            }
        )  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=".", help="regex on the record id")
    args = ap.parse_args(argv)
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows(args.only):
        groups[r["dep"]].append(r)
    print(
        "deployment                                   ISL  conc  TTFT p50 meas/model ms   TPOT meas/model ms"
    )
    for dep, rs in sorted(groups.items()):
        for r in sorted(rs, key=lambda r: (r["isl"], r["conc"])):
            (tm, tp), (pm, pp) = r["ttft"], r["tpot"]
            print(
                f"{' '.join(dep):44s} {r['isl']:5d} {r['conc']:5d}  {tm:8.0f} {tp:8.0f}  {pm:8.1f} {pp:8.1f}"
            )
    print("\nprefill rate per GPU implied by the TTFT slope 1k -> 8k at concurrency <= "
          f"{LIGHT} (median over concurrencies): measured / modelled tok/s/GPU")  # fmt: skip
    for dep, rs in sorted(groups.items()):
        by = {(r["isl"], r["conc"]): r for r in rs if r["conc"] <= LIGHT}
        meas, mod = [], []
        for (isl, c), lo in by.items():
            hi = by.get((8192, c))
            if isl != 1024 or hi is None:
                continue
            g = lo["gpus"]
            p_lo, p_hi = lo["prompt"], hi["prompt"]
            meas.append(
                prefill_rate_per_gpu(p_lo, lo["ttft"][0] / 1e3, p_hi, hi["ttft"][0] / 1e3, g)
            )
            mod.append(
                prefill_rate_per_gpu(p_lo, lo["ttft"][1] / 1e3, p_hi, hi["ttft"][1] / 1e3, g)
            )
        if meas:
            print(
                f"  {' '.join(dep):44s} {statistics.median(meas):9.0f} {statistics.median(mod):9.0f}"
            )
    print("\nwhere the gap (measured - modelled TTFT p50) grows with the prompt, 1k -> 8k at "
          f"concurrency <= {LIGHT}: gap ratio 8k/1k against {LINEAR:.0f} for a per-token "
          f"(GEMM, MoE) cost and {LINEAR**2:.0f} for a quadratic (attention) one")  # fmt: skip
    for dep, rs in sorted(groups.items()):
        by = {(r["isl"], r["conc"]): r for r in rs if r["conc"] <= LIGHT}
        ratios = []
        for (isl, c), lo in by.items():
            hi = by.get((8192, c))
            if isl != 1024 or hi is None:
                continue
            ratios.append(gap_ratio(lo["ttft"], hi["ttft"]))
        if ratios:
            print(f"  {' '.join(dep):44s} {statistics.median(ratios):7.1f}")
    print("\nMTP: acceptance length the measured TPOT implies at the model's iteration time "
          f"(concurrency <= {LIGHT}; model E 2.58 at 2 drafts)")  # fmt: skip
    for dep, rs in sorted(groups.items()):
        if dep[2] != "mtp":
            continue
        for isl in sorted({r["isl"] for r in rs}):
            es = [implied_acceptance(2.58, r["tpot"][1], r["tpot"][0])
                  for r in rs if r["isl"] == isl and r["conc"] <= LIGHT]  # fmt: skip
            if es:
                print(f"  {' '.join(dep):44s} ISL {isl:5d}: E {statistics.median(es):.2f}")


if __name__ == "__main__":
    main()
