"""The deployment with the most goodput per GPU (or per dollar) under a latency SLO.

Goodput is the output-token rate of requests that meet the SLO (DistServe, Zhong et al.
OSDI'24, Sec. 2.2): for each candidate (TP x PP x EP x attention-DP x replicas, aggregated or
disaggregated) the highest Poisson request rate whose p99 TTFT and p99 TPOT stay inside the
targets; that throughput, divided by the GPUs used, ranks the candidates.

Two readings of a candidate, one rule for what is reported. The pre-screen (:func:`walk`,
:func:`score`) is vectorized: the steady state along the candidate's load curve, without the
open loop's admission queue. The places the search reports are priced by :func:`price` with
the functions ``infer --request-rate`` itself calls (``deployment.predict_aggregated`` /
``predict_disaggregated``, their load-independent part built once per candidate), so the
figures it prints for a deployment are the ones ``infer`` prints for that deployment at that
rate (``tests/unit/test_serving_search_agrees_with_infer.py``). A closed-loop benchmark at
the same mean number in flight (``infer --concurrency``) is another load: its first round is a
burst of every client on a drained engine, which its p99 TTFT counts.

The pre-screen's grid reading bounds the price: the SLO (or the capacity) fails at its next
grid load, a load of the very grid ``infer`` reads its curves on, where ``infer``'s p99s are at
least the steady state's (it adds the queue). :func:`rank` takes the candidates best bound
first and prices only those whose bound could still reach the places shown; the answer equals
pricing every candidate (tests/unit/test_serving_search_capacity.py,
tests/unit/test_serving_search_slo.py), as the training planner's ``step_time_floor_s`` pruning
equals pricing every plan. Without pricing (``rank`` with no pricer) the pre-screen's edge is
resolved by the steady state's own rule (``steady_state.resolve_capacity`` / ``refine_edge``,
with the SLO as a further condition). Every reading takes the first load that misses the SLO
(a load past one that misses is not reached within the SLO, were a p99 to fall again); the
p99s' monotony in the load, of the pre-screen and of ``infer``'s open loop, is checked by
``benchmarks/search_slo_monotone.py``."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.serving.formats import WeightFormat
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import (
    Client,
    Pool,
    Prediction,
    _iteration_model,
    decode_admission_s,
    disaggregated_curves,
    disaggregated_engines,
    disaggregated_limit,
    disaggregated_prediction,
    engine_curve,
    engine_prediction,
    kv_pool,
    kv_transfer_s,
    kv_transfer_wait_s,
    pools_placement,
    prefill_worker_engine,
)
from gpuscale.planner.serving.placement import placeable
from gpuscale.planner.serving.steady_state import (
    GRID,
    LoadCurve,
    Workload,
    Z,
    capacity_limit,
    load_curve,
    prefill_curve,
    refine_edge,
    resolve_capacity,
)
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
    mean_in_flight: int
    """Requests in flight on average at ``requests_per_s`` (Little's law), not a closed
    loop's clients (the ``--json`` key ``mean_requests_in_flight``)."""
    goodput_tokens_per_s: float
    ttft_p99_s: float
    tpot_p99_s: float
    requests_per_s: float
    capacity_resolved: bool = True
    """The goodput is the one the resolved edge gives: the capacity or the SLO crossing,
    whichever ends the walk, resolved (or the grid's end binds, so resolving cannot move it).
    False: read off the grid, a lower bound. (The name predates resolving the SLO crossing;
    it is the ``--json`` key.)"""
    goodput_bound_tokens_per_s: float = 0.0
    """Most the goodput can be once the edge is resolved (the goodput itself when
    ``capacity_resolved``)."""
    limit: str = "capacity"
    """What ends the walk up the load: ``capacity`` (which limit sets it:
    :attr:`capacity_limit`), or the p99 targets the next load misses: ``ttft``, ``tpot`` or
    ``ttft+tpot``."""
    capacity_limit: str = ""
    """What ends the deployment's feasible loads at its capacity, as its curves compute it
    (``deployment.Prediction.capacity_limit``: ``running_slots``, ``kv_cache``,
    ``token_budget``, ``throughput_peak``; disaggregated ``prefill_throughput``,
    ``kv_transfer`` or ``decode_`` and the decode workers' own; ``+`` joins several). Set
    whatever ends the walk; ``""`` where no load of the curve passes one."""
    exact: bool = False
    """The figures are ``infer``'s for this deployment under Poisson arrivals at
    ``requests_per_s`` (:func:`price`); False: the pre-screen's steady state (:func:`score`)."""

    @property
    def per_gpu(self) -> float:
        return self.goodput_tokens_per_s / self.cand.gpus

    @property
    def bound_per_gpu(self) -> float:
        return max(self.goodput_bound_tokens_per_s, self.goodput_tokens_per_s) / self.cand.gpus


@dataclass(frozen=True, slots=True, kw_only=True)
class Walk:
    """A candidate's load curve as the search walks it: at each load ``x`` (requests/s per
    rank: attention-DP rank times replica for an engine, the deployment for a disaggregated
    one), whether it is feasible (within the capacity), the p99 TTFT and TPOT (s) and the
    mean end-to-end latency (s); ``growth[j]`` bounds the load between ``x[j]`` and
    ``x[j+1]`` as a factor over ``x[j]``."""

    x: np.ndarray
    feasible: np.ndarray
    ttft99: np.ndarray
    tpot99: np.ndarray
    e2e: np.ndarray
    ranks: int
    growth: np.ndarray
    capacity_limit: str = ""
    """What ends the feasible loads (:attr:`Scored.capacity_limit`)."""


Z99 = Z[99]
RESOLVED_PLACES = 8
"""Places of the ranking priced by ``infer``'s own prediction by default (:func:`price`): the
rows the human table shows (``report.serving.print_search``); the explanation names the first
two. Later options carry the pre-screen's grid reading (``exact`` and ``capacity_resolved``
false)."""


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


def _nodes(gpus: int, per_node: int) -> int:
    return max(1, -(-gpus // per_node))


def _replicas(par: Parallelism, gpus: int, per_node: int) -> int:
    """Most replicas of ``par`` the search's nodes hold (``placement.place``): a replica no
    larger than a node inside one, a larger one over whole nodes."""
    if not placeable(par.tp, par.pp, per_node):
        return 0
    if par.gpus > per_node:
        return gpus // par.gpus
    if gpus <= per_node:
        return gpus // par.gpus
    # Within the GPUs asked too: 12 GPUs on two 8-GPU nodes hold 12 TP1 replicas, not 16.
    return min(gpus // par.gpus, _nodes(gpus, per_node) * (per_node // par.gpus))


def _split_fits(pre: Pool, dec: Pool, gpus: int, per_node: int) -> bool:
    """The split's workers, as ``infer`` places them, fit the search's nodes."""
    if not (
        placeable(pre.par.tp, pre.par.pp, per_node) and placeable(dec.par.tp, dec.par.pp, per_node)
    ):
        return False
    return pools_placement(pre, dec, per_node).nodes <= _nodes(gpus, per_node)


def candidates(model: ModelSpec, gpus: int, per_node: int, disagg: bool = True) -> list[Candidate]:
    """The deployments the search walks on ``gpus`` GPUs of ``per_node``-GPU nodes: every
    engine layout as replicas, and prefill/decode splits, each placed as ``infer`` places it
    (``placement.place``) within the search's nodes."""
    out: list[Candidate] = []
    pars = list(_engine_pars(model, gpus, per_node))
    for par in pars:
        reps = _replicas(par, gpus, per_node)
        if reps >= 1:
            out.append(
                Candidate(label=f"{reps} x {label(par)}", mode="aggregated", par=par, replicas=reps)
            )
    if disagg and gpus >= 2:
        small = [p for p in pars if p.pp == 1]
        for pp_ in small:
            for dp_ in small:
                counts = range(1, gpus // pp_.gpus + 1)
                # Prefill pools of 1, 2, 3, 4, 6, 8, 12, 16... workers: finer steps add nothing.
                steps_p = [n for n in counts if n <= 4 or n in (6, 8, 12, 16, 24, 32, 48, 64)]
                for n_p in steps_p:
                    left = gpus - n_p * pp_.gpus
                    n_d = left // dp_.gpus
                    pre = Pool(workers=n_p, par=pp_)
                    # as many decode workers as the nodes hold beside the prefill pool
                    while n_d >= max(n_p, 1) and not _split_fits(
                        pre, Pool(workers=n_d, par=dp_), gpus, per_node
                    ):
                        n_d -= 1
                    if n_d < 1 or n_d < n_p:
                        continue
                    dec = Pool(workers=n_d, par=dp_)
                    out.append(
                        Candidate(
                            label=f"{n_p} x {label(pp_)} prefill + {n_d} x {label(dp_)} decode",
                            mode="disaggregated",
                            par=dp_,
                            prefill=pre,
                            decode=dec,
                        )
                    )
    return out


def _engine_p99(c: LoadCurve, steps: float) -> tuple[np.ndarray, np.ndarray]:
    """(p99 TTFT, p99 TPOT) along an engine's load curve."""
    ttft99 = c.ttft_s + 0.49 * c.iteration_s
    return ttft99, _p99(c.iteration_s, c.decode_only_s, c.own_prefill_s, c.x, steps)


def _p99(
    t: np.ndarray, dec_only: np.ndarray, own: np.ndarray, x: np.ndarray, steps: float
) -> np.ndarray:
    """p99 TPOT along a curve: a request's OSL-1 iterations carry a Poisson number of other
    requests' prefills (as :func:`steady_state.percentiles`)."""
    m = x * t * steps
    extra = np.maximum(own - dec_only, 0.0)
    return np.maximum(dec_only + (m + Z99 * np.sqrt(m)) * extra / max(steps, 1.0), t)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchContext:
    """What every candidate of one search is priced against, built once per search: the
    model, where it runs, the engine with its profile, the workload and the SLO."""

    model: ModelSpec
    cluster: Cluster
    fmt: WeightFormat
    kv_dtype: str
    profile: Profile
    eng: EngineProfile
    work: Workload
    slo_ttft_s: float
    slo_tpot_s: float
    pools: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    """A disaggregated pool's own readings, by its parallelism and cap (:func:`_decode_pool`,
    :func:`_prefill_pool`): the same in every split that holds it."""


def _decode_pool(dec: Pool, eng_d: EngineProfile, ctx: SearchContext) -> tuple[Any, ...]:
    """A decode pool's KV room, iteration model, load curve and that curve per rank on the
    grid :func:`walk` reads (``predict_disaggregated``'s own grid, divided by the pool's
    ranks): none depends on the worker count, so a search builds them once per parallelism
    (90% of a search's time on 1,055 candidates went to rebuilding them)."""
    key = ("decode", dec.par, dec.max_batch)
    if key not in ctx.pools:
        model, cluster, fmt, kv_dtype = ctx.model, ctx.cluster, ctx.fmt, ctx.kv_dtype
        work = ctx.work
        kv, _, _ = kv_pool(model, cluster, dec.par, fmt, kv_dtype, ctx.profile, ctx.eng, work)
        if kv < work.input_len + work.output_len:
            ctx.pools[key] = None
            return (None,)
        it_d = _iteration_model(model, cluster, dec.par, fmt, kv_dtype, ctx.profile, eng_d)
        dwork = Workload(input_len=work.input_len, output_len=work.output_len, prefix_hit=1.0)
        probe = load_curve(it_d, eng_d, dwork, kv)
        top = float(probe.x.max())
        x_rank = np.geomspace(top * 1e-5, top * 4.0, GRID)
        dc = load_curve(it_d, eng_d, dwork, kv, x_grid=x_rank)
        ctx.pools[key] = (kv, it_d, dwork, top, dc)
    return ctx.pools[key] or (None,)


def walk(cand: Candidate, ctx: SearchContext, resolve: bool = False) -> Walk | None:
    """The candidate's load curve with its p99 TTFT and p99 TPOT (one load curve per
    candidate, vectorized; the closed-loop simulation is for single predictions), or None
    when a request's KV cache does not fit.

    With ``resolve`` the edge of "feasible and within the SLO" is resolved between grid loads
    by the steady state's rule (``resolve_capacity`` with the SLO as its ``within`` for an
    engine, ``refine_edge`` over the deployment's load for a disaggregated one, as
    ``deployment.py`` does): the capacity where it ends the walk, the p99 crossing where the
    SLO does. Without, the edge is read off the grid and the candidate carries the bound of
    its next grid load. The condition refined holds up to the first load that misses (its
    running conjunction along the loads), so were a p99 not monotone in the load, the crossing
    resolved is the first one, as :func:`score` and :func:`price` read theirs."""
    model, cluster, fmt, kv_dtype = ctx.model, ctx.cluster, ctx.fmt, ctx.kv_dtype
    profile, eng, work = ctx.profile, ctx.eng, ctx.work
    slo_ttft_s, slo_tpot_s = ctx.slo_ttft_s, ctx.slo_tpot_s
    steps = max(work.output_len - 1.0, 1.0)
    if cand.mode == "aggregated":
        kv, _, _ = kv_pool(model, cluster, cand.par, fmt, kv_dtype, profile, eng, work)
        if kv < work.input_len + work.output_len:
            return None
        it = _iteration_model(model, cluster, cand.par, fmt, kv_dtype, profile, eng)
        # A rank's share of the engine's budget, as ``engine_curve`` runs it.
        eng = eng.per_attention_rank(cand.par.attention_dp)
        c = load_curve(it, eng, work, kv)
        if resolve:

            def meets(cc: LoadCurve) -> np.ndarray:
                # up to the first load that misses, as :func:`score` reads the walk
                a, b = _engine_p99(cc, steps)
                return np.logical_and.accumulate((a <= slo_ttft_s) & (b <= slo_tpot_s))

            c = resolve_capacity(it, eng, work, kv, c, within=meets)
        ttft99, tpot99 = _engine_p99(c, steps)
        limit = capacity_limit(c)
        ranks = cand.par.attention_dp * cand.replicas
        x, e2e, feasible = c.x, c.e2e_s, c.feasible
        # The capacity lies below the next grid batch n', where x = n / ((OSL-1) T(n))
        # (Little's law). T grows with the batch but for small falls where a kernel's
        # efficiency steps (0.2% on Llama-3.1-70B); allowing the largest fall on the grid,
        # x <= x_top (n' / n_top) max_j T_j / T_j+1 there.
        t = c.iteration_s
        fall = max(float(np.max(t[:-1] / t[1:], initial=1.0)), 1.0)
        growth = c.decoding[1:] / c.decoding[:-1] * fall
    else:
        assert cand.prefill is not None and cand.decode is not None
        pre, dec = cand.prefill, cand.decode
        # The pools' own engine settings, as ``predict_disaggregated`` runs them (prefill
        # workers' overlap, decode workers admitting against pre-allocated KV pages).
        eng_p, eng_d = disaggregated_engines(eng, pre, dec, work)
        decode_side = _decode_pool(dec, eng_d, ctx)
        if decode_side[0] is None:
            return None
        kv, it_d, dwork, top, on_grid = decode_side
        # The prefill workers as they start (their own chunk and limit, prefill_worker_engine).
        eng_w = prefill_worker_engine(eng)
        kv_p, _, _ = kv_pool(model, cluster, pre.par, fmt, kv_dtype, profile, eng_w, work)
        if kv_p < work.input_len:
            return None
        it_p = _iteration_model(model, cluster, pre.par, fmt, kv_dtype, profile, eng_w)
        transfer = kv_transfer_s(model, cluster, pre, dec, kv_dtype, profile, work.input_len)

        def curves(x_tot: np.ndarray, grid: bool = False) -> tuple[Any, ...]:
            """(feasible, TTFT p99, TPOT p99, e2e, what ends the feasible loads) at the
            deployment's loads ``x_tot`` (the grid's: the decode pool's curve built once)."""
            pc = prefill_curve(it_p, eng_p, work, x_tot / pre.ranks)
            dc = on_grid if grid else load_curve(it_d, eng_d, dwork, kv, x_grid=x_tot / dec.ranks)
            queued = kv_transfer_wait_s(transfer, x_tot / pre.ranks)
            hand_off = transfer + np.where(np.isfinite(queued), queued, 0.0)
            ttft = pc.ttft_s + decode_admission_s(dc.iteration_s, hand_off, eng_d)
            feasible = pc.feasible & dc.feasible & np.isfinite(queued)
            return (
                feasible, ttft + 0.49 * pc.iteration_s, dc.iteration_s, ttft + steps * dc.tpot_s,
                disaggregated_limit(pc, dc, queued, feasible),
            )  # fmt: skip

        # ``predict_disaggregated``'s own grid of loads: the exact price (:func:`price`) reads
        # its curves between these points, so the next one past the edge bounds it too.
        x_hi = top * dec.ranks
        x = np.geomspace(x_hi * 1e-5, x_hi * 4.0, GRID)
        feasible, ttft99, tpot99, e2e, limit = curves(x, grid=True)
        if resolve:

            def meets_at(xs: np.ndarray) -> np.ndarray:
                f, a, b, _, _ = curves(xs)
                return np.logical_and.accumulate(f & (a <= slo_ttft_s) & (b <= slo_tpot_s))

            met = np.logical_and.accumulate(
                feasible & (ttft99 <= slo_ttft_s) & (tpot99 <= slo_tpot_s)
            )
            fine = refine_edge(x, met, meets_at)
            if fine.size:
                x = np.unique(np.concatenate([x, fine]))
                feasible, ttft99, tpot99, e2e, limit = curves(x)
        ranks = 1
        # The edge lies below the next grid load.
        growth = x[1:] / x[:-1]
    return Walk(
        x=x, feasible=feasible, ttft99=ttft99, tpot99=tpot99, e2e=e2e, ranks=ranks,
        growth=growth, capacity_limit=limit,
    )  # fmt: skip


def score(cand: Candidate, ctx: SearchContext, resolve: bool = False) -> Scored | None:
    """The candidate's goodput: the highest load of its :func:`walk` that is feasible and
    meets both p99 targets, with its bound (the next grid load) when read off the grid."""
    w = walk(cand, ctx, resolve)
    if w is None:
        return None
    x, feasible, ttft99, tpot99, e2e = w.x, w.feasible, w.ttft99, w.tpot99, w.e2e
    ranks, growth = w.ranks, w.growth
    slo_ttft_s, slo_tpot_s, work = ctx.slo_ttft_s, ctx.slo_tpot_s, ctx.work
    # Up to the first load that misses (as :func:`price` takes its first crossing): a load past
    # one that misses is not served within the SLO on the way up.
    ok = np.logical_and.accumulate(feasible & (ttft99 <= slo_ttft_s) & (tpot99 <= slo_tpot_s))
    if not ok.any():
        return None
    i = int(np.flatnonzero(ok)[-1])
    top = int(np.flatnonzero(feasible)[-1])
    # The capacity or the SLO ends the walk between this grid load and the next: resolving
    # the edge can only raise the goodput, up to the next grid load (the p99s grow with the
    # load, so the SLO crossing lies below it as the capacity does).
    open_edge = not resolve and i + 1 < x.size
    rate = float(x[i]) * ranks
    bound = rate * float(growth[i]) if open_edge else rate
    limit = "capacity"
    if i < top and feasible[i + 1]:
        missed = [
            n
            for n, p, t in (("ttft", ttft99, slo_ttft_s), ("tpot", tpot99, slo_tpot_s))
            if p[i + 1] > t
        ]
        limit = "+".join(missed) or "capacity"
    return Scored(
        cand=cand,
        mean_in_flight=max(1, round(rate * float(e2e[i]))),
        goodput_tokens_per_s=rate * work.output_len,
        ttft_p99_s=float(ttft99[i]),
        tpot_p99_s=float(tpot99[i]),
        requests_per_s=rate,
        capacity_resolved=not open_edge,
        goodput_bound_tokens_per_s=bound * work.output_len,
        limit=limit,
        capacity_limit=w.capacity_limit,
    )


RATE_TOLERANCE = 1e-6
"""Relative width to which :func:`price` resolves the highest rate within the SLO (the width
``steady_state.refine_edge`` resolves a capacity to)."""
STEP_DOWN = 0.85
"""Ratio of neighbouring rates :func:`price` scans (about a grid step of the load curves,
``steady_state.GRID``)."""
UNBOUNDED_S = 1e9
"""A p99 target of this many seconds or more is none: what ``api.serving_search.search_context``
gives for a target not given."""
SCAN_FROM = 0.01
"""Lightest rate :func:`price` scans, as a share of the pre-screen's bound: below it the
engine runs under 1% of the load it is priced at, its p99s the idle engine's, which the read
at :data:`RATE_TOLERANCE` of the bound stands for."""
SCAN_FINE = 0.5
"""Share of the bound above which :func:`price` scans rates :data:`STEP_DOWN` apart (the
answer lies within a grid step below the bound, ``score``); below it, :data:`SCAN_COARSE`
apart: 7 reads in all (0.85 apart all the way down took 29, and tripled the cost of pricing
every candidate)."""
SCAN_COARSE = 0.25
"""Ratio of neighbouring rates :func:`price` scans below :data:`SCAN_FINE` of the bound."""


def scan_rates(bound: float) -> list[float]:
    """The rates :func:`price` scans, lightest first: :data:`STEP_DOWN` apart from the bound
    down to :data:`SCAN_FINE` of it, then :data:`SCAN_COARSE` apart down to :data:`SCAN_FROM`
    of it."""
    fine = [bound]
    while fine[-1] * STEP_DOWN >= SCAN_FINE * bound:
        fine.append(fine[-1] * STEP_DOWN)
    coarse = [fine[-1] * SCAN_COARSE]
    while coarse[-1] * SCAN_COARSE >= SCAN_FROM * bound:
        coarse.append(coarse[-1] * SCAN_COARSE)
    return coarse[::-1] + fine[::-1]


def open_loop_reader(cand: Candidate, ctx: SearchContext) -> Callable[[float], Prediction] | None:
    """``infer``'s prediction of the deployment under Poisson arrivals at a rate (requests/s),
    as a function of the rate, or None when a request's KV cache does not fit. The functions
    ``infer --request-rate`` calls (``deployment.predict_aggregated`` and
    ``predict_disaggregated``), with their load-independent part (``engine_curve``,
    ``disaggregated_curves``: the same at every rate of an open loop) built once."""
    model, cluster, fmt, kv_dtype = ctx.model, ctx.cluster, ctx.fmt, ctx.kv_dtype
    profile, eng, work = ctx.profile, ctx.eng, ctx.work
    any_rate = Client(request_rate=1.0)
    if cand.prefill is not None and cand.decode is not None:
        pre, dec = cand.prefill, cand.decode
        split = disaggregated_curves(
            model, cluster, pre, dec, fmt, kv_dtype, profile, eng, work, any_rate
        )
        if not split.fits:
            return None
        return lambda rate: disaggregated_prediction(split, Client(request_rate=rate))
    engines = engine_curve(
        model, cluster, cand.par, cand.replicas, fmt, kv_dtype, profile, eng, work, any_rate
    )
    if not engines.fits:
        return None
    return lambda rate: engine_prediction(engines, Client(request_rate=rate))


def price(screened: Scored, ctx: SearchContext) -> Scored | None:
    """The candidate priced by ``infer``'s own prediction under Poisson arrivals (DistServe's
    goodput is a request rate: Zhong et al. OSDI'24, Sec. 2.2): the highest rate, up to the
    deployment's capacity, whose p99 TTFT and p99 TPOT meet the targets, with ``infer``'s
    figures at that rate, so the search reports what ``infer --request-rate`` prints for it.

    ``screened`` is the pre-screen's grid reading (:func:`score`): the SLO holds in its steady
    state at ``requests_per_s`` and fails (or the capacity ends) at its bound, the next load of
    the grid ``infer`` itself reads its curves on (``load_curve``'s decode batches; the
    disaggregated grid of ``predict_disaggregated``). ``infer`` takes the steady state at that
    load and adds an open loop's admission queue (``steady_state.open_loop``,
    ``deployment.disaggregated_open_wait``), so its p99s there are at least as high: its edge
    lies below the bound, and the bound ranks candidates for pricing. The rates from
    :data:`SCAN_FROM` of the bound up to it (:func:`scan_rates`; past it to the capacity,
    :data:`STEP_DOWN` apart, while the SLO holds) are scanned up to the first that misses the
    SLO, and that crossing is resolved by bisection to :data:`RATE_TOLERANCE`: the answer's
    scanned neighbours below all meet the SLO, even where a p99 is not monotone in the rate.
    A closed loop at the same mean number in flight is another benchmark: its first round is
    a burst of every client at once (``infer --concurrency``), whose p99 TTFT no sustained
    service sees."""
    read = open_loop_reader(screened.cand, ctx)
    if read is None:
        return None
    slo_ttft_s, slo_tpot_s, osl = ctx.slo_ttft_s, ctx.slo_tpot_s, ctx.work.output_len

    def meets(p: Prediction) -> bool:
        return p.pct["ttft_p99"] <= slo_ttft_s and p.pct["tpot_p99"] <= slo_tpot_s

    # Past its capacity an open loop serves the capacity (``open_loop``), here read at a rate
    # far past any deployment's.
    at_cap = read(1e9)
    cap = at_cap.requests_per_s
    bound = max(screened.goodput_bound_tokens_per_s, screened.goodput_tokens_per_s) / osl
    hi = min(bound, cap)
    # The lightest rate priced: missed there, the SLO is missed at every rate the scan would
    # reach (the idle engine's own p99s, as with varying lengths, whose long prompts the
    # pre-screen does not carry): dropped in two reads.
    floor = hi * RATE_TOLERANCE
    p_floor = read(floor)
    if not meets(p_floor):
        return None
    lo, p_lo = floor, p_floor
    # Scan up from SCAN_FROM of the bound (``scan_rates``) to it, then past it to the
    # capacity, and stop at the first rate that misses: the bisection below then brackets the
    # first crossing, so no scanned rate below the answer misses the SLO, even where a p99
    # falls as the load rises (a kernel's efficiency step shortens the iteration at a larger
    # batch: ``benchmarks/search_slo_monotone.py``). Stepping down from the bound found a
    # crossing, not the first one.
    p_hi: Prediction | None = None
    # Without a target nothing can miss: straight to the capacity (``search_context`` gives
    # UNBOUNDED_S for a target not given).
    targets = min(slo_ttft_s, slo_tpot_s) < UNBOUNDED_S
    for r in scan_rates(hi) if targets else [hi]:
        if r <= lo:
            continue
        p = read(r)
        if not meets(p):
            hi, p_hi = r, p
            break
        lo, p_lo = r, p
    while p_hi is None and lo < cap:
        # Met at the bound (the capacity, or a p99 that falls past the pre-screen's edge): up.
        r = min(lo / STEP_DOWN, cap)
        p = read(r)
        if not meets(p):
            hi, p_hi = r, p
        else:
            lo, p_lo = r, p
    limit = "capacity"
    if p_hi is not None:
        while hi - lo > RATE_TOLERANCE * lo:
            mid = 0.5 * (lo + hi)
            p = read(mid)
            if meets(p):
                lo, p_lo = mid, p
            else:
                hi, p_hi = mid, p
        missed = [
            n
            for n, key, t in (("ttft", "ttft_p99", slo_ttft_s), ("tpot", "tpot_p99", slo_tpot_s))
            if p_hi.pct[key] > t
        ]
        limit = "+".join(missed) or "capacity"
    return Scored(
        cand=screened.cand,
        # Requests in flight on average (Little's law), not a closed loop's clients.
        mean_in_flight=max(1, round(p_lo.requests_per_s * p_lo.e2e_s)),
        goodput_tokens_per_s=p_lo.output_tokens_per_s,
        ttft_p99_s=p_lo.pct["ttft_p99"],
        tpot_p99_s=p_lo.pct["tpot_p99"],
        requests_per_s=p_lo.requests_per_s,
        capacity_resolved=True,
        goodput_bound_tokens_per_s=p_lo.output_tokens_per_s,
        limit=limit,
        capacity_limit=at_cap.capacity_limit,
        exact=True,
    )


Scorer = Callable[[Candidate, bool], "Scored | None"]
"""``score`` with the problem bound: (candidate, resolve the edge) -> scored or None."""


Pricer = Callable[[Scored], "Scored | None"]
"""``price`` with the problem bound: a screened candidate, its edge resolved -> exact."""


def scorer(ctx: SearchContext) -> Scorer:
    """:func:`score` for one search's model, cluster, engine, workload and SLO."""

    def one(cand: Candidate, resolve: bool) -> Scored | None:
        return score(cand, ctx, resolve)

    return one


def pricer(ctx: SearchContext) -> Pricer:
    """:func:`price` for one search's model, cluster, engine, workload and SLO."""

    def one(screened: Scored) -> Scored | None:
        return price(screened, ctx)

    return one


def rank(
    cands: Sequence[Candidate], score_one: Scorer, keep: int | None, price_one: Pricer | None = None
) -> list[Scored]:
    """The candidates that meet the SLO, best goodput per GPU first (ties in candidate order).

    Each candidate is read on the pre-screen's grid first, where its goodput is bounded by
    the next grid load; its final goodput is its exact price with ``price_one`` (``infer``'s
    prediction, :func:`price`), else the pre-screen's resolved edge; both lie below that
    bound. ``keep=None`` takes every candidate to its final goodput (the definition).
    Otherwise they are taken best bound first: one not final is taken on and put back at its
    final goodput, one final takes the next place (nothing left can beat it), until ``keep``
    places are final; the rest follow at their grid goodput, each at most the last final
    one's, marked ``capacity_resolved=False`` / ``exact=False``. The first ``keep`` places and
    their figures equal the definition's."""

    def final(s: Scored) -> bool:
        return s.exact if price_one is not None else s.capacity_resolved

    def onward(s: Scored) -> Scored | None:
        if price_one is not None:
            return price_one(s)
        return score_one(s.cand, True)

    if keep is None:
        full = []
        for c in cands:
            s = score_one(c, price_one is None)
            if s is not None and not final(s):
                s = onward(s)
            if s is not None:
                full.append(s)
        return sorted(full, key=lambda s: -s.per_gpu)
    heap: list[tuple[float, int, int, Scored]] = []
    for k, c in enumerate(cands):
        s = score_one(c, False)
        if s is not None:
            heap.append((-s.bound_per_gpu, int(final(s)), k, s))
    heapq.heapify(heap)
    out: list[Scored] = []
    while heap and len(out) < keep:
        _, done, k, s = heapq.heappop(heap)
        if done:
            out.append(s)
            continue
        # One not yet final pops before a final goodput of the same bound, so ties keep their
        # order.
        r = onward(s)
        if r is not None:
            heapq.heappush(heap, (-r.bound_per_gpu, int(final(r)), k, r))
    rest = sorted(heap, key=lambda e: (-e[3].per_gpu, e[2]))
    return out + [e[3] for e in rest]
