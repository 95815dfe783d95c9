"""SGLang 0.5.x prefill batches of a fixed-length burst, and the prefill time they imply
(diagnostic only).

AIConfigurator's SGLang 0.5.6.post2 gap-analysis rows (``aiconfigurator_silicon_hopper.csv``,
``source_file=.../aic-auto-gap-analysis/...``) ran fixed lengths, so a round's ``C`` prompts
arrive together on an engine with no decodes left, and the serving model reads them with
AIConfigurator's generator launch (``--max-prefill-tokens isl + 1500``, radix cache on:
``serving_launches.aic_generator_launch``). How many of those prompts share a prefill batch depends
on SGLang's ``PrefillAdder.add_one_req`` (``managers/schedule_policy.py``):

- 0.5.x (the rows' version): a request whose prompt reaches what is left of the limit waits,
  unless it is the batch's first, with or without chunked prefill (``real_input_tokens >=
  self.rem_input_tokens and len(self.can_run_list) != 0``);
- after sgl-project/sglang PR #25741 (2026-05): that check only without chunked prefill, so
  requests are added while some of the limit is left (the one crossing it runs).

With ``b`` prompts per batch and one batch after another, the round's mean TTFT is ``f`` batch
times, ``f = sum_j j n_j / C`` over the batches ``j`` of ``n_j`` prompts. This script prints, per
row, both batchings, ``f`` and the prefill time of one batch the measured and the modelled mean
TTFT imply (``TTFT / f``; the decode iterations and the request overhead inside TTFT are left
in, so it is an upper bound). If the batching is right, batches of the same token count give
the same implied time whatever the prompt length. Nothing here changes the model. ::

    PYTHONPATH=src python benchmarks/sglang_prefill_batches.py [--model Qwen3-235B]
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_launches import AIC_PREFILL_SLACK
from gpuscale.validation.serving_rows import load
from gpuscale.validation.serving_runs import distinct

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"

GAP_SOURCE = "aic-auto-gap-analysis"
CHUNK = 8192
"""SGLang's chunked_prefill_size on H200 (server_args, 80-141 GB GPUs); no prompt here reaches it."""


def batches(isl: int, conc: int, limit: int, strict: bool) -> list[int]:
    """Prompts per prefill batch for ``conc`` prompts of ``isl`` tokens arriving together on an
    engine with no running decodes, under ``--max-prefill-tokens limit``."""
    out: list[int] = []
    left = conc
    while left > 0:
        # 0.5.x: the k-th joins while its tokens stay below what is left (k * isl < limit);
        # after PR #25741: added while some of the limit is left ((k - 1) * isl < limit).
        k = max(math.ceil(limit / isl) - 1, 1) if strict else math.ceil(limit / isl)
        k = max(min(k, CHUNK // isl, left), 1)
        out.append(k)
        left -= k
    return out


def factor(sizes: list[int]) -> float:
    """Mean position, in batch times, at which a prompt of the round gets its first token."""
    return sum((j + 1) * n for j, n in enumerate(sizes)) / sum(sizes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="Qwen3-235B", help="regex on model_path")
    args = ap.parse_args(argv)
    rows = [
        r
        for r in distinct(load(ROWS))
        if r.expressible
        and r.raw["backend"] == "sglang"
        and r.raw["backend_version"] == "0.5.6.post2"
        and GAP_SOURCE in r.raw["silicon_data_source"]
        and re.search(args.model, r.raw["model_path"])
    ]
    if not rows:
        print(f"no SGLang 0.5.6.post2 gap-analysis rows match {args.model!r}", file=sys.stderr)
        return 2
    print(
        "TP  ISL   OSL    C | 0.5.x batches    f  | measured  implied T  per 1k | model  T "
        "| PR #25741 batches  f  implied T"
    )
    for row in sorted(rows, key=lambda r: (r.raw["tp_size"], int(r.raw["isl"]), r.concurrency)):
        r = row.raw
        isl, conc = int(r["isl"]), row.concurrency
        limit = isl + AIC_PREFILL_SLACK
        strict, loose = batches(isl, conc, limit, True), batches(isl, conc, limit, False)
        fs, fl = factor(strict), factor(loose)
        meas = float(r["silicon_ttft_ms"])
        model = infer(r["model_path"], **row.kwargs).to_dict()["options"][0]["ttft_ms"]
        t = meas / fs
        per_k = t / (strict[0] * isl) * 1000.0
        print(
            f"{r['tp_size']:>2} {isl:>5} {r['osl']:>5} {conc:>4} | "
            f"{strict[0]:>2} x {len(strict):<3} tok {strict[0] * isl:>5} {fs:4.2f} | "
            f"{meas:7.0f} {t:9.0f} {per_k:7.0f} | {model / fs:6.0f} | "
            f"{loose[0]:>2} x {len(loose):<3} tok {loose[0] * isl:>5} {fl:4.2f} {meas / fl:6.0f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
