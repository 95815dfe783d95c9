"""The TTFT the serving model misses on aggregated MoE rows: its size per deployment, how it
moves with concurrency, prompt length and TP, and which readings the rows rule out (issue 10).

Diagnostic only: it reads the aggregated InferenceX rows of ``data/validation/serving`` (the
client is known: ``10 x C`` prompts at concurrency ``C``, lengths uniform in [0.8, 1] x ISL) and
the serving model's prediction for each (``validate_serving.predict``); nothing in the model
changes and no figure printed here is fed back into it. The gap of a row is measured minus
modelled mean TTFT, in ms. Per deployment (engine, version, model, GPU, TP/EP/attention DP, run
day and the client's warm-up, ``warmup_split.warmup``) it prints the gap at each prompt/output
length and concurrency, then five checks, each a reading's prediction set against the rows:

- ``const``: the median gap at concurrency <= 16, the deployment's constant; ``x32-64``: the
  median gap at concurrency 32-64 over it (1.0 for a per-request delay that does not depend on
  load);
- ``prefill``: if the model's prefill rate were too fast, the TTFT growth from 1k to 8k prompts
  would exceed the model's by the same factor as the 1k gap: the measured growth over the
  modelled one at concurrency <= 16 (``dTTFT 1k->8k``);
- ``engine``: if the gap were engine time in the prompt's iteration, every running request
  would stall for it once per prompt admitted. A closed loop admits ``lam = C / E2E`` prompts a
  second (Little's law on the measured end-to-end latency), so the engine would be stalled a
  share ``lam x gap`` of the time and TPOT would read ``model / (1 - lam x gap)``: printed beside
  the measured TPOT over the model's, at the deployment's highest concurrency at 1k prompts;
- ``interval``: a first token held until the ``stream_interval``-th would add
  ``(interval - 1) x TPOT`` (the launch's interval, ``STREAM_INTERVAL``; engines' default 1);
- ``first wave``: a one-time cost ``S`` paid by the first ``C`` of ``N = 10 C`` requests (kernels
  compiled at first use of a shape) moves the mean by ``S x C / N``: the ``S`` each gap implies,
  and the number of JIT kernel builds it would take at the published DeepGEMM build times on an
  H100 host (``JIT_BUILD_S``).

Then the constant by TP for deployments that differ only in TP, and how many of the
deployments whose constant is at least ``MIN_GAP`` each test rules a reading out for. The dense
rows are the controls: Llama-3.1-70B on TensorRT-LLM ran the image (``release:1.1.0rc2.post2``),
the client (``kimbochen/bench_serving``, ``--backend openai``, streamed completions) and the
``stream_interval: 10`` of the DeepSeek-R1 runs of 2025-11-02 (InferenceX
``70b_fp8_h200_trt_slurm.sh`` before b89047d5f, ``dsr1_fp8_h200_trt_slurm.sh`` at e06929c70).

    PYTHONPATH=src python benchmarks/moe_ttft_gap.py [--engines trtllm,sglang,vllm]
        [--model REGEX] [--arch moe|dense|all]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpuscale import catalog
from gpuscale.validation.serving_fields import INFERENCEX_SOURCES, measured_day
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct, served_model
from validate_serving import ROWS, predict
from warmup_split import warmup

ENGINES = ("sglang", "trtllm", "vllm")
"""The engines of the rows (``ServingRow.engine``)."""
MIN_GAP = 40.0
"""A deployment whose constant is at least this many ms is judged by the checks (below it the
model fits within the rows' run-to-run noise)."""
LIGHT = 16
"""Concurrency up to which a deployment's gap is read as its constant."""
HIGH = (32, 64)
ROUNDS = 10
"""InferenceX's client sends ``--num-prompts $((CONC * 10))``
(``serving_clients.INFERENCEX_ROUNDS``)."""

STREAM_INTERVAL = {
    ("trtllm", "DeepSeek"): 10,
    ("trtllm", "Llama-3.1-70B"): 10,
    ("trtllm", "gpt-oss-120b"): 20,
    ("sglang", "DeepSeek"): 10,
    ("sglang", "Qwen3.5-397B-A17B"): 50,
}
"""The InferenceX launches' streaming interval: ``stream_interval: 10`` in
``benchmarks/dsr1_fp8_h200_trt_slurm.sh`` (e06929c70, f6a9d0b6a) and
``70b_fp8_h200_trt_slurm.sh`` (before b89047d5f), ``stream_interval: 20`` in
``gptoss_fp4_h200_trt_slurm.sh`` (e06929c70, f6a9d0b6a), ``--stream-interval 10`` in
``single_node/dsr1_fp8_h200.sh`` (41aff0afc) and ``50`` in ``single_node/qwen3.5_fp8_h200.sh``
(f7135ac10). The GLM-5 and vLLM launches set none (default 1)."""

JIT_BUILD_S = (("NVCC", 2.12, 2.56), ("NVRTC", 0.96, 1.39), ("NVRTC+PCH", 0.35, 0.78))
"""Build time of one DeepGEMM FP8 GEMM kernel (s, range over the 18 shapes of the table),
Xeon Platinum 8480C + H100: deepseek-ai/DeepGEMM PR #94 ("Refactor JIT compilation (+NVRTC
support)", merged 2025-05). TensorRT-LLM's Hopper block-FP8 GEMMs build the same kind of kernel
per (N, K, block_m, block_n, stages, multicast), the tile picked from the token count M
(``gemm_dispatch_sm90``: ``deep_gemm::jit::get_best_gemm_config(shape_m, ...)`` then
``getGlobalCompiler().build(...)``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One distinct row, measured and modelled."""

    deployment: tuple[str, ...]
    isl: int
    osl: int
    out_mean: float
    c: int
    meas_ttft: float
    pred_ttft: float
    meas_tpot: float
    pred_tpot: float

    @property
    def gap(self) -> float:
        return self.meas_ttft - self.pred_ttft


def _family(model_path: str) -> str:
    name = model_path.rsplit("/", 1)[-1]
    return "DeepSeek" if name.startswith("DeepSeek-") else name


def _arch(model_path: str) -> str:
    return "moe" if catalog.model(model_path).is_moe else "dense"


def deployment(row: ServingRow) -> tuple[str, ...]:
    r, kw = row.raw, row.kwargs
    day = measured_day(r) or "-"
    return (
        row.engine,
        r["backend_version"] or "-",
        _family(served_model(row)),
        r["system"].split("_")[0],
        f"tp{kw.get('tp', 1)} ep{kw.get('ep', 1)} dp{kw.get('attention_dp', 1)}",
        day,
        warmup(row),
    )


def runs(engines: set[str], model: str, arch: str) -> list[Run]:
    out: list[Run] = []
    # ``distinct`` counts a run once however its records write it (the db-dump's DeepSeek-V3
    # label for R1 runs, the export's TP x EP tp_size).
    for row in distinct(load(ROWS)):
        r = row.raw
        if row.mode != "agg" or not row.expressible or row.engine not in engines:
            continue
        if not r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
            continue
        if not re.search(model, served_model(row)):
            continue
        if arch != "all" and _arch(served_model(row)) != arch:
            continue
        o = predict(row)
        out.append(
            Run(
                deployment=deployment(row),
                isl=int(r["isl"]),
                osl=int(r["osl"]),
                out_mean=float(row.kwargs["output_len"]),
                c=row.concurrency,
                meas_ttft=row.ttft_ms,
                pred_ttft=float(o["ttft_ms"]),
                meas_tpot=row.tpot_ms,
                pred_tpot=float(o["tpot_ms"]),
            )
        )
    return out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _fmt(x: float | None, spec: str = "6.0f") -> str:
    if x is not None:
        return format(x, spec)
    width = spec.split(".")[0]
    return "-".rjust(int(width) if width else 1)


def blocking_tpot_ratio(run: Run) -> float | None:
    """Model TPOT x 1 / (1 - lam x gap) over the model's TPOT, where ``lam = C / E2E`` is the
    closed loop's prompt rate from the measured latencies (Little's law); None when the implied
    stall share reaches 1 (the engine could not keep up at all)."""
    e2e_s = (run.meas_ttft + (run.out_mean - 1) * run.meas_tpot) / 1e3
    share = run.c / e2e_s * max(run.gap, 0.0) / 1e3
    return 1 / (1 - share) if share < 1 else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    const: float | None
    high_ratio: float | None
    growth_meas: float | None
    growth_model: float | None
    tpot_meas: float | None
    tpot_blocking: float | None
    interval_ms: float | None
    stall_s: float | None


def summarize(dep: tuple[str, ...], rs: list[Run]) -> Summary:
    light = [x for x in rs if x.c <= LIGHT]
    const = _median([x.gap for x in light])
    high = _median([x.gap for x in rs if x.c in HIGH])
    growth_m: list[float] = []
    growth_p: list[float] = []
    for a in light:
        if a.isl != 1024:
            continue
        for b in light:
            if b.isl == 8192 and b.osl == a.osl and b.c == a.c:
                growth_m.append(b.meas_ttft - a.meas_ttft)
                growth_p.append(b.pred_ttft - a.pred_ttft)
    top = max((x for x in rs if x.isl == 1024), key=lambda x: (x.c, -x.osl), default=None)
    interval = STREAM_INTERVAL.get((dep[0], dep[2]), 1)
    return Summary(
        const=const,
        high_ratio=high / const if high is not None and const and const >= MIN_GAP else None,
        growth_meas=_median(growth_m),
        growth_model=_median(growth_p),
        tpot_meas=top.meas_tpot / top.pred_tpot if top else None,
        tpot_blocking=blocking_tpot_ratio(top) if top else None,
        interval_ms=_median([(interval - 1) * x.meas_tpot for x in light]),
        stall_s=const * ROUNDS / 1e3 if const is not None else None,
    )


def print_deployment(dep: tuple[str, ...], rs: list[Run]) -> Summary:
    eng, ver, fam, gpu, par, day, warm = dep
    print(f"== {eng} {ver} {fam} {gpu} {par} measured {day} warm-up {warm} ({len(rs)} runs)")
    cs = sorted({x.c for x in rs})
    print(
        f"   {'isl x osl':>11}  gap ms (measured - modelled TTFT) at c = "
        + " ".join(f"{c:>6}" for c in cs)
    )
    shapes = sorted({(x.isl, x.osl) for x in rs})
    for isl, osl in shapes:
        by_c = {x.c: x for x in rs if (x.isl, x.osl) == (isl, osl)}
        cells = " ".join(_fmt(by_c[c].gap) if c in by_c else "     -" for c in cs)
        print(f"   {isl:>5}x{osl:<5}  {' ' * 42}{cells}")
    s = summarize(dep, rs)
    grow = (
        f"{_fmt(s.growth_meas, '.0f')} ms measured / {_fmt(s.growth_model, '.0f')} modelled"
        if s.growth_meas is not None
        else "-"
    )
    builds = ", ".join(
        f"{name} {s.stall_s / hi:.1f}-{s.stall_s / lo:.1f}"
        for name, lo, hi in JIT_BUILD_S
        if s.const is not None and s.stall_s is not None and s.const >= MIN_GAP
    )
    print(
        f"   const {_fmt(s.const, '.0f')} ms (c <= {LIGHT})  x32-64 {_fmt(s.high_ratio, '.2f')}  "
        f"dTTFT 1k->8k {grow}\n"
        f"   engine: TPOT at top c measured/model {_fmt(s.tpot_meas, '.2f')}, with the gap "
        f"blocking {_fmt(s.tpot_blocking, '.2f')}  interval: (interval - 1) x TPOT "
        f"{_fmt(s.interval_ms, '.0f')} ms\n"
        f"   first wave: S = {_fmt(s.stall_s, '.2f')} s  = JIT builds {builds or '-'}"
    )
    return s


VERDICTS = (
    (
        "prefill rate (gap grows with the prompt)",
        "measured 1k->8k growth <= 1.25 x the model's",
        lambda s: (
            None
            if s.growth_meas is None or s.growth_model is None
            else s.growth_meas <= 1.25 * s.growth_model
        ),
    ),
    (
        "engine time in the prompt's iteration",
        "measured TPOT/model below the blocking reading by > 0.2",
        lambda s: (
            None
            if s.tpot_blocking is None or s.tpot_meas is None
            else s.tpot_blocking - s.tpot_meas > 0.2
        ),
    ),
    (
        "first token held to the stream interval",
        "(interval - 1) x TPOT outside [0.67, 1.5] x the constant",
        lambda s: (
            None
            if s.interval_ms is None or s.const is None
            else not 0.67 <= s.interval_ms / s.const <= 1.5
        ),
    ),
    (
        "a fixed delay (per request, or one S)",
        "gap at c 32-64 over the constant > 1.3",
        lambda s: None if s.high_ratio is None else s.high_ratio > 1.3,
    ),
)
"""Each reading, the test that rules it out for one deployment (``Summary`` -> True: ruled out,
False: not ruled out, None: the deployment has no rows that can judge it)."""


def print_verdicts(summaries: dict[tuple[str, ...], Summary]) -> None:
    judged = {dep: s for dep, s in summaries.items() if s.const is not None and s.const >= MIN_GAP}
    print(
        f"\nreadings against the {len(judged)} deployments whose constant is >= {MIN_GAP:.0f} ms "
        "(ruled out / judged):"
    )
    for name, test, rule in VERDICTS:
        votes = [rule(s) for s in judged.values()]
        n = sum(v is not None for v in votes)
        out = sum(v is True for v in votes)
        print(f"   {name:44} {out:3d} / {n:<3d} ({test})")


def print_tp(groups: dict[tuple[str, ...], list[Run]]) -> None:
    """The constant and the 1k/1k C = 4 gap by TP, for deployments equal but in TP."""
    by: dict[tuple[str, ...], dict[tuple[int, int], list[Run]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for dep, rs in groups.items():
        tp, ep, dp = (int(v[2:]) for v in dep[4].split())
        if dp != 1:
            continue
        # one engine build, model, GPU, month and warm-up; TP (and the EP that goes with it)
        # varies
        by[(dep[0], dep[1], dep[2], dep[3], dep[5][:7], dep[6])][(tp, ep)].extend(rs)
    print("\nconstant (median gap, c <= 16) / the 1k/1k c4 gap by TP (attention DP 1), ms:")
    for key, tps in sorted(by.items()):
        if len(tps) < 2:
            continue
        cells = []
        for (tp, ep), rs in sorted(tps.items()):
            const = _median([x.gap for x in rs if x.c <= LIGHT])
            c4 = _median([x.gap for x in rs if (x.isl, x.osl, x.c) == (1024, 1024, 4)])
            cells.append(f"tp{tp}ep{ep}: {_fmt(const, '.0f')} / {_fmt(c4, '.0f')}")
        print(f"   {key[0]:7} {key[2]:16} {key[3]} {key[4]} {key[5]:9} " + "  ".join(cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", default="trtllm,sglang,vllm")
    ap.add_argument("--model", default=".", help="regex on the rows' model_path")
    ap.add_argument("--arch", default="all", choices=("moe", "dense", "all"))
    args = ap.parse_args()
    engines = set(args.engines.split(","))
    if unknown := sorted(engines - set(ENGINES)):
        ap.error(f"--engines: unknown {', '.join(unknown)}; accepted: {', '.join(ENGINES)}")
    try:
        re.compile(args.model)
    except re.error as err:
        ap.error(f"--model {args.model!r} is not a regular expression ({err})")
    rs = runs(engines, args.model, args.arch)
    if not rs:
        print("no aggregated InferenceX rows match")
        return
    groups: dict[tuple[str, ...], list[Run]] = defaultdict(list)
    for x in rs:
        groups[x.deployment].append(x)
    print(
        f"aggregated InferenceX rows: {len(rs)} distinct runs, {len(groups)} deployments; "
        "gap = measured - modelled mean TTFT (ms)\n"
    )
    summaries = {dep: print_deployment(dep, groups[dep]) for dep in sorted(groups)}
    print_tp(groups)
    print_verdicts(summaries)


if __name__ == "__main__":
    main()
