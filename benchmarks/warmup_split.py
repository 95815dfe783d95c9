"""The MoE TTFT miss of the public serving rows, split by the warm-up their client ran.

Diagnostic only (the model is unchanged): the median measured/modelled TTFT of the distinct
expressible MoE rows at concurrency <= 64, per engine, GPU, model family and prompt length,
by what the benchmark sent before measuring (data/validation/serving/SOURCES.md):

- ``none``: InferenceX's aggregated client before #480 (d053ae24e, 2026-01-21) sends one test
  prompt (``input_requests[0]``) and measures;
- ``2C copies``: from #480 on, ``--num-warmups $((2 * CONC))`` copies of that one prompt;
- ``sa-bench``: the disaggregated recipes' sa-bench runs a whole random-length benchmark of 5 x C
  prompts at the same lengths and concurrency first (srt-slurm ``sa-bench/bench.sh``);
- ``other``: AIConfigurator's own runs (another client).

Kernels built at first use (Triton specializations, DeepGEMM JIT) are met by the first measured
wave after no or a one-length warm-up and by the warm-up under sa-bench;
docs/investigations/serving-moe-prefill.md, "TensorRT-LLM MoE rows: the MTP sweeps among them, and
the gap that stays".

    PYTHONPATH=src python benchmarks/warmup_split.py
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuscale import catalog
from gpuscale.validation.serving_fields import INFERENCEX_SOURCES, sa_bench
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct
from validate_serving import ROWS, predict

LIGHT = 64
WARMUP_FROM = "2026-01-21"
"""InferenceX #480 (d053ae24e, merged 2026-01-21T17:53Z): the client's warm-up."""


def warmup(row: ServingRow) -> str:
    r = row.raw
    if r["mode"] == "disagg":
        return "sa-bench" if sa_bench(r) else "other"
    if not r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
        return "other"
    day = r["silicon_data_source"].split("measured=")[1][:10]
    return "2C copies" if day >= WARMUP_FROM else "none"


def _family(model_path: str) -> str:
    return "DeepSeek" if "DeepSeek" in model_path else model_path.rsplit("/", 1)[-1][:16]


def main() -> None:
    ratios: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for row in distinct(load(ROWS)):
        r = row.raw
        if not row.expressible or row.concurrency > LIGHT:
            continue
        if not catalog.model(r["model_path"]).is_moe:
            continue
        key = (r["backend"], r["system"], _family(r["model_path"]), r["isl"], warmup(row))
        ratios[key].append(row.ttft_ms / predict(row)["ttft_ms"])
    print(f"MoE rows at concurrency <= {LIGHT}: median measured/modelled TTFT by client warm-up")
    print(f"{'engine':7} {'gpu':8} {'model':16} {'isl':>5} {'warm-up':10} {'rows':>4} {'m/p':>6}")
    for key in sorted(ratios):
        vals = ratios[key]
        print(
            f"{key[0]:7} {key[1]:8} {key[2]:16} {key[3]:>5} {key[4]:10} {len(vals):4d} "
            f"{statistics.median(vals):6.2f}"
        )


if __name__ == "__main__":
    main()
