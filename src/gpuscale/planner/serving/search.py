"""The deployment with the most goodput per GPU (or per dollar) under a latency SLO.

Goodput is the output-token rate of requests that meet the SLO (DistServe, Zhong et al.
OSDI'24, Sec. 2.2): for each candidate (TP x PP x EP x attention-DP x replicas, aggregated or
disaggregated) the load curve is walked up to the highest throughput whose p99 TTFT and p99
TPOT stay inside the targets; that throughput, divided by the GPUs used, ranks the candidates.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.serving.formats import WeightFormat
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    _iteration_model,
    kv_pool,
    predict_aggregated,
    predict_disaggregated,
)
from gpuscale.planner.serving.steady_state import Workload, load_curve
from gpuscale.specs import Cluster, ModelSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    label: str
    mode: str
    par: Parallelism
    replicas: int = 1
    prefill: Pool | None = None
    decode: Pool | None = None

    @property
    def gpus(self) -> int:
        if self.prefill is not None and self.decode is not None:
            return self.prefill.gpus + self.decode.gpus
        return self.par.gpus * self.replicas


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    cand: Candidate
    concurrency: int
    goodput_tokens_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    requests_per_s: float


def _degrees(limit: int) -> list[int]:
    return [d for d in (1, 2, 4, 8, 16, 32, 64) if d <= limit]


def _engine_pars(model: ModelSpec, max_gpus: int, per_node: int) -> Iterator[Parallelism]:
    for tp in _degrees(max_gpus):
        heads_ok = model.num_heads % tp == 0 or model.is_moe
        if not heads_ok:
            continue
        for pp in (1, 2, 4):
            if tp * pp > max_gpus or (pp > 1 and tp < per_node):
                continue
            if model.is_moe:
                for ep in sorted({1, tp}):
                    for dp in sorted({1, tp}) if ep == tp else (1,):
                        if model.num_experts % ep == 0:
                            yield Parallelism(tp=tp, pp=pp, ep=ep, attention_dp=dp)
            else:
                yield Parallelism(tp=tp, pp=pp)


def label(par: Parallelism) -> str:
    parts = [f"TP{par.tp}"]
    if par.pp > 1:
        parts.append(f"PP{par.pp}")
    if par.ep > 1:
        parts.append(f"EP{par.ep}")
    if par.attention_dp > 1:
        parts.append(f"DP-attn{par.attention_dp}")
    return "-".join(parts)


def candidates(model: ModelSpec, gpus: int, per_node: int, disagg: bool = True) -> list[Candidate]:
    out: list[Candidate] = []
    pars = list(_engine_pars(model, gpus, per_node))
    for par in pars:
        reps = gpus // par.gpus
        if reps >= 1:
            out.append(
                Candidate(label=f"{reps} x {label(par)}", mode="aggregated", par=par, replicas=reps)
            )
    if disagg and gpus >= 2:
        small = [p for p in pars if p.pp == 1]
        for pp_ in small:
            for dp_ in small:
                for n_p in range(1, gpus // pp_.gpus + 1):
                    left = gpus - n_p * pp_.gpus
                    n_d = left // dp_.gpus
                    if n_d < 1 or n_d < n_p:
                        continue
                    out.append(
                        Candidate(
                            label=f"{n_p} x {label(pp_)} prefill + {n_d} x {label(dp_)} decode",
                            mode="disaggregated",
                            par=dp_,
                            prefill=Pool(workers=n_p, par=pp_),
                            decode=Pool(workers=n_d, par=dp_),
                        )
                    )
    return out


def score(
    cand: Candidate,
    model: ModelSpec,
    cluster: Cluster,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    slo_ttft_s: float,
    slo_tpot_s: float,
) -> Scored | None:
    """Highest concurrency (powers of two) whose p99 TTFT and TPOT meet the SLO."""
    best: Scored | None = None
    lo_c = 1
    if cand.mode == "aggregated":
        kv, _, _ = kv_pool(model, cluster, cand.par, fmt, kv_dtype, profile, eng, work)
        if kv < work.input_len + work.output_len:
            return None
        it = _iteration_model(model, cluster, cand.par, fmt, kv_dtype, profile, eng)
        curve = load_curve(it, eng, work, kv)
        top = int(np.flatnonzero(curve.feasible)[-1]) if curve.feasible.any() else 0
        lo_c = max(1, int(curve.running[top] * cand.par.attention_dp * cand.replicas))
    for c in sorted({2**k for k in range(0, 13)} | {lo_c}):
        client = Client(concurrency=c)
        try:
            if cand.mode == "aggregated":
                p = predict_aggregated(
                    model,
                    cluster,
                    cand.par,
                    cand.replicas,
                    fmt,
                    kv_dtype,
                    profile,
                    eng,
                    work,
                    client,
                )
            else:
                assert cand.prefill is not None and cand.decode is not None
                p = predict_disaggregated(
                    model,
                    cluster,
                    cand.prefill,
                    cand.decode,
                    fmt,
                    kv_dtype,
                    profile,
                    eng,
                    work,
                    client,
                )
        except InputError:
            return best
        if not p.fits:
            return None
        if p.pct["ttft_p99"] > slo_ttft_s or p.pct["tpot_p99"] > slo_tpot_s:
            if c > lo_c:
                break
            continue
        if best is None or p.output_tokens_per_s > best.goodput_tokens_per_s:
            best = Scored(
                cand=cand,
                concurrency=c,
                goodput_tokens_per_s=p.output_tokens_per_s,
                ttft_p99_s=p.pct["ttft_p99"],
                tpot_p99_s=p.pct["tpot_p99"],
                requests_per_s=p.requests_per_s,
            )
        if p.saturated:
            break
    return best
