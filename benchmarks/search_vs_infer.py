"""The SLO search's figures against ``infer`` of the very deployment and load it reports.

For each search, the winner and the runner-up: the search's p99 TTFT, p99 TPOT and goodput
(output tok/s) beside ``gpuscale.api.infer`` of that deployment under a Poisson client at the
search's request rate (``--request-rate``) and under a closed loop at its mean number in flight
(``--concurrency``).

PYTHONPATH=src python benchmarks/search_vs_infer.py
"""

from __future__ import annotations

from typing import Any

from gpuscale.api.serving import infer
from gpuscale.api.serving_search import deployment_args, search

CASES: list[tuple[str, dict[str, Any]]] = [
    ("deepseek-r1", {"gpu": "h200-sxm", "gpus": 16, "engine": "sglang", "slo_ttft_ms": 2000,
                     "slo_tpot_ms": 50}),
    ("deepseek-r1", {"gpu": "h200-sxm", "gpus": 16, "engine": "vllm", "weights": "fp8",
                     "slo_ttft_ms": 1000, "slo_tpot_ms": 30}),
    ("llama3.1-70b", {"gpu": "h100-sxm", "gpus": 8, "weights": "fp8", "slo_ttft_ms": 500,
                      "slo_tpot_ms": 30}),
    ("llama3.1-70b", {"gpu": "h200-sxm", "gpus": 16, "weights": "fp8", "slo_ttft_ms": 500,
                      "slo_tpot_ms": 30}),
    ("gpt-oss-120b", {"gpu": "h200-sxm", "gpus": 8, "engine": "tensorrt-llm",
                      "slo_ttft_ms": 1000, "slo_tpot_ms": 20}),
    # attention-DP engines, aggregated
    ("deepseek-r1", {"gpu": "h200-sxm", "gpus": 8, "engine": "tensorrt-llm",
                     "slo_ttft_ms": 2000, "slo_tpot_ms": 100}),
    # varying lengths (the search takes them since branch search-agree)
    ("llama3.1-70b", {"gpu": "h200-sxm", "gpus": 8, "weights": "fp8", "slo_ttft_ms": 2000,
                      "slo_tpot_ms": 50, "input_cv": 0.5, "output_cv": 0.5}),
]  # fmt: skip


def main() -> None:
    for model, kw in CASES:
        try:
            r = search(model, **kw)
        except TypeError:  # a search without input_cv/output_cv (before search-agree)
            continue
        print(f"\n{model} on {kw['gpus']} x {kw['gpu']}, {kw.get('engine', 'vllm')}, SLO "
              f"{kw['slo_ttft_ms']}/{kw['slo_tpot_ms']} ms")  # fmt: skip
        keys = ("gpu", "engine", "weights", "input_len", "output_len", "input_cv", "output_cv")
        common = {k: kw[k] for k in keys if k in kw}
        for place, s in zip(("winner", "runner-up"), r.ranked[:2], strict=False):
            o = r.to_dict()["options"][r.ranked.index(s)]
            dep = deployment_args(s.cand)
            rate = o["requests_per_s"]
            po = infer(model, request_rate=rate, **common, **dep).to_dict()["options"][0]
            in_flight = o["mean_requests_in_flight"]
            pc = infer(model, concurrency=in_flight, **common, **dep).to_dict()["options"][0]
            print(f"  {place}: {s.cand.label} ({s.cand.mode})")
            print(f"    {'':26s} {'TTFT p99':>9s} {'TPOT p99':>9s} {'tok/s':>9s}")
            print(f"    {'search':26s} {o['ttft_ms_p99']:9.1f} {o['tpot_ms_p99']:9.2f} "
                  f"{o['goodput_tokens_per_s']:9.0f}")  # fmt: skip
            for name, p in ((f"infer --request-rate {rate:.3f}", po),
                            (f"infer --concurrency {in_flight}", pc)):  # fmt: skip
                print(f"    {name:26s} {p['ttft_ms_p99']:9.1f} {p['tpot_ms_p99']:9.2f} "
                      f"{p['output_tokens_per_s']:9.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
