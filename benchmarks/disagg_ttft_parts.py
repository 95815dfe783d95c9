"""Where the disaggregated rows' TTFT goes in the model, beside the same engine's aggregated miss.

For every distinct disaggregated run of the public serving data with a deployment (stated, twin
or recipe rows), prints the measured and modelled mean TTFT and the model's parts (prefill
workers, decode admission with the KV hand-off inside it, the benchmark's start-up burst, the
queue for a decode slot: the ``TTFT parts`` note of ``planner/serving/deployment.predict_disaggregated``;
for a closed loop whose lengths vary, followed request by request, the burst is inside the
prefill workers' part and the queue is the followed wait for a slot). The
last column is the measured/modelled TTFT of the same engine, GPU, model family and prompt
length served *aggregated* at concurrency <= 64 (median over those rows): when a
disaggregated run misses by the same factor as its engine does without disaggregation, the
miss is in the prefill cost both share, not in the hand-off.

    PYTHONPATH=src python benchmarks/disagg_ttft_parts.py
"""

from __future__ import annotations

import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuscale.validation.serving_rows import load
from validate_serving import ROWS, predict

PARTS = re.compile(
    r"prefill workers (\d+) ms, decode admission (\d+) ms \(the KV hand-off, ([\d.]+) ms, "
    r"runs inside it\), client burst (\d+) ms, queue (\d+) ms"
)
LIGHT = 64


def _family(model_path: str) -> str:
    return "DeepSeek" if "DeepSeek" in model_path else model_path.rsplit("/", 1)[-1]


def main() -> None:
    rows = [r for r in load(ROWS) if r.expressible]
    agg: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        r = row.raw
        if r["mode"] != "agg" or row.concurrency > LIGHT or "DeepSeek" not in r["model_path"]:
            continue
        key = (r["backend"], r["system"], r["isl"], _family(r["model_path"]))
        agg[key].append(row.ttft_ms / predict(row)["ttft_ms"])
    seen: set[tuple[object, ...]] = set()
    print(
        f"{'engine':7} {'gpu':8} {'isl':>5} {'C':>5} {'P/D workers':12} {'meas ms':>8} "
        f"{'model ms':>8} {'m/p':>5} | {'prefill':>7} {'admit':>6} {'(KV)':>6} "
        f"{'burst':>6} {'queue':>6} | agg m/p"
    )
    ratios: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        r = row.raw
        if r["mode"] != "disagg":
            continue
        kw = row.kwargs
        key = (r["backend"], r["system"], r["isl"], r["osl"], row.concurrency, row.ttft_ms)
        if key in seen:
            continue
        seen.add(key)
        out = predict(row)
        parts = next((m for n in out["notes"] if (m := PARTS.search(n))), None)
        if parts is None:
            continue
        pre, admit, hand, burst, queue = (float(g) for g in parts.groups())
        ratio = row.ttft_ms / out["ttft_ms"]
        a = agg.get((r["backend"], r["system"], r["isl"], _family(r["model_path"])))
        a_ratio = statistics.median(a) if a else float("nan")
        workers = (
            f"{kw['prefill_workers']}x{kw['prefill_tp']}/{kw['prefill_attention_dp']}"
            f"+{kw['decode_workers']}x{kw['decode_tp']}/{kw['decode_attention_dp']}"
        )
        print(
            f"{r['backend']:7} {r['system'][:8]:8} {r['isl']:>5} {row.concurrency:>5} "
            f"{workers:12} {row.ttft_ms:8.0f} {out['ttft_ms']:8.0f} {ratio:5.2f} | "
            f"{pre:7.0f} {admit:6.0f} {hand:6.1f} {burst:6.0f} {queue:6.0f} | {a_ratio:5.2f}"
        )
        if a:
            ratios[f"{r['backend']} {r['system']} isl {r['isl']}"].append((ratio, a_ratio))
    print("\nmedian measured/modelled TTFT, disaggregated vs the same engine aggregated (C <= 64):")
    for name, pairs in sorted(ratios.items()):
        d = statistics.median(p[0] for p in pairs)
        print(f"  {name:28} disagg {d:5.2f}   agg {pairs[0][1]:5.2f}   ({len(pairs)} runs)")


if __name__ == "__main__":
    main()
