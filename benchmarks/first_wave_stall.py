"""Is the MoE TTFT gap a one-off stall of the benchmark's first wave? (issue 10)

On SGLang DeepSeek-R1/V3 TP8 on H200 the serving model's mean TTFT is ~150 ms short at every
concurrency and prompt length, and the gap is not engine time inside every prompt iteration
(``moe_prefill_probe.py``: that would raise TPOT, which the model already fits). A published
run of the same deployment and client (InferenceX issue #870, SGLang 0.5.7) reports a P99 TTFT
4-7x its mean: a few requests are very slow, most are not. This diagnostic asks whether one
stall of size ``S`` that hits only the benchmark's first wave explains both figures.

Why the first wave: InferenceX's client (``benchmarks/benchmark_lib.sh`` ``run_benchmark_serving``
-> ``utils/bench_serving/benchmark_serving.py``) sends ``--num-warmups 2*C`` copies of ONE prompt
(``input_requests[0]``) behind the ``--max-concurrency C`` semaphore, then ``--num-prompts 10*C``
measured requests whose first ``C`` arrive together on a drained engine. The warm-up therefore
runs only batches of identical prompts; the first measured batch is the first with ``C`` prompts
of random lengths (uniform in [0.8, 1] x ISL). Engines that compile GPU kernels at first use
(Triton keys each variant by the tile config chosen from the token count M and by the ``== 1`` /
``% 16 == 0`` / other class of every integer argument; vLLM PRs #49903 and #55268) can meet an
uncompiled variant there, and the whole batch waits for the compile. A stall ``S`` of the first
wave moves the mean by ``S x C / N = S / 10`` at every concurrency and prompt length, and puts
the P99 (the top 1 % of ``N``, inside the first wave's 10 %) near ``burst TTFT + S``.

For each row (the model's own burst from ``deployment._with_start_burst``, wrapped in this
process only; nothing in the model changes) it prints: the measured and modelled mean TTFT, the
model's reported P99, the burst's TTFT at the P99's rank, the stall ``S = gap x N / C`` that the
mean gap implies under this reading, and, where a published run of the same deployment exists,
its mean and P99 and the stall that P99 implies (published P99 minus the burst at that rank).
Per deployment it prints the spread of ``S``: a one-off stall predicts one size for every row.

    PYTHONPATH=src python benchmarks/first_wave_stall.py [--engines sglang] [--model REGEX]
        [--gpu REGEX]
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
from collections import defaultdict
from typing import Any, NamedTuple

import numpy as np

from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.planner.serving import deployment
from gpuscale.planner.serving.cohort_sim import weighted_quantile
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"

ISSUE_870 = "https://github.com/SemiAnalysisAI/InferenceX/issues/870"


class Published(NamedTuple):
    """One published run: the same client (InferenceX sa-bench, num_prompts = 10 x C)."""

    engine: str
    model: str  # regex on the row's model_path
    system: str
    tp: int
    isl: int
    osl: int
    concurrency: int
    mean_ttft_ms: float
    p99_ttft_ms: float
    version: str
    source: str


# DeepSeek-R1-0528 FP8, SGLang v0.5.7, TP8 EP1, 8x H200, the InferenceX launch of
# benchmarks/dsr1_fp8_h200.sh (chunked prefill 32768, --stream-interval 10). Issue #870
# comments of 2026-03-05: Actions runs 22737995207 (concurrency 4) and 22740679519 (1k/1k sweep).
PUBLISHED: tuple[Published, ...] = (
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 1024, 4, 267.3, 835.0, "0.5.7",
              f"{ISSUE_870} (run 22737995207)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 8192, 4, 204.1, 940.4, "0.5.7",
              f"{ISSUE_870} (run 22737995207)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 8192, 1024, 4, 474.3, 1832.2, "0.5.7",
              f"{ISSUE_870} (run 22737995207)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 1024, 8, 330.6, 1975.4, "0.5.7",
              f"{ISSUE_870} (run 22740679519)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 1024, 16, 356.0, 2149.4, "0.5.7",
              f"{ISSUE_870} (run 22740679519)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 1024, 32, 426.5, 2644.1, "0.5.7",
              f"{ISSUE_870} (run 22740679519)"),
    Published("sglang", "DeepSeek-R1", "h200_sxm", 8, 1024, 1024, 64, 423.1, 2741.1, "0.5.7",
              f"{ISSUE_870} (run 22740679519)"),
)  # fmt: skip

_ORIGINAL = deployment._with_start_burst
_CAPTURE: dict[str, Any] = {}


def _capturing(
    point: Any, it: Any, eng: Any, work: Any, client: Any, ranks: int, cap: float
) -> Any:
    """``_with_start_burst`` unchanged, keeping the burst and the steady state it mixed."""
    out = _ORIGINAL(point, it, eng, work, client, ranks, cap)
    fixed = dataclasses.replace(work, input_cv=0.0, output_cv=0.0)
    conc = int(client.concurrency or 1)
    _CAPTURE["burst"] = deployment.simulate_ranks(it, eng, fixed, conc, ranks, cap, burst_only=True)
    _CAPTURE["steady_s"] = point.ttft_s
    return out


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """One row read as a first-wave stall."""

    row: ServingRow
    measured_ms: float
    model_ms: float
    model_p99_ms: float
    share: float  # C / N: the first wave's part of the measured requests
    burst_at_p99_ms: float  # the model's burst TTFT at the rank the P99 falls on
    stall_ms: float  # S = gap / share
    published: Published | None

    @property
    def mean_from_published_p99_ms(self) -> float:
        """The mean TTFT the published P99 implies when the whole first wave waited for the
        stall it shows: the model's mean plus ``share x (P99 - burst at the P99's rank)``."""
        assert self.published is not None
        return self.model_ms + self.share * (self.published.p99_ttft_ms - self.burst_at_p99_ms)

    @property
    def label(self) -> str:
        r = self.row.raw
        return f"{r['isl']:>5}x{r['osl']:<5} c{self.row.concurrency:<3}"


def _p99_rank_in_burst(share: float) -> float:
    """Quantile inside the first wave that the run's P99 falls on, when the first wave (a
    ``share`` of the requests) holds the slowest ones: the top 1 % of the run is the top
    ``0.01 / share`` of the wave (10 % of the wave for num_prompts = 10 x C)."""
    return float(np.clip(1.0 - 0.01 / share, 0.0, 1.0))


def read_row(row: ServingRow) -> Reading | None:
    r = row.raw
    _CAPTURE.clear()
    try:
        opt = infer(r["model_path"], **row.kwargs).to_dict()["options"][0]
    except (InputError, ValueError, KeyError):
        return None
    burst = _CAPTURE.get("burst")
    n = row.kwargs.get("num_requests")
    if burst is None or not n:
        return None  # fixed lengths (cohort simulation) or no start burst: not this reading
    share = row.concurrency / float(n)
    q = _p99_rank_in_burst(share)
    burst_q = weighted_quantile(burst.ttft_s, burst.weight, q) * 1e3
    measured = float(r["silicon_ttft_ms"])
    model = float(opt["ttft_ms"])
    pub = next(
        (
            p
            for p in PUBLISHED
            if p.engine == r["backend"]
            and re.search(p.model, r["model_path"])
            and p.system == r["system"]
            and str(p.tp) == r["tp_size"]
            and (p.isl, p.osl, p.concurrency) == (int(r["isl"]), int(r["osl"]), row.concurrency)
        ),
        None,
    )
    return Reading(
        row=row,
        measured_ms=measured,
        model_ms=model,
        model_p99_ms=float(opt["ttft_ms_p99"]),
        share=share,
        burst_at_p99_ms=burst_q,
        stall_ms=(measured - model) / share,
        published=pub,
    )


def _group(row: ServingRow) -> str:
    r = row.raw
    return (
        f"{r['backend']} {r['backend_version'] or '?'} {r['model_path'].split('/')[-1]} "
        f"{r['system']} tp{r['tp_size']} ep{r['moe_ep_size']} dp{r['attention_dp_size'] or 1}"
    )


def _rows(engines: set[str], model: str, gpu: str) -> list[ServingRow]:
    seen: set[tuple[str, ...]] = set()
    out = []
    for row in load(ROWS):
        r = row.raw
        if r["mode"] != "agg" or not row.expressible or r["backend"] not in engines:
            continue
        if not re.search(model, r["model_path"]) or not re.search(gpu, r["system"]):
            continue
        # The exports repeat runs under several source files: one line per distinct run.
        fields = ("backend", "backend_version", "model_path", "system", "tp_size",
                  "moe_ep_size", "attention_dp_size", "isl", "osl")  # fmt: skip
        key = (*(str(r[k]) for k in fields), str(row.concurrency),
               f"{float(r['silicon_ttft_ms']):.1f}")  # fmt: skip
        if key in seen:
            continue
        seen.add(key)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="sglang", help="comma list: sglang,trtllm,vllm")
    ap.add_argument("--model", default="DeepSeek", help="regex on model_path")
    ap.add_argument("--gpu", default="h200", help="regex on system")
    args = ap.parse_args(argv)
    engines = {e.strip() for e in args.engines.split(",") if e.strip()}
    deployment._with_start_burst = _capturing
    try:
        readings = [x for x in (read_row(r) for r in _rows(engines, args.model, args.gpu)) if x]
    finally:
        deployment._with_start_burst = _ORIGINAL
    print(
        "first-wave stall reading: S = (measured - modelled mean TTFT) x N / C; "
        "burst@p99 = the model's burst TTFT at the rank of the run's P99"
    )
    groups: dict[str, list[Reading]] = defaultdict(list)
    for x in readings:
        groups[_group(x.row)].append(x)
    for name, xs in groups.items():
        xs.sort(key=lambda x: (int(x.row.raw["isl"]), int(x.row.raw["osl"]), x.row.concurrency))
        print(f"\n== {name} ({len(xs)} runs)")
        print(
            "  run              measured  model  model_p99  burst@p99  N/C  stall_S |"
            "  published mean / p99 (version)  stall from p99  mean it implies"
        )
        for x in xs:
            pub = ""
            if x.published is not None:
                p = x.published
                pub = (
                    f"  {p.mean_ttft_ms:7.1f} / {p.p99_ttft_ms:7.1f} ({p.version})"
                    f"        {p.p99_ttft_ms - x.burst_at_p99_ms:7.0f}"
                    f"        {x.mean_from_published_p99_ms:7.1f}"
                )
            print(
                f"  {x.label}  {x.measured_ms:7.1f} {x.model_ms:7.1f}  {x.model_p99_ms:8.1f}"
                f"  {x.burst_at_p99_ms:8.1f} {1 / x.share:4.0f}  {x.stall_ms:7.0f} |{pub}"
            )
        stalls = [x.stall_ms for x in xs]
        med = statistics.median(stalls)
        print(
            f"  stall S from the mean gap: median {med:.0f} ms, range {min(stalls):.0f}"
            f" .. {max(stalls):.0f} ms over {len(xs)} runs"
        )
        pubs = [(x, x.published) for x in xs if x.published is not None]
        if pubs:
            from_p99 = [p.p99_ttft_ms - x.burst_at_p99_ms for x, p in pubs]
            part = [
                (x.mean_from_published_p99_ms - x.model_ms) / (p.mean_ttft_ms - x.model_ms)
                for x, p in pubs
            ]
            print(
                f"  stall from the published P99s: median {statistics.median(from_p99):.0f} ms,"
                f" range {min(from_p99):.0f} .. {max(from_p99):.0f} ms over {len(pubs)} runs;"
                f" it carries {min(part):.0%} .. {max(part):.0%} (median"
                f" {statistics.median(part):.0%}) of the published mean's gap to the model"
            )
        under = sum(x.model_p99_ms < x.burst_at_p99_ms for x in xs)
        print(f"  model's reported P99 below its own burst at the P99's rank: {under} of {len(xs)}")
    if not readings:
        print("no aggregated random-length rows match")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
