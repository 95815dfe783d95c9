"""What the vLLM 0.12.0 gap-analysis rows say about their prompts and their decode step.

AIConfigurator's aggregated vLLM 0.12.0 rows (``source_file=.../aic-auto-gap-analysis/...``:
Qwen3-32B on H100, Qwen3-235B-A22B-FP8 and Llama-3.1-8B-Instruct-FP8 on H200) record no
launch, image or client. This script prints, from the rows' own means and the serving model's
per-iteration terms (diagnostic only; nothing here is read by the model):

- **prompt floor** (``prompt_share``): a closed loop of C clients with fixed lengths completes
  ``C / E2E`` requests per second, ``E2E = TTFT + (OSL - 1) TPOT`` (Little's law), and each
  request's prompt is prefilled once. The prompt tokens per second times the dense-layer
  FLOPs per token (``2 x`` the active parameters without embeddings and head) per GPU, over
  the GPU's dense peak at the GEMM precision and over the best rate of the cost profile's GEMM
  curve (``Profile.gemm_curve``): a share above 1 of the best rate means the prompts were not
  all computed (the attention and decode tokens are left out, so it is a lower bound).
- **term split** (``term_split``): the model's decode-only iteration at the row's running
  requests, what one prompt adds to an iteration, and the engine profile's host terms
  (``iteration_overhead_us`` + ``per_sequence_overhead_us`` x running): which term makes the
  predicted TPOT.
- **client reuse** (``aiperf_repeat_share``): aiperf's synthetic text dataset holds
  ``--num-dataset-entries`` conversations (default 100: ``InputDefaults.NUM_DATASET_ENTRIES``,
  ai-dynamo/aiperf ``aiperf/common/config/config_defaults.py``), drawn at random with
  replacement (``DatasetManager._return_any_conversation``, aiperf db4f6397, 2025-10) or in
  shuffled passes (``DATASET_SAMPLING_STRATEGY = SHUFFLE`` in later aiperf); vLLM V1 caches
  prefixes by default. The share of the measured requests (after ``2 C`` warm-up, the count
  the row states: ``serving_clients.client_requests``, ``10 C`` for these rows, the eval runner of
  their date, which also passes ``--num-dataset-entries 12*C``, :data:`EVAL_DATASET_ROUNDS`)
  whose prompt was sent before, under each, and the model's KV pool over the dataset's
  prompts' footprint (whether a repeat can still be cached). The rows do not record the
  client's arguments, so this is what would settle it, not a reading.
- **slices** of the Qwen3-32B rows: mean signed TTFT and TPOT error per prompt length and
  concurrency.
- **MoE decode** of the Qwen3-235B-A22B-FP8 rows: measured TPOT per layout against the model's
  decode step, and how much each grows from the lowest to the highest concurrency.

    PYTHONPATH=src python benchmarks/vllm_aic_gap.py
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import _engine_options, infer, served_format, served_kv_dtype
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.params import active_params, embedding_params
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import gemm_precision
from gpuscale.costmodel.serving.iteration import (
    IterationModel,
    Parallelism,
    expert_load,
    weight_bytes_per_gpu,
)
from gpuscale.planner.serving.cohort_sim import BENCHMARK_ROUNDS
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_clients import AIC_CLIENT_ERAS, aic_client_rounds
from gpuscale.validation.serving_fields import AIC_GAP_SOURCE
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
AIPERF_DATASET_ENTRIES = 100
"""aiperf ``InputDefaults.NUM_DATASET_ENTRIES`` (``aiperf/common/config/config_defaults.py``)."""
WARMUP_ROUNDS = 2
"""``--warmup-request-count 2*C``: AIConfigurator's eval runner (``eval/benchmarks/
genai_perf_runner.py``, 2025-08 to 2026-03) and its generator's ``benchmark/bench_run.sh.j2``."""
EVAL_DATASET_ROUNDS = 12
"""The eval runner's ``--num-dataset-entries 12*C`` (at 961028348 and c46a56b02): one prompt per
warm-up and measured request (``2*C + 10*C``)."""


def client_of(row: ServingRow) -> tuple[float, int]:
    """Measured rounds and dataset entries of the row's client: the count it states
    (``serving_clients.aic_client_rounds``) and, for the eval runner's 10 rounds, its ``12*C``
    entries; else aiperf's defaults (:data:`BENCHMARK_ROUNDS`, 100 entries)."""
    rounds = aic_client_rounds(row.raw)
    if rounds == AIC_CLIENT_ERAS[0][1]:
        return float(rounds), EVAL_DATASET_ROUNDS * row.concurrency
    return float(rounds or BENCHMARK_ROUNDS), AIPERF_DATASET_ENTRIES


def vllm_gap_rows(path: Path = ROWS) -> list[ServingRow]:
    """The expressible aggregated vLLM 0.12.0 gap-analysis rows."""
    return [
        row
        for row in load(path)
        if row.expressible
        and row.raw["mode"] == "agg"
        and row.raw["backend"] == "vllm"
        and row.raw["backend_version"] == "0.12.0"
        and AIC_GAP_SOURCE in row.raw["silicon_data_source"]
    ]


def requests_per_s(concurrency: int, ttft_ms: float, tpot_ms: float, osl: int) -> float:
    """Closed loop: C clients each complete one request per ``TTFT + (OSL - 1) TPOT``."""
    return concurrency / ((ttft_ms + (osl - 1) * tpot_ms) * 1e-3)


def iteration_for(row: ServingRow) -> IterationModel:
    """The serving model's iteration for ``row`` as ``gpuscale.api.infer`` builds it."""
    kw, model = row.kwargs, row.raw["model_path"]
    spec = catalog.model(model)
    device = catalog.gpu(kw["gpu"])
    eng = engine(kw["engine"]).for_device(device)
    if kw.get("engine_options"):
        eng = dataclasses.replace(eng, **_engine_options(kw["engine_options"], eng.name))
    fmt = served_format(model, kw["weights"], spec)
    kv = served_kv_dtype(model, kw["weights"], fmt, eng, kw.get("kv_dtype", "auto"), spec)
    prof = load_profile_for(eng.cost_profile, None)
    par = Parallelism(
        tp=kw.get("tp", 1), pp=kw.get("pp", 1), ep=kw.get("ep", 1),
        attention_dp=kw.get("attention_dp", 1),
    )  # fmt: skip
    cluster = catalog.cluster(kw["gpu"], par.gpus)
    return _iteration_model(spec, cluster, par, fmt, kv, prof, eng)


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptShare:
    requests_per_s: float
    of_peak: float
    """Prompt GEMM FLOP/s per GPU over the dense peak at the GEMM precision."""
    of_best: float
    """The same over the best rate of the cost profile's GEMM curve at that precision."""
    floor_ms: float
    """One prompt's dense-layer GEMMs per GPU at that best rate."""


def prompt_share(row: ServingRow, it: IterationModel) -> PromptShare:
    """The measured request rate's prompt GEMM work against the GPUs (module docstring)."""
    r = row.raw
    rate = requests_per_s(
        row.concurrency, float(r["silicon_ttft_ms"]), float(r["silicon_tpot_ms"]), int(r["osl"])
    )
    m, dev = it.model, it.cluster.device
    flops_per_token = 2.0 * (active_params(m) - embedding_params(m))
    need = rate * int(r["isl"]) * flops_per_token / it.par.gpus
    prec = gemm_precision(it.fmt, dev)
    peak = dev.peak(prec) * 1e12
    best = float(max(it.profile.gemm_curve(dev.id, dev.generation, prec).efficiency))
    floor = int(r["isl"]) * flops_per_token / it.par.gpus / (peak * best)
    return PromptShare(
        requests_per_s=rate, of_peak=need / peak, of_best=need / (peak * best), floor_ms=floor * 1e3
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TermSplit:
    decode_ms: float
    """Decode-only iteration at the row's running requests per attention rank."""
    prompt_ms: float
    """What one whole prompt adds to that iteration."""
    host_ms: float
    """The engine profile's host terms in the decode-only iteration."""
    prompts_per_token: float
    """Prompts a decoding request's iterations carry per output token in a staggered closed
    loop: each of the C - 1 others' prompts falls in its OSL - 1 decode steps once per round."""

    @property
    def tpot_ms(self) -> float:
        return self.decode_ms + self.prompts_per_token * self.prompt_ms

    def prompt_budget_ms(self, measured_tpot_ms: float) -> float:
        """Time per interleaved prompt the measured TPOT leaves above the model's decode step
        (staggered reading: ``TPOT = decode + prompts_per_token x prompt``)."""
        return (measured_tpot_ms - self.decode_ms) / max(self.prompts_per_token, 1e-12)


def term_split(row: ServingRow, it: IterationModel) -> TermSplit:
    r = row.raw
    isl, osl = float(r["isl"]), int(r["osl"])
    n = row.concurrency / it.par.attention_dp
    ctx = np.array([isl + osl / 2.0])
    one, zero, nn = np.array([isl]), np.zeros(1), np.array([n])
    decode = float(it.time_s(nn, ctx, zero, zero)[0])
    mixed = float(it.time_s(nn, ctx, one, one / 2.0)[0])
    host = it.iteration_overhead_s + it.per_sequence_overhead_s * n
    per_token = max(n - 1.0, 0.0) / max(osl - 1, 1)
    return TermSplit(
        decode_ms=decode * 1e3,
        prompt_ms=(mixed - decode) * 1e3,
        host_ms=host * 1e3,
        prompts_per_token=min(per_token, 1.0),
    )


def aiperf_repeat_share(
    concurrency: int,
    strategy: str,
    entries: int = AIPERF_DATASET_ENTRIES,
    warmup_rounds: int = WARMUP_ROUNDS,
    rounds: float = BENCHMARK_ROUNDS,
) -> float:
    """Share of the measured requests whose prompt an earlier request (warm-up included) sent.

    ``shuffle``: passes over a permutation of the ``entries`` prompts, so request ``j`` (0-based)
    repeats from ``j = entries`` on; ``random``: each request draws an entry uniformly with
    replacement, so request ``j`` repeats with probability ``1 - (1 - 1/entries)^j``."""
    first, last = warmup_rounds * concurrency, round((warmup_rounds + rounds) * concurrency)
    j = np.arange(first, last, dtype=float)
    if strategy == "shuffle":
        return float(np.mean(j >= entries))
    if strategy == "random":
        return float(np.mean(1.0 - (1.0 - 1.0 / entries) ** j))
    raise ValueError(f"strategy {strategy!r}: accepted shuffle, random")


def weights_read_ms(it: IterationModel) -> float:
    """Milliseconds to read every weight one GPU holds once, at the profile's HBM efficiency:
    what a decode step costs if it touches every expert whatever the tokens."""
    dev = it.cluster.device
    hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * it.profile.hbm_efficiency
    return weight_bytes_per_gpu(it.model, it.par, it.fmt) / hbm * 1e3


def fit_per_gpu(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares of ``tpot = a + b / gpus`` over (gpus, measured TPOT ms) points: the part
    of a step that does not shrink with the GPUs (``a``, ms) and the part that does (``b``,
    ms x GPU). Diagnostic only: nothing fitted here is read by the model."""
    x = np.array([1.0 / g for g, _ in points])
    y = np.array([t for _, t in points])
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def signed(pred: float, meas: float) -> float:
    return pred / meas - 1.0


def _predict(row: ServingRow) -> dict[str, Any]:
    return infer(row.raw["model_path"], **row.kwargs).to_dict()["options"][0]


def main() -> None:
    rows = vllm_gap_rows()
    preds = {id(row): _predict(row) for row in rows}
    its = {id(row): iteration_for(row) for row in rows}

    print("== Prompt floor and term split (Llama-3.1-8B-FP8 and the Qwen3-32B FP8 job rows) ==")
    print(
        f"{'model':20} {'tp':>3} {'isl':>5} {'osl':>5} {'C':>4} {'req/s':>7} {'of peak':>8}"
        f" {'of best':>8} | {'tpot':>6} {'pred':>6} {'decode':>7} {'prompt':>7} {'host':>5}"
        f" {'split':>6} | {'budget':>7} {'floor':>6}"
    )
    floor_rows = [
        r for r in rows if r.raw["gemm_quant_mode"] == "fp8" and "235B" not in r.raw["model_path"]
    ]
    for row in floor_rows:
        r, it = row.raw, its[id(row)]
        share, split = prompt_share(row, it), term_split(row, it)
        print(
            f"{r['model_path'].split('/')[-1][:20]:20} {r['tp_size']:>3} {r['isl']:>5}"
            f" {r['osl']:>5} {row.concurrency:>4} {share.requests_per_s:7.1f}"
            f" {share.of_peak:8.2f} {share.of_best:8.2f} | {float(r['silicon_tpot_ms']):6.2f}"
            f" {preds[id(row)]['tpot_ms']:6.2f} {split.decode_ms:7.2f} {split.prompt_ms:7.2f}"
            f" {split.host_ms:5.2f} {split.tpot_ms:6.2f}"
            f" | {split.prompt_budget_ms(float(r['silicon_tpot_ms'])):7.2f} {share.floor_ms:6.2f}"
        )
    over = [r for r in floor_rows if prompt_share(r, its[id(r)]).of_best > 1.0]
    short = [
        r
        for r in floor_rows
        if term_split(r, its[id(r)]).prompt_budget_ms(float(r.raw["silicon_tpot_ms"]))
        < prompt_share(r, its[id(r)]).floor_ms
    ]
    print(
        f"rows whose request rate needs more than the profile's best GEMM rate for the prompts "
        f"alone: {len(over)} of {len(floor_rows)}; whose measured TPOT leaves less time per "
        f"interleaved prompt than its GEMMs take at that rate: {len(short)} of {len(floor_rows)}"
    )

    print("\n== Client reuse (the row's client: 2C warm-up, its stated rounds and entries) ==")
    print(
        f"{'model':20} {'tp':>3} {'isl':>5} {'osl':>5} {'C':>4} {'shuffle':>8} {'random':>7}"
        f" {'pool/prompts':>13} {'ttft err':>9} {'tpot err':>9}"
    )
    for row in floor_rows:
        r, o = row.raw, preds[id(row)]
        rounds, entries = client_of(row)
        foot = entries * (int(r["isl"]) + int(r["osl"]))
        shuffle = aiperf_repeat_share(row.concurrency, "shuffle", entries, rounds=rounds)
        random = aiperf_repeat_share(row.concurrency, "random", entries, rounds=rounds)
        print(
            f"{r['model_path'].split('/')[-1][:20]:20} {r['tp_size']:>3} {r['isl']:>5}"
            f" {r['osl']:>5} {row.concurrency:>4} {shuffle:8.2f} {random:7.2f}"
            f" {o['kv_cache_tokens_per_rank'] / foot:13.2f}"
            f" {signed(o['ttft_ms'], float(r['silicon_ttft_ms'])):+9.0%}"
            f" {signed(o['tpot_ms'], float(r['silicon_tpot_ms'])):+9.0%}"
        )

    print("(16-bit Qwen3-32B and Qwen3-235B: per prompt length, mean over the rows)")
    summary: dict[tuple[str, str], list[tuple[float, float, float, float]]] = defaultdict(list)
    for row in rows:
        if row in floor_rows:
            continue
        r, o = row.raw, preds[id(row)]
        rounds, entries = client_of(row)
        foot = entries * (int(r["isl"]) + int(r["osl"]))
        summary[(r["model_path"].split("/")[-1], r["isl"])].append(
            (
                aiperf_repeat_share(row.concurrency, "shuffle", entries, rounds=rounds),
                o["kv_cache_tokens_per_rank"] / foot,
                signed(o["ttft_ms"], float(r["silicon_ttft_ms"])),
                signed(o["tpot_ms"], float(r["silicon_tpot_ms"])),
            )
        )
    for (name, isl), vals in sorted(summary.items()):
        mean = [statistics.mean(v[i] for v in vals) for i in range(4)]
        print(
            f"{name[:20]:20} isl {isl:>5} rows {len(vals):3} shuffle {mean[0]:5.2f}"
            f" pool/prompts {mean[1]:6.2f} ttft err {mean[2]:+5.0%} tpot err {mean[3]:+5.0%}"
        )

    print("\n== Qwen3-32B (16-bit) slices: mean signed error, TTFT / TPOT ==")
    slices: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        r = row.raw
        if "Qwen3-32B" not in r["model_path"] or r["gemm_quant_mode"]:
            continue
        o = preds[id(row)]
        c = row.concurrency
        bucket = "C8-16" if c <= 16 else "C32-64" if c <= 64 else "C128"
        slices[(r["isl"], bucket)].append(
            (
                signed(o["ttft_ms"], float(r["silicon_ttft_ms"])),
                signed(o["tpot_ms"], float(r["silicon_tpot_ms"])),
            )
        )
    for (isl, bucket), errs in sorted(slices.items()):
        print(
            f"isl {isl:>5} {bucket:7} rows {len(errs):3}  TTFT {statistics.mean(e[0] for e in errs):+6.0%}"
            f"  TPOT {statistics.mean(e[1] for e in errs):+6.0%}"
        )

    print("\n== Qwen3-235B-A22B-FP8 decode: measured TPOT vs the model's decode step ==")
    layouts: dict[tuple[int, int, int], list[ServingRow]] = defaultdict(list)
    for row in rows:
        if "235B" in row.raw["model_path"]:
            kw = row.kwargs
            layouts[(kw["tp"], kw["attention_dp"], kw["ep"])].append(row)
    print(
        f"{'tp':>3} {'dp':>3} {'ep':>3} {'C':>7} {'tpot':>13} {'decode':>13} {'growth':>7}"
        f" {'model':>6} {'experts':>9} {'all weights':>12}"
    )
    for (tp, dp, ep), group in sorted(layouts.items()):
        group.sort(key=lambda x: x.concurrency)
        lo, hi = group[0], group[-1]
        it = its[id(lo)]
        steps = [term_split(x, it).decode_ms for x in (lo, hi)]
        meas = [float(x.raw["silicon_tpot_ms"]) for x in (lo, hi)]
        m = it.model
        touched = [
            float(
                expert_load(np.array([x.concurrency]), m.num_experts, m.experts_per_token, ep)[0][0]
            )
            for x in (lo, hi)
        ]
        print(
            f"{tp:>3} {dp:>3} {ep:>3} {lo.concurrency:>3}-{hi.concurrency:<3}"
            f" {meas[0]:6.1f}-{meas[1]:<6.1f} {steps[0]:6.1f}-{steps[1]:<6.1f}"
            f" {meas[1] / meas[0]:7.2f} {steps[1] / steps[0]:6.2f}"
            f" {touched[0]:4.0f}-{touched[1]:<4.0f} {weights_read_ms(it):12.1f}"
        )
    moe_rows = [r for group in layouts.values() for r in group]
    a, b = fit_per_gpu([(its[id(r)].par.gpus, float(r.raw["silicon_tpot_ms"])) for r in moe_rows])
    it0 = its[id(moe_rows[0])]
    full = weight_bytes_per_gpu(it0.model, it0.par, it0.fmt) * it0.par.gpus
    print(
        f"measured TPOT ~ {a:.1f} ms + {b:.1f} ms x GPU / GPUs over the {len(moe_rows)} rows; "
        f"all weights ({full / 1e9:.0f} GB) over {b:.1f} ms read at "
        f"{full / (b * 1e-3) / 1e12:.2f} TB/s per GPU"
    )


if __name__ == "__main__":
    main()
