"""MoE prefill, term by term: what the serving model charges a prompt on each MoE deployment of
the validation rows, against what the rows measure at the lowest concurrency of their sweep.

At concurrency <= 4 (``--max-concurrency``) a request waits for almost nothing, so its TTFT over
its prompt length is a line: the slope is the deployment's prefill rate, the intercept what does
not grow with the prompt. Per aggregated MoE deployment (engine, build, model, GPU, TP/EP/DP,
concurrency) with two or more prompt lengths this prints

- the measured and the modelled TTFT line (least squares over the rows' mean prompt lengths;
  the model at each row's own load, as ``validate_serving.py`` prices it);
- the model's single-prompt GPU time per 1k prompt tokens term by term
  (``IterationModel.parts_s`` between the shortest and the longest prompt, no decodes):
  token-mixer projections, attention, the grouped expert GEMMs, the rest of the MoE layer
  (router, routing glue, shared experts), communication, and the rest (elementwise, kernel
  gaps, dense layers, head); and the eager host floor where the engine runs prompt-carrying
  iterations without CUDA graphs (the iteration lasts the larger of it and the GPU time);
- ``excess``: measured slope minus the model's GPU slope, and what it would take in the experts
  alone: the factor on the expert term (``x experts``) and the useful expert FLOP/s that
  would imply, as a share of the GPU's peak for the experts' math precision (``of peak``). A
  factor near 1 says the prefill rate is priced right; a share far below what the engine's
  grouped kernel sustains in published kernel benchmarks says the excess is not the experts.

It changes nothing in the model (docs/investigations/serving-moe-prefill.md, "MoE prefill, term
by term").

    PYTHONPATH=src python benchmarks/moe_prefill_audit.py [--engine E] [--model REGEX]
        [--max-concurrency 4]
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuscale import catalog
from gpuscale.api.serving import infer, served_format, served_kv_dtype
from gpuscale.catalog.serving_engines import engine as engine_profile
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import gemm_precision
from gpuscale.costmodel.serving.iteration import (
    GPU_TERMS,
    MOE_ROUTED_COPY_PASSES,
    IterationModel,
    Parallelism,
)
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
# The parts of ``IterationModel.parts_s`` shown on their own; the rest is summed as "rest".
SHOWN = ("projections", "attention", "experts", "moe_other", "communication")


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points (x, y)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0.0:
        raise ValueError("a line needs at least two distinct x values")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def iteration_model(row: ServingRow) -> IterationModel:
    """The per-iteration cost model ``infer`` builds for an aggregated row's deployment."""
    kw = row.kwargs
    spec = catalog.model(row.raw["model_path"])
    gpu = catalog.gpu(kw["gpu"])
    eng = engine_profile(kw["engine"]).for_device(gpu)
    weights = kw.get("weights", "auto")
    fmt = served_format(row.raw["model_path"], weights, spec)
    kv = served_kv_dtype(row.raw["model_path"], weights, fmt, eng, kw.get("kv_dtype", "auto"), spec)
    par = Parallelism(
        tp=kw.get("tp", 1),
        pp=kw.get("pp", 1),
        ep=kw.get("ep", 1),
        attention_dp=kw.get("attention_dp", 1),
    )
    cluster = catalog.cluster(kw["gpu"], par.gpus)
    return _iteration_model(spec, cluster, par, fmt, kv, load_profile(eng.cost_profile), eng)


def prompt_parts_ms(it: IterationModel, tokens: float) -> dict[str, float]:
    """Each term of one iteration that prefills a single ``tokens``-token prompt alone, in ms
    (causal: its queries attend to half the prompt on average)."""
    p = np.array([float(tokens)])
    parts = it.parts_s(np.zeros(1), np.zeros(1), p, p / 2.0)
    return {k: float(v[0]) * 1e3 for k, v in parts.items()}


def expert_flops(it: IterationModel, tokens: float) -> float:
    """Useful FLOPs of the grouped expert GEMMs of one prompt of ``tokens`` tokens on the busiest
    rank, as the model counts them (routed pairs x 2 x the three matrices at the experts' stored
    dims: gate and up over ``moe_expert_dims``' hidden, down out to ``moe_expert_out_hidden``)."""
    m, par = it.model, it.par
    he, f = it.moe_expert_dims()
    mats_up = 2.0 if m.mlp == "gated" else 1.0
    pairs = tokens * par.attention_dp * m.experts_per_token / par.ep
    per_pair = (mats_up * he + it.moe_expert_out_hidden()) * f
    return 2.0 * pairs * per_pair * (m.num_layers - m.dense_layers)


# Copies of the routed tokens' hidden state a MoE layer moves outside its two grouped GEMMs
# (whose own activation reads and writes ``IterationModel`` prices with each GEMM). The model
# charges ``MOE_ROUTED_COPY_PASSES`` (4; ``iteration.py``: "topk_softmax, moe_align_block_size, silu_and_mul, moe_sum, each
# reading or writing the tokens' top-k copies"); by the kernels, only one of those four touches
# a hidden-width top-k copy: vLLM's and SGLang's fused_moe gather rows inside the first GEMM
# and reduce the top-k outputs in moe_sum / moe_sum_reduce (one read of tokens x top-k x
# hidden; top-k softmax reads logits, the alignment token ids, act_and_mul the intermediate
# width), and TensorRT-LLM's CUTLASS fused MoE writes a permuted copy (expandInputRows) and reads
# the second GEMM's output back in finalizeMoeRouting (two).
MODEL_COPY_PASSES = MOE_ROUTED_COPY_PASSES
ENGINE_COPY_PASSES = {"vllm": 1.0, "sglang": 1.0, "trtllm": 2.0}


@dataclass(frozen=True, slots=True, kw_only=True)
class Audit:
    """One deployment's measured and modelled prefill line and the model's terms."""

    key: tuple[Any, ...]
    lengths: tuple[float, ...]
    meas: tuple[float, float]
    model: tuple[float, float]
    terms: dict[str, float]
    """Model GPU ms per 1k prompt tokens by term (single prompt), plus ``gpu`` and ``rest``."""
    floor_ms: float
    experts_hi_ms: float
    """The model's expert GEMM time for the longest prompt alone."""
    expert_flops_hi: float
    peak_flops: float
    copies_per_k: float
    """Of ``moe_other``: ms per 1k prompt tokens the model's hidden-copy passes cost."""
    engine_copies_per_k: float
    """The same at the engine's count of copy passes (``ENGINE_COPY_PASSES``)."""

    @property
    def excess(self) -> float:
        """Measured slope minus the model's GPU slope, ms per 1k prompt tokens."""
        return self.meas[1] - self.terms["gpu"]

    @property
    def excess_hi_ms(self) -> float:
        """The excess over the span of the deployment's prompts, ms."""
        return self.excess * (self.lengths[-1] - self.lengths[0]) / 1e3

    @property
    def experts_factor(self) -> float:
        """The factor on the longest prompt's expert time that would close the slope alone."""
        e = self.experts_hi_ms
        return (e + self.excess_hi_ms) / e if e > 0 else float("nan")

    @property
    def model_share(self) -> float:
        """The useful expert FLOP/s the model gives the longest prompt, as a share of the
        experts' math peak."""
        e = self.experts_hi_ms
        return self.expert_flops_hi / (e * 1e-3) / self.peak_flops if e > 0 else float("nan")

    @property
    def implied_share(self) -> float:
        """The useful expert FLOP/s the measured slope implies if its excess were all in the
        experts, as a share of the experts' math peak."""
        f = self.experts_factor
        return self.model_share / f if f > 0 else float("nan")


def audit(rows: list[ServingRow]) -> Audit:
    """The audit of one deployment from its rows (two or more mean prompt lengths)."""
    xs = [float(r.kwargs["input_len"]) for r in rows]
    meas = line_fit(xs, [r.ttft_ms for r in rows])
    pred = [
        float(infer(r.raw["model_path"], **r.kwargs).to_dict()["options"][0]["ttft_ms"])
        for r in rows
    ]
    model = line_fit(xs, pred)
    it = iteration_model(rows[0])
    lo, hi = min(xs), max(xs)
    a, b = prompt_parts_ms(it, lo), prompt_parts_ms(it, hi)
    per_k = 1e3 / (hi - lo)
    terms = {k: (b[k] - a[k]) * per_k for k in (*GPU_TERMS, "gpu")}
    terms["rest"] = terms["gpu"] - sum(terms[k] for k in SHOWN)
    dev = it.cluster.device
    prec = gemm_precision(it.fmt, dev)
    m = it.model
    moe_layers = m.num_layers - m.dense_layers if m.is_moe else 0
    hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * it.profile.hbm_efficiency
    # One pass over 1k tokens' top-k copies of the hidden state, all MoE layers, ms.
    one_pass = 1e3 * m.experts_per_token * m.hidden_size * 2.0 / hbm * moe_layers * 1e3
    r0 = rows[0]
    key = (
        r0.engine,
        r0.raw.get("backend_version", "") or "-",
        r0.raw["model_path"].split("/")[-1][:18],
        r0.kwargs["gpu"].split("-")[0],
        it.par.tp,
        it.par.ep,
        it.par.attention_dp,
        r0.concurrency,
    )
    return Audit(
        key=key,
        lengths=tuple(sorted(set(xs))),
        meas=(meas[0], meas[1] * 1e3),
        model=(model[0], model[1] * 1e3),
        terms=terms,
        floor_ms=a["host_floor"],
        experts_hi_ms=b["experts"],
        expert_flops_hi=expert_flops(it, hi),
        peak_flops=dev.peak(prec) * 1e12,
        copies_per_k=MODEL_COPY_PASSES * one_pass,
        engine_copies_per_k=ENGINE_COPY_PASSES[r0.engine] * one_pass,
    )


def deployments(
    max_concurrency: int, engine: str | None, model: str | None
) -> dict[tuple[Any, ...], list[ServingRow]]:
    """Aggregated expressible MoE rows at the lowest concurrency of each deployment's sweep
    (at most ``max_concurrency``), one run counted once, grouped by deployment."""
    by: dict[tuple[Any, ...], list[ServingRow]] = defaultdict(list)
    seen: set[tuple[Any, ...]] = set()
    for r in load(ROWS):
        if r.mode != "agg" or not r.expressible or r.concurrency > max_concurrency:
            continue
        if engine and r.engine != engine:
            continue
        if model and not re.search(model, r.raw["model_path"], re.IGNORECASE):
            continue
        try:
            if not catalog.model(r.raw["model_path"]).is_moe:
                continue
        except InputError:
            continue
        kw = {
            k: v
            for k, v in r.kwargs.items()
            if k not in ("input_len", "output_len", "input_cv", "output_cv")
        }
        run = (r.raw["model_path"], r.engine, repr(sorted(r.kwargs.items())), r.ttft_ms)
        if run in seen:  # the same run under two exports or two model names
            continue
        seen.add(run)
        dep = (
            r.engine,
            r.raw.get("backend_version", ""),
            r.raw["model_path"],
            repr(sorted(kw.items())),
        )
        by[dep].append(r)
    # The lowest concurrency of each deployment only.
    out: dict[tuple[Any, ...], list[ServingRow]] = {}
    for dep, rs in by.items():
        c = min(r.concurrency for r in rs)
        low = [r for r in rs if r.concurrency == c]
        if len({r.kwargs["input_len"] for r in low}) >= 2:
            out[dep] = low
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--engine", choices=("trtllm", "vllm", "sglang"), default=None)
    ap.add_argument("--model", default=None, help="regular expression on the row's model_path")
    args = ap.parse_args()
    deps = deployments(args.max_concurrency, args.engine, args.model)
    print(
        "TTFT = a + b x mean prompt (ms + ms per 1k tokens) at the lowest concurrency; model GPU\n"
        "slope by term for one prompt alone (ms per 1k tokens); floor = eager host floor (ms);\n"
        "excess = measured slope - model GPU slope; x experts / of peak: the expert factor that\n"
        "would close it alone and the expert rate that implies (share of the math peak)\n"
    )
    head = (
        f"{'engine':6} {'build':11} {'model':18} {'gpu':4} {'tp':>2} {'ep':>2} {'dp':>2} {'c':>2} "
        f"{'measured':>14} {'model':>14} | {'proj':>5} {'attn':>5} {'expert':>6} {'moe+':>5} "
        f"{'comm':>5} {'rest':>5} {'gpu':>5} | {'floor':>5} | {'excess':>6} {'x exp':>5} "
        f"{'model':>5} {'implied':>7} | {'copies':>6} {'engine':>6}"
    )
    print(head)
    print(f"{'':126}{'of peak':>13}   {'ms/1k':>6} {'ms/1k':>6}")
    audits = sorted((audit(rs) for rs in deps.values()), key=lambda a: a.key)
    for a in audits:
        e, b, m, d, tp, ep, dp, c = a.key
        t = a.terms
        print(
            f"{e:6} {b[:11]:11} {m:18} {d:4} {tp:2d} {ep:2d} {dp:2d} {c:2d} "
            f"{a.meas[0]:5.0f} + {a.meas[1]:5.1f} {a.model[0]:5.0f} + {a.model[1]:5.1f} | "
            f"{t['projections']:5.1f} {t['attention']:5.1f} {t['experts']:6.1f} "
            f"{t['moe_other']:5.1f} {t['communication']:5.1f} {t['rest']:5.1f} {t['gpu']:5.1f} | "
            f"{a.floor_ms:5.0f} | {a.excess:+6.1f} {a.experts_factor:5.2f} "
            f"{a.model_share:5.2f} {a.implied_share:7.2f} | "
            f"{a.copies_per_k:6.1f} {a.engine_copies_per_k:6.1f}"
        )


if __name__ == "__main__":
    main()
