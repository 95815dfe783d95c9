"""One serving deployment under one client load: aggregated engines (replicas x attention-DP
ranks) or disaggregated prefill and decode workers, predicted from the steady-state model."""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.collectives import LevelBandwidth
from gpuscale.costmodel.profile import Profile
from gpuscale.costmodel.serving.formats import WeightFormat, gemm_precision, is_weight_only
from gpuscale.costmodel.serving.iteration import (
    IterationModel,
    Parallelism,
    kv_bytes_per_token,
    weight_bytes_per_gpu,
    window_bytes_per_sequence,
)
from gpuscale.costmodel.serving.speculative import Speculation
from gpuscale.planner.serving.cohort_sim import (
    BENCHMARK_ROUNDS,
    CohortResult,
    simulate_ranks,
)
from gpuscale.planner.serving.disagg_closed_loop import (
    GOLDEN,
    SILVER,
    ClosedLoopTTFT,
    PrefillStage,
    client_lengths,
    simulate,
    simulated_requests,
)
from gpuscale.planner.serving.placement import Group, Placement, place
from gpuscale.planner.serving.steady_state import (
    GRID,
    PERCENTILES,
    LoadCurve,
    OperatingPoint,
    PrefillCurve,
    StartBurst,
    Workload,
    capacity_limit,
    closed_loop,
    decode_poll_wait,
    finite_run_wait,
    kv_capacity_requests,
    limits_at,
    load_curve,
    needs_capacity,
    open_loop,
    percentiles,
    prefill_curve,
    refine_edge,
    resolve_capacity,
    weighted_quantiles,
)
from gpuscale.specs import Cluster, ModelSpec

GIB = float(2**30)
SIXTEEN_BIT = 2.0


DEFAULT_REQUESTS = 1000
"""Requests a benchmark measures when its client states no count and is not a fixed-length
closed loop (:func:`measured_requests`): ``vllm bench serve --num-prompts`` defaults to 1000."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Client:
    """``concurrency`` requests kept in flight (closed loop) or Poisson arrivals at
    ``request_rate`` requests/s (open loop) for a benchmark of ``num_requests`` measured
    requests (after its warm-up); ``None``: the client's default, :func:`measured_requests`."""

    concurrency: int | None = None
    request_rate: float | None = None
    num_requests: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Pool:
    """Workers of one kind: ``workers`` engine instances of one parallelism."""

    workers: int
    par: Parallelism
    max_batch: int | None = None
    """Most requests one attention rank of a worker batches (prefill: prompts per iteration;
    decode: running requests), when the deployment caps it below the engine default (as the
    engine's own ``max_num_seqs``: TensorRT-LLM's ``max_batch_size`` is per rank, SGLang's
    ``--max-running-requests`` is divided over the DP ranks)."""
    routing: str = "least-loaded"
    """How the router in front of these workers picks one for a request
    (``disagg_closed_loop.ROUTINGS``); read for the decode workers of a closed loop."""

    @property
    def gpus(self) -> int:
        return self.workers * self.par.gpus

    @property
    def ranks(self) -> int:
        return self.workers * self.par.attention_dp


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    """What one deployment does under one load; every time in seconds."""

    mode: str
    gpus: int
    fits: bool
    memory_per_gpu_gib: float
    kv_tokens_per_rank: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    pct: dict[str, float]
    requests_per_s: float
    output_tokens_per_s: float
    kv_occupancy: float
    preemptions_per_request: float
    running_per_rank: float
    queue_s: float
    saturated: bool
    iteration_s: float
    gemm_precision: str
    weight_only: bool
    notes: list[str] = field(default_factory=list)
    capacity_limit: str = ""
    """What ends the deployment's feasible loads at its capacity, as its curves compute it
    (``steady_state.CAPACITY_LIMITS``; disaggregated: ``prefill_throughput``, ``kv_transfer``
    or the decode workers' own, prefixed ``decode_``; several joined by ``+``). Not in
    :meth:`row`: the SLO search names it."""

    def row(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "gpus": self.gpus,
            "fits": self.fits,
            "memory_per_gpu_gib": self.memory_per_gpu_gib,
            "kv_cache_tokens_per_rank": self.kv_tokens_per_rank,
            "ttft_ms": self.ttft_s * 1e3,
            "ttft_ms_p50": self.pct["ttft_p50"] * 1e3,
            "ttft_ms_p90": self.pct["ttft_p90"] * 1e3,
            "ttft_ms_p99": self.pct["ttft_p99"] * 1e3,
            "tpot_ms": self.tpot_s * 1e3,
            "tpot_ms_p50": self.pct["tpot_p50"] * 1e3,
            "tpot_ms_p90": self.pct["tpot_p90"] * 1e3,
            "tpot_ms_p99": self.pct["tpot_p99"] * 1e3,
            "tpot_definition": "mean time between output tokens after the first (excludes TTFT)",
            "e2e_s": self.e2e_s,
            "e2e_s_p50": self.pct["e2e_p50"],
            "e2e_s_p90": self.pct["e2e_p90"],
            "e2e_s_p99": self.pct["e2e_p99"],
            "requests_per_s": self.requests_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_gpu": self.output_tokens_per_s / self.gpus,
            "kv_cache_occupancy": self.kv_occupancy,
            "preemptions_per_request": self.preemptions_per_request,
            "running_requests_per_rank": self.running_per_rank,
            "queue_wait_ms": self.queue_s * 1e3,
            "saturated": self.saturated,
            "iteration_ms": self.iteration_s * 1e3,
            "gemm_precision": self.gemm_precision,
            "weight_only": self.weight_only,
            "notes": list(self.notes),
        }


def _iteration_model(
    model: ModelSpec,
    cluster: Cluster,
    par: Parallelism,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    speculation: Speculation | None = None,
) -> IterationModel:
    return IterationModel(
        speculation=speculation,
        model=model,
        cluster=cluster,
        par=par,
        fmt=fmt,
        kv_dtype=kv_dtype,
        profile=profile,
        iteration_overhead_s=eng.iteration_overhead_us * 1e-6,
        per_sequence_overhead_s=eng.per_sequence_overhead_us * 1e-6,
        speculative_step_host_s=(
            0.0 if eng.overlap_scheduler else eng.speculative_step_host_us * 1e-6
        ),
        decode_graph_sizes=tuple(
            float(s)
            for s in eng.decode_graph_sizes(1 if speculation is None else speculation.queries)
        ),
        eager_prefill_host_s_per_kernel=(
            0.0 if eng.prefill_cuda_graph else eng.eager_host_us_per_kernel * 1e-6
        ),
        moe_worst_case_align=(
            profile.const("deepgemm_contiguous_align") if eng.deepgemm_moe_worst_case else 0.0
        ),
        moe_worst_case_chunk_tokens=profile.const("fused_moe_chunk_tokens"),
        moe_gather_scatter=eng.moe_gathers(par.ep),
        moe_all_to_all_on_mnnvl=eng.moe_dp_communication == "gather_scatter_without_mnnvl",
        moe_prefill_gather_all_reduce=eng.prefill_dp_gather_all_reduce,
        dense_fp8_rate=(
            profile.const("flashinfer_trtllm_fp8_gemm_peak_share")
            * cluster.device.peak("fp8")
            * 1e12
            if eng.flashinfer_fp8_gemm
            else math.inf
        ),
    )


def kv_pool(
    model: ModelSpec,
    cluster: Cluster,
    par: Parallelism,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    speculation: Speculation | None = None,
) -> tuple[float, float, float]:
    """(KV tokens per attention rank, weights GiB per GPU, memory GiB per GPU in use).

    The pool is what the engine's memory fraction leaves after the weights, the activation
    working set of one full token budget, and the CUDA context (vLLM ``determine_num_available
    _blocks`` profiles exactly these; TRT-LLM takes a fraction of the free memory after load;
    SGLang's fraction holds weights and KV only, ``EngineProfile.memory_fraction_of``)."""
    mem = cluster.device.memory_bytes
    # Experts as the engine allocates them (padded for vLLM's Marlin MXFP4 kernel), as the
    # iteration model computes them.
    it = _iteration_model(model, cluster, par, fmt, kv_dtype, profile, eng, speculation)
    dims, h_out = it.moe_expert_dims(), it.moe_expert_out_hidden()
    weights = weight_bytes_per_gpu(model, par, fmt, dims, h_out)
    per_token = kv_bytes_per_token(model, par, kv_dtype)
    if speculation is not None:
        # The draft module's blocks are stored and cache their own KV (DeepSeek-V3's MTP module:
        # "14B of the Multi-Token Prediction (MTP) Module weights", model card; TensorRT-LLM
        # tech blog 2: "each MTP module will have its own KV cache"): one more block of the main
        # model's kind per draft layer, held by the last stage (the first, with pp = 1).
        one = dataclasses.replace(
            model, num_layers=1, dense_layers=0, sliding_window_layers=0,
            attention_chunk_layers=0, linear_attention_layers=0,
        )  # fmt: skip
        single = dataclasses.replace(par, pp=1)
        # The embedding and head are shared with the main model (already counted).
        tables = (1 if model.tied_embeddings else 2) * model.vocab_size * model.hidden_size
        block = (
            weight_bytes_per_gpu(one, single, fmt, dims, h_out)
            - tables * SIXTEEN_BIT / par.attention_tp
        )
        # eh_proj (2h -> h), split over the attention ranks like the other projections.
        proj = 2.0 * model.hidden_size**2 * fmt.weight_bytes / par.attention_tp
        weights += speculation.draft_layers * (block + proj)
        per_token += speculation.draft_layers * kv_bytes_per_token(one, single, kv_dtype)
    b = float(eng.max_num_batched_tokens)
    widest = max(
        (model.q_width + 2 * model.kv_width) / par.attention_tp,
        3.0 * (model.dense_ffn_hidden_size or model.ffn_hidden_size) / par.tp,
    )
    activations = b * SIXTEEN_BIT * (4.0 * model.hidden_size + widest)
    activations += eng.max_num_seqs * model.vocab_size * 4.0 / par.attention_tp / 8.0
    context = profile.const("memory_cuda_context_gib") * GIB
    # SGLang's default fraction follows the GPU and the layout (serving_engines.py).
    frac = eng.static_memory_fraction(
        cluster.device, tp=par.tp, pp=par.pp, dp_attention=par.attention_dp,
        speculative=speculation is not None,
    )  # fmt: skip
    if eng.memory_fraction_of == "free_after_load":
        kv_bytes = frac * (mem - weights - activations - context)
    elif eng.memory_fraction_of == "weights_kv_activations":
        kv_bytes = frac * mem - weights - activations - context
    else:
        # SGLang: the pool is frac x total minus what is in use after loading (weights, CUDA
        # context); the activations run in the 1 - frac left over (ModelRunner
        # profile_max_num_token: rest = available - total x (1 - mem_fraction_static)).
        kv_bytes = frac * mem - weights - context
    # Whatever the fraction, the pool is not larger than the memory the weights, the
    # activations and the context leave (a fraction near 1 would otherwise count more memory in
    # use than the GPU has; fuzz, helper-146: SGLang at memory_fraction=1 used 81.7 of 79.6 GiB).
    kv_bytes = min(kv_bytes, mem - weights - activations - context)
    window = window_bytes_per_sequence(model, par, kv_dtype)
    ratio = eng.swa_tokens_per_full_token
    if ratio is not None and window > 0:
        # The engine gives the sliding-window layers ``ratio`` tokens of pool per token of the
        # full-attention layers, whatever the window: TensorRT-LLM sizes them at full length,
        # SGLang at swa_full_tokens_ratio (sources in serving_engines.yaml).
        per_token += ratio * window / model.sliding_window
    elif per_token <= 0:
        per_token = window / max(work.input_len + work.output_len, 1.0)
    else:
        # Sliding-window layers hold a fixed window per request: charge it per token of the
        # request's average footprint so the pool counts requests correctly.
        per_token += window / max(work.input_len + work.output_len / 2.0, 1.0)
    kv_tokens = max(kv_bytes, 0.0) / per_token
    used = weights + activations + context + max(kv_bytes, 0.0)
    return kv_tokens, weights / GIB, used / GIB


class EngineCurve(NamedTuple):
    """What an aggregated deployment's prediction reads for a client, before the client's own
    load: its engines' iteration model, KV pool and load curve (:func:`engine_curve`)."""

    it: IterationModel
    eng: EngineProfile
    work: Workload
    kv_tokens: float
    mem_gib: float
    ranks: int
    gpus: int
    fits: bool
    notes: tuple[str, ...]
    curve: LoadCurve


def engine_curve(
    model: ModelSpec,
    cluster: Cluster,
    par: Parallelism,
    replicas: int,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    client: Client,
    speculation: Speculation | None = None,
) -> EngineCurve:
    """The part of :func:`predict_aggregated` the client's load does not change: the load curve
    with its capacity resolved where ``client`` needs it (any open loop, a closed loop past the
    grid's top point). For an open loop it is the same at every rate, so the SLO search reads
    one deployment at many rates through :func:`engine_prediction` without rebuilding it."""
    it = _iteration_model(model, cluster, par, fmt, kv_dtype, profile, eng, speculation)
    kv_tokens, _, mem_gib = kv_pool(
        model, cluster, par, fmt, kv_dtype, profile, eng, work, speculation
    )
    # Each attention-DP rank schedules with its share of the engine's budget (SGLang,
    # EngineProfile.per_attention_rank); the memory fraction above keeps the engine's own.
    eng = eng.per_attention_rank(par.attention_dp)
    ranks = replicas * par.attention_dp
    fits = kv_tokens >= work.input_len + work.output_len
    notes: tuple[str, ...] = ()
    if not fits:
        notes = ("weights leave no room for one request's KV cache on this parallelism",)
        kv_tokens = max(kv_tokens, work.input_len + work.output_len)
    curve = load_curve(it, eng, work, kv_tokens)
    conc = float(client.concurrency or 1) / ranks
    rate = None if client.request_rate is None else client.request_rate / ranks
    if needs_capacity(curve, conc, rate):
        curve = resolve_capacity(it, eng, work, kv_tokens, curve)
    return EngineCurve(
        it=it, eng=eng, work=work, kv_tokens=kv_tokens, mem_gib=mem_gib, ranks=ranks,
        gpus=replicas * par.gpus, fits=fits, notes=notes, curve=curve,
    )  # fmt: skip


def predict_aggregated(
    model: ModelSpec,
    cluster: Cluster,
    par: Parallelism,
    replicas: int,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    client: Client,
    speculation: Speculation | None = None,
) -> Prediction:
    """``replicas`` engine instances of ``par``, each with ``attention_dp`` request groups;
    ``speculation``: speculative decoding with a draft module."""
    built = engine_curve(
        model, cluster, par, replicas, fmt, kv_dtype, profile, eng, work, client, speculation
    )
    return engine_prediction(built, client)


def engine_prediction(built: EngineCurve, client: Client) -> Prediction:
    """:func:`predict_aggregated` of the deployment ``built`` (:func:`engine_curve` for this
    client, or for any open loop when ``client`` is one)."""
    it, eng, work, kv_tokens, mem_gib, ranks, gpus, fits, notes_, curve = built
    notes = list(notes_)
    steady: OperatingPoint | None = None
    burst: StartBurst | None = None
    if client.request_rate is not None:
        # Each of the ``ranks`` engines (replicas, attention-DP ranks) sees its share of the
        # run's requests, and its queue builds from those alone.
        share = max(1, round(measured_requests(work, client) / ranks))
        point = open_loop(curve, client.request_rate / ranks, kv_tokens, work, share)
    else:
        conc = float(client.concurrency or 1) / ranks
        point = closed_loop(curve, conc, kv_tokens, work)
        sim = None
        cap = kv_capacity_requests(kv_tokens, work, eng)
        # Random lengths break cohorts apart: the staggered steady state applies. So does a
        # fixed-length load the scheduler splits into more cohorts than the simulation follows
        # (``simulate_ranks`` gives None); either way the benchmark's first round is a burst.
        if work.fixed:
            conc_all = int(client.concurrency or 1)
            rounds = benchmark_rounds(work, client)
            sim = simulate_ranks(it, eng, work, conc_all, ranks, cap, rounds=rounds)
        if sim is None:
            steady = point
            point, burst = _with_start_burst(point, it, eng, work, client, ranks, cap)
        if sim is not None:
            pred = _from_simulation(
                sim, point, gpus, fits, mem_gib, kv_tokens, ranks, work, it, notes, eng, conc
            )
            return dataclasses.replace(pred, capacity_limit=capacity_limit(curve))
    pred = _prediction(
        "aggregated", gpus, fits, mem_gib, kv_tokens, point, ranks, work, it, notes,
        steady=steady, burst=burst,
    )  # fmt: skip
    return dataclasses.replace(pred, capacity_limit=capacity_limit(curve))


def _with_start_burst(
    point: OperatingPoint,
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    client: Client,
    ranks: int,
    cap: float,
) -> tuple[OperatingPoint, StartBurst | None]:
    """The staggered steady state with the benchmark's first round put back into the mean TTFT,
    and that round (for the percentiles of the same mixture, :func:`steady_state.percentiles`).

    A closed-loop client starts its ``C`` workers at once on a drained engine (aiperf's
    concurrency phase issues credits with a zero interval, ``ArrivalPattern.CONCURRENCY_BURST``
    in ``aiperf/timing/strategies/request_rate.py``; ``vllm bench``/InferenceX's
    ``benchmark_serving.py`` with ``--request-rate inf`` creates every task at once behind a
    ``--max-concurrency`` semaphore, after its warm-up requests are gathered). Random lengths
    stagger the later rounds, but the first ``C`` of the ``num_requests`` measured requests
    arrive together: their TTFT is the burst's, simulated as one lockstep round at the mean
    lengths; the rest see the steady state. Mean TTFT = (C x burst + (N - C) x steady) / N,
    with N the requests measured (:func:`benchmark_rounds` x C, :func:`measured_requests`). The
    burst's requests get their first tokens as the token budget takes their prompts in (the
    k-th of a split burst waits for the prompts before it): its TTFT distribution is the
    simulated round's cohorts, each weighted by its requests."""
    conc = int(client.concurrency or 1)
    n = round(benchmark_rounds(work, client) * conc)
    fixed = dataclasses.replace(work, input_cv=0.0, output_cv=0.0)
    burst = simulate_ranks(it, eng, fixed, conc, ranks, cap, burst_only=True)
    if burst is None:
        return point, None
    burst_ttft = float(np.average(burst.ttft_s, weights=burst.weight))
    share = conc / n
    ttft = share * burst_ttft + (1.0 - share) * point.ttft_s
    e2e = point.e2e_s + (ttft - point.ttft_s)
    # The clients spend the burst too. With fixed lengths (a load too staggered for the cohort
    # simulation) the burst round is simulated as it runs, so the run's throughput is its
    # requests over its duration (``cohort_sim.CohortResult.duration_s``): at least its average
    # client's N / C times in system, and the burst's last response plus that client's N / C - 1
    # later requests (with N = C, all requests at once, the burst round is the run). With random
    # lengths the burst is only a lockstep stand-in at the mean lengths, whose last response
    # (requests waiting a whole round for a slot) the run does not have: there C / E2E requests
    # a second (Little's law, as the disaggregated closed loop reads its followed TTFT). Per
    # rank as ``point.x`` is.
    if work.input_cv == 0.0 and work.output_cv == 0.0:
        duration = max(n / conc * e2e, burst.duration_s + (n / conc - 1.0) * point.e2e_s)
        x = min(point.x, n / ranks / duration) if duration > 0.0 else point.x
    else:
        x = min(point.x, conc / ranks / e2e) if e2e > 0.0 else point.x
    mixed = dataclasses.replace(point, ttft_s=ttft, e2e_s=e2e, x=x)
    return mixed, StartBurst(ttft_s=burst.ttft_s, weight=burst.weight, share=share)


def _from_simulation(
    sim: CohortResult,
    fluid: OperatingPoint,
    gpus: int,
    fits: bool,
    mem_gib: float,
    kv_tokens: float,
    ranks: int,
    work: Workload,
    it: IterationModel,
    notes: list[str],
    eng: EngineProfile,
    concurrency: float,
) -> Prediction:
    """A prediction from the cohort simulation of a closed-loop benchmark of ``concurrency``
    requests in flight per rank."""
    w = sim.weight
    qs = np.array(PERCENTILES, dtype=float) / 100.0
    pct: dict[str, float] = {}
    for name, values in (("ttft", sim.ttft_s), ("tpot", sim.tpot_s), ("e2e", sim.e2e_s)):
        for q, v in zip(PERCENTILES, weighted_quantiles(values, w, qs), strict=True):
            pct[f"{name}_p{q}"] = float(v)
    cap = min(float(eng.max_num_seqs), kv_capacity_requests(kv_tokens, work, eng))
    # The simulation's mean running count dips below the cap while finished requests' slots
    # refill, so a client far above the cap (256 in flight against SGLang's 48 with EAGLE)
    # read as unsaturated on that count alone: more requests in flight than slots is queueing.
    saturated = bool(sim.mean_running >= 0.98 * cap or concurrency > cap)
    if saturated:
        notes.append(
            "saturated: requests queue for a running slot or KV pages; the wait is in TTFT"
        )
    notes.append("closed loop simulated by cohorts (requests that start together move together)")
    x_total = sim.requests_per_s * ranks
    ttft = float(np.average(sim.ttft_s, weights=w))
    tpot = float(np.average(sim.tpot_s, weights=w))
    per_req = work.input_len + work.output_len / 2.0
    full_need = sim.mean_running * (work.input_len + work.output_len)
    return Prediction(
        mode="aggregated",
        gpus=gpus,
        fits=fits,
        memory_per_gpu_gib=mem_gib,
        kv_tokens_per_rank=kv_tokens,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=float(np.average(sim.e2e_s, weights=w)),
        pct=pct,
        requests_per_s=x_total,
        output_tokens_per_s=x_total * work.output_len,
        kv_occupancy=min(sim.mean_running * per_req / kv_tokens, 1.0),
        preemptions_per_request=max(0.0, 1.0 - kv_tokens / full_need) if full_need > 0 else 0.0,
        running_per_rank=sim.mean_running,
        queue_s=max(ttft - fluid.ttft_s + fluid.queue_s, 0.0) if saturated else 0.0,
        saturated=saturated,
        iteration_s=sim.mean_iteration_s,
        gemm_precision=gemm_precision(it.fmt, it.cluster.device),
        weight_only=is_weight_only(it.fmt, it.cluster.device),
        notes=notes,
    )


def _prediction(
    mode: str,
    gpus: int,
    fits: bool,
    mem_gib: float,
    kv_tokens: float,
    p: OperatingPoint,
    ranks: int,
    work: Workload,
    it: IterationModel,
    notes: list[str],
    steady: OperatingPoint | None = None,
    burst: StartBurst | None = None,
) -> Prediction:
    """``p`` gives the means; the percentiles are of ``steady`` (the point before a start
    burst was mixed into ``p``'s mean TTFT) mixed with ``burst``, or of ``p`` alone."""
    # The arrivals an iteration sees are the steady state's (the burst's Little's-law rate in
    # ``p.x`` is the run's average, not the rate the steady requests meet).
    base = steady if steady is not None else p
    pct = percentiles(base, work, base.x * base.iteration_s, burst)
    if p.saturated:
        notes.append(
            "saturated: requests queue for a running slot or KV pages; the wait is in TTFT"
        )
    x_total = p.x * ranks
    return Prediction(
        mode=mode,
        gpus=gpus,
        fits=fits,
        memory_per_gpu_gib=mem_gib,
        kv_tokens_per_rank=kv_tokens,
        ttft_s=p.ttft_s,
        tpot_s=p.tpot_s,
        e2e_s=p.e2e_s,
        pct=pct,
        requests_per_s=x_total,
        output_tokens_per_s=x_total * work.output_len,
        kv_occupancy=p.kv_occupancy,
        preemptions_per_request=p.preemptions_per_request,
        running_per_rank=p.running,
        queue_s=p.queue_s,
        saturated=p.saturated,
        iteration_s=p.iteration_s,
        gemm_precision=gemm_precision(it.fmt, it.cluster.device),
        weight_only=is_weight_only(it.fmt, it.cluster.device),
        notes=notes,
    )


def kv_transfer_s(
    model: ModelSpec,
    cluster: Cluster,
    prefill: Pool,
    decode: Pool,
    kv_dtype: str,
    profile: Profile,
    tokens: float,
) -> float:
    """Seconds to move one prompt's KV cache from its prefill attention group to its decode
    attention group, over the busiest sending GPU's own link: NVLink when the prefill and the
    decode worker share a node, else that GPU's NICs (NIXL/UCX RDMA in Dynamo; Mooncake, Qin et
    al. 2024, arXiv:2407.00079 Sec. 4); the mean over the pairs of workers a request may pass
    through as the pools are placed (:func:`pools_placement`).

    Only the ranks that hold the request send, each through its own NIC, not the whole worker's:
    with attention DP one rank holds a request's cache. TensorRT-LLM's cache formatter sends
    every decode attention-TP rank the KV it keeps (``mlaCacheFormatter.cpp``
    ``needSendCache``/``pickRecvConnections``: each receiver takes its share from one sender per
    pipeline domain, and for MLA, whose latent is replicated on every attention-TP rank, only
    ``min(prefill, decode)`` attention-TP ranks send); a sender's connections are served in turn
    (``formatOutput``). So a sender carries ``decode_atp x per-rank KV / senders`` bytes, and a
    receiver its own per-rank KV; the slower of the two sets the time.

    Under pipeline parallelism a rank holds, sends and receives only its own stage's layers
    (``targetIRanks`` pairs a rank with the peer stages whose layers overlap its own,
    ``mDomainPPSize``, ``cacheSplitConcat.cu``; ``computeSendOffsetRatio`` sends each peer only
    the sender's layers it needs, ``cacheFormatter.cpp``): the prefill stages send at once, a
    sender carries ``1 / prefill_pp`` of the layers and a receiver ``1 / decode_pp``."""
    p_atp = prefill.par.attention_tp
    d_atp = decode.par.attention_tp
    # KV of every layer one decode attention-TP rank keeps (MLA: the whole latent; GQA: its
    # heads, at least one); a stage holds its share of the layers (kv_bytes_per_token's 1/pp).
    need = kv_bytes_per_token(model, Parallelism(tp=d_atp, pp=1), kv_dtype) * tokens
    senders = min(p_atp, d_atp) if model.is_mla else p_atp
    busiest = max(d_atp * need / prefill.par.pp / senders, need / decode.par.pp)
    levels = LevelBandwidth.of(cluster, profile)
    near = levels.intra_latency_us * 1e-6 + busiest / (levels.intra_gb_per_s * 1e9)
    far = levels.inter_latency_us * 1e-6 + busiest / (
        levels.nic_gb_per_s * 1e9 * levels.nics_per_gpu
    )
    # The pair of workers a request passes through shares a node that often (the placement of
    # both pools, ``placement.place``): all of them when the deployment fits one node.
    share = pools_placement(prefill, decode, cluster.gpus_per_node).same_node_share(
        "prefill", "decode"
    )
    return share * near + (1.0 - share) * far


def pools_placement(prefill: Pool, decode: Pool, gpus_per_node: int) -> Placement:
    """The workers of a disaggregated deployment on ``gpus_per_node``-GPU nodes."""
    return place(
        [
            Group(pool="prefill", workers=prefill.workers, tp=prefill.par.tp, pp=prefill.par.pp,
                  field="prefill_tp"),
            Group(pool="decode", workers=decode.workers, tp=decode.par.tp, pp=decode.par.pp,
                  field="decode_tp"),
        ],
        gpus_per_node,
    )  # fmt: skip


def kv_transfer_wait_s(service_s: float, rate_per_group: np.ndarray) -> np.ndarray:
    """Mean wait of a prompt's KV transfer behind the transfers of earlier prompts of the same
    prefill attention group, whose sending GPUs serve them one at a time: TensorRT-LLM's
    ``CacheSender`` drains its send queue in one thread, each request by ``sendSync``
    (``dataTransceiver.cpp`` ``sendAndRemoveResponse``). Prompts arrive at ``rate_per_group``
    and each takes ``service_s``: the M/D/1 wait ``rho S / (2 (1 - rho))`` (Pollaczek-Khinchine,
    Kleinrock, Queueing Systems vol. 1, Sec. 5.7); infinite once the link is saturated."""
    rho = np.asarray(rate_per_group, dtype=float) * service_s
    with np.errstate(divide="ignore", invalid="ignore"):
        wait = np.where(rho < 1.0, rho * service_s / (2.0 * (1.0 - rho)), np.inf)
    return wait


def decode_admission_s(
    iteration_s: np.ndarray, hand_off_s: np.ndarray, eng: EngineProfile
) -> np.ndarray:
    """From a prompt's prefill end to the decode worker's first token, by the engine's own
    admission (``EngineProfile.disagg_kv_transfer``, sources in ``serving_engines.yaml``).

    ``decode_pull`` (TensorRT-LLM, vLLM): the decode scheduler takes the request at the start
    of an iteration (half an iteration's wait on average) and starts the transfer then; the
    transfer runs beside the decode iterations and is found complete at an iteration boundary,
    so it costs whole iterations: one if it ends within the first, ``ceil(hand_off / T)``
    otherwise, for one request. ``hand_off`` and ``T`` are means: a request's own transfer
    wait (an M/D/1 wait, :func:`kv_transfer_wait_s`) and the iterations it waits through vary,
    so its transfer ends at a phase of an iteration that is uniform over the requests, and the
    mean count is ``ceil`` averaged over one iteration's width of hand-off, ``max(1, hand_off /
    T + 1/2)`` (the mean residual of an interval at a uniform phase is half of it: Kleinrock,
    Queueing Systems vol. 1, 1975, Sec. 5.2). ``ceil`` of the means instead drops a whole
    iteration where the mean iteration outgrows the hand-off, so TTFT fell as the load rose
    (``benchmarks/search_slo_monotone.py``). ``prefill_push`` (SGLang): the prefill worker
    sends into slots the decode worker preallocated, as soon as its forward ends; the decode
    worker finds it at its next poll, one per iteration (half an iteration after the hand-off
    on average). Then
    ``disagg_first_token_iterations`` more iterations to the first token (vLLM recomputes the
    last prompt token; TensorRT-LLM and SGLang return the prefill's token)."""
    # Only engines whose hand-off was read serve disaggregated (api.serving refuses the rest).
    assert eng.disagg_kv_transfer is not None and eng.disagg_first_token_iterations is not None
    t = np.asarray(iteration_s, dtype=float)
    hand_off = np.asarray(hand_off_s, dtype=float)
    after = t * eng.disagg_first_token_iterations
    if eng.disagg_kv_transfer == "prefill_push":
        return hand_off + 0.5 * t + after
    steps = np.maximum(1.0, hand_off / t + 0.5)
    return t * (0.5 + steps) + after


def measured_requests(work: Workload, client: Client) -> int:
    """Requests the benchmark measures: the client's ``num_requests`` when it states one (e.g.
    InferenceX's ``--num-prompts $((CONC * 10))``, AIConfigurator's eval runner's
    ``--request-count 10*C``: ``validation.serving_clients.client_requests``). Unstated: a
    closed loop with fixed lengths measures :data:`BENCHMARK_ROUNDS` rounds of ``concurrency``
    (today's aiperf command of AIConfigurator's generator), any other client
    :data:`DEFAULT_REQUESTS`. The one rule the cohort simulation and the start burst read
    (through :func:`benchmark_rounds`), the disaggregated closed loop (:func:`closed_loop_ttft`)
    and the open-loop queue."""
    if client.num_requests is not None:
        return int(client.num_requests)
    if work.fixed and client.request_rate is None:
        return BENCHMARK_ROUNDS * int(client.concurrency or 1)
    return DEFAULT_REQUESTS


def benchmark_rounds(work: Workload, client: Client) -> float:
    """Rounds of ``concurrency`` requests a closed-loop benchmark measures, the burst included:
    :func:`measured_requests` over the concurrency, at least one (e.g. sa-bench, the client of
    InferenceX's multi-node disaggregated runs, passes ``--num-prompts $((concurrency * 5))``:
    srt-slurm ``src/srtctl/benchmarks/scripts/sa-bench/bench.sh``; a fixed-length client that
    states nothing, :data:`BENCHMARK_ROUNDS`)."""
    conc = float(client.concurrency or 1)
    return max(float(measured_requests(work, client)), conc) / conc


class Stage(NamedTuple):
    """One stage of a disaggregated deployment as an admission queue: its ``slots`` (requests it
    holds at once at its own capacity, over all its ranks) and that ``capacity`` (requests/s)."""

    name: str
    slots: float
    capacity: float
    workers: int = 1
    routing: str = "least-loaded"
    """How the router picks one of the stage's ``workers`` (``disagg_closed_loop.ROUTINGS``)."""


def disaggregated_open_wait(
    rate: float, capacity: float, stages: tuple[Stage, ...], num_requests: int
) -> tuple[float, Stage]:
    """Mean admission wait (s) of ``num_requests`` Poisson arrivals at ``rate`` to a
    disaggregated deployment of ``capacity`` requests/s, and the stage that binds.

    The rule of the aggregated open loop (``steady_state.open_loop``) on the bottleneck stage:
    its slots are the servers, and with every slot taken the stage runs at the deployment's
    capacity, so each slot is held ``slots / capacity`` and the queue's load is
    ``rate / capacity``; its wait is the exact finite-run FIFO wait
    (``steady_state.finite_run_wait``) at every rate, below and past the capacity (continuous,
    rising with the rate; ``N/2 (1/capacity - 1/rate)`` past it for large N). The bottleneck
    is the stage of the lowest own capacity (prefill workers: prompts of one full token-budget
    iteration per rank; decode workers: running requests at their capacity, admitted against
    their pre-allocated KV pages). A stage's slots over all its ranks form one queue: the router
    sends a request to any rank with a free slot (the least wait), unless the stage's
    ``routing`` says otherwise (``finite_run_wait``: each worker its own queue). Why the bottleneck alone: in a tandem of single-server stations with
    constant service times the total wait is that of the slowest station fed the original
    arrivals (Friedman 1965, "Reduction methods for tandem queuing systems", Oper. Res.
    13(1)). With several slots per stage that is not exact, so the other stage is a queue too,
    held ``slots / its own capacity``, and the larger of the two waits is taken (a request
    waits at least at the stage where it waits most)."""
    bottleneck = min(stages, key=lambda s: s.capacity)
    waits = [
        finite_run_wait(
            rate,
            st.slots,
            st.slots / (capacity if st is bottleneck else st.capacity),
            num_requests,
            st.workers,
            st.routing,
        )
        for st in stages
        if st.capacity > 0.0 and np.isfinite(st.capacity)
    ]
    return max(waits, default=0.0), bottleneck


class _Curves(NamedTuple):
    """A disaggregated deployment along a grid of total throughputs."""

    pc: PrefillCurve
    dc: LoadCurve
    transfer_wait: np.ndarray
    decode_wait: np.ndarray
    ttft: np.ndarray
    e2e: np.ndarray
    ok: np.ndarray
    poll_wait: np.ndarray
    """The decode workers' poll wait ahead of the prefill (``steady_state.decode_poll_wait``)."""


def _open_loop_stages(
    it_p: IterationModel,
    eng_p: EngineProfile,
    it_d: IterationModel,
    eng_d: EngineProfile,
    prefill: Pool,
    decode: Pool,
    work: Workload,
    decode_work: Workload,
    kv_d: float,
    probe: LoadCurve,
    edge: tuple[float, float] | None,
) -> tuple[Stage, Stage]:
    """Both stages of a disaggregated deployment at their own capacities, for
    :func:`disaggregated_open_wait`. A prefill rank at its capacity runs full token-budget
    iterations back to back, each holding ``capacity x iteration time`` prompts (Little's
    law). A decode rank's slots are its running requests at its capacity, read as the
    aggregated open loop reads them (``steady_state.open_loop``): ``edge`` (throughput, running
    requests of one decode rank) where the decode workers set the deployment's resolved
    capacity, else the decode rank's own load curve with its capacity resolved
    (``steady_state.resolve_capacity``)."""
    # At an infinite rate the curve reads its last point: the full-budget iteration.
    pc = prefill_curve(it_p, eng_p, work, np.array([np.inf]))
    cap_p = pc.capacity
    # Little's law over a prompt's whole prefill: its chunks' iterations (pc.chunks).
    slots_p = max(cap_p * float(pc.iteration_s[0]) * pc.chunks, 1.0) * prefill.ranks
    if edge is None:
        dc = resolve_capacity(it_d, eng_d, decode_work, kv_d, probe)
        ok = np.flatnonzero(dc.feasible)
        top = int(ok[-1]) if ok.size else 0
        edge = (float(dc.x[top]), float(dc.running[top]))
    return (
        Stage(name="prefill", slots=slots_p, capacity=cap_p * prefill.ranks),
        Stage(
            name="decode",
            slots=max(edge[1], 1.0) * decode.ranks,
            capacity=edge[0] * decode.ranks,
            workers=decode.workers,
            routing=decode.routing,
        ),
    )


def closed_loop_ttft(
    it_p: IterationModel,
    eng_p: EngineProfile,
    prefill: Pool,
    work: Workload,
    client: Client,
    admission_s: float,
    decode_slots: float,
    tpot_s: float,
    rank_tokens: float,
    poll_s: float = 0.0,
    decode: Pool | None = None,
    arrival_slots: float = math.inf,
) -> ClosedLoopTTFT:
    """A closed-loop client's requests through the prefill workers and the decode slots
    (``disagg_closed_loop.simulate``). The prefill iteration is the model's
    (``IterationModel.time_s`` over the fullest rank's prompt tokens, each prompt's attention
    over half the mean prompt, as ``prefill_curve`` prices it); a rank takes prompts up to its
    token budget ``rank_tokens`` (the engine's own, ``max_num_tokens``: not ``eng_p``'s, which
    folds a prompt cap into tokens at the mean prompt for the steady state) and, where the
    deployment caps it, its prompt count; the request's own work
    (``request_overhead_ms``) and, under an overlap scheduler, one more iteration follow the
    iteration before the first token leaves. Lengths: the client's distribution
    (``Workload`` mean and coefficient of variation), prompts and outputs at independent,
    evenly spread quantiles, the first round's spread over the whole distribution; fixed
    lengths are the limit of no spread. A long run is followed for its first rounds and tail
    only (``disagg_closed_loop.simulated_requests``), weighted to its measured count.
    ``poll_s``: the decode workers' poll wait before a request's prefill may start
    (``steady_state.decode_poll_wait``), for every request after the start burst, which finds
    them idle. ``arrival_slots``: the decode workers' request slots taken when a request is
    sent, before its prefill (``EngineProfile.arrival_slots``)."""
    conc = int(client.concurrency or 1)
    measured = max(measured_requests(work, client), conc)
    n = simulated_requests(conc, measured)
    keep = 1.0 - work.prefix_hit
    ins = client_lengths(work.input_len, work.input_cv, n, GOLDEN, burst=conc) * keep
    outs = client_lengths(work.output_len, work.output_cv, n, SILVER, burst=conc)
    budget = float(rank_tokens)
    top = max(budget, float(ins.max()))
    grid = np.geomspace(1.0, top, GRID)
    zeros = np.zeros_like(grid)
    half = np.full_like(grid, work.input_len / 2.0)
    t_grid = np.asarray(it_p.time_s(zeros, zeros, grid, half), dtype=float)
    overhead = eng_p.request_overhead_ms * 1e-3
    overlap = eng_p.overlap_scheduler
    xs, ts = grid.tolist(), t_grid.tolist()
    last = len(xs) - 1

    def iteration_s(tokens: float) -> float:
        # np.interp's rule (clamped at the ends) on lists: called once an iteration, where
        # numpy's per-call overhead was a fifth of the simulation's time.
        j = bisect_right(xs, tokens) - 1
        if j < 0:
            return ts[0]
        if j >= last:
            return ts[last]
        return ts[j] + (ts[j + 1] - ts[j]) / (xs[j + 1] - xs[j]) * (tokens - xs[j])

    stage = PrefillStage(
        workers=prefill.workers,
        ranks=prefill.par.attention_dp,
        rank_tokens=budget,
        rank_prompts=prefill.max_batch or eng_p.max_num_seqs,
        prompt_limit=math.inf if eng_p.max_prefill_tokens is None else eng_p.max_prefill_tokens,
        chunked=eng_p.chunked_prefill,
        iteration_s=iteration_s,
        done_after_s=overhead,
        overlap=overlap,
    )
    return simulate(
        concurrency=conc,
        input_lens=ins,
        output_lens=outs,
        prefill=stage,
        admission_s=admission_s,
        decode_slots=decode_slots,
        tpot_s=tpot_s,
        num_requests=measured,
        ready_after_s=poll_s,
        decode_workers=1 if decode is None else decode.workers,
        routing="least-loaded" if decode is None else decode.routing,
        arrival_slots=arrival_slots,
    )


def prefill_worker_speculation(
    eng: EngineProfile, speculation: Speculation | None
) -> Speculation | None:
    """The speculation a disaggregated deployment's prefill workers load and run over each
    prompt: the deployment's, unless the launch gives the speculative flags to the decode
    workers only (``EngineProfile.prefill_worker_speculation``)."""
    return speculation if eng.prefill_worker_speculation else None


def prefill_worker_engine(eng: EngineProfile) -> EngineProfile:
    """The engine as a disaggregated deployment's prefill workers start it: the launch's
    prefill-only settings (``EngineProfile.prefill_max_num_batched_tokens``,
    ``prefill_max_prefill_tokens``, ``prefill_memory_fraction``, ``prefill_chunked_prefill``:
    SGLang flags of the prefill workers, which srt-slurm recipes state apart from the decode
    workers') over the engine's.
    Without chunked prefill SGLang bounds a prefill batch by ``--max-prefill-tokens`` alone
    (v0.5.9 ``scheduler.py`` ``init_chunked_prefill``: a size <= 0 is None;
    ``schedule_policy.py`` ``PrefillAdder``: ``rem_chunk_tokens`` None, the batch's first
    prompt whole) and reserves activation memory for it (``server_args.py``
    ``_handle_gpu_memory_settings``: ``max_prefill_tokens`` where ``chunked_prefill_size <=
    0``), so the worker's token budget becomes that limit. The worker's whole budget: its
    attention-DP ranks' share is :func:`prefill_rank_engine`'s."""
    changes: dict[str, Any] = {}
    if eng.prefill_max_num_batched_tokens is not None:
        changes["max_num_batched_tokens"] = eng.prefill_max_num_batched_tokens
    if eng.prefill_max_prefill_tokens is not None:
        changes["max_prefill_tokens"] = eng.prefill_max_prefill_tokens
    if eng.prefill_memory_fraction is not None:
        # A stated fraction replaces SGLang's rule (as engine option memory_fraction does).
        changes.update(memory_fraction=eng.prefill_memory_fraction, static_memory_rule=None)
    if eng.prefill_chunked_prefill is not None:
        changes["chunked_prefill"] = eng.prefill_chunked_prefill
        limit = changes.get("max_prefill_tokens", eng.max_prefill_tokens)
        if not eng.prefill_chunked_prefill and limit is not None:
            changes["max_num_batched_tokens"] = limit
    return dataclasses.replace(eng, **changes) if changes else eng


def prefill_rank_engine(eng: EngineProfile, prefill: Pool) -> EngineProfile:
    """The scheduler settings one attention-DP rank of ``prefill``'s workers runs with: the
    prefill worker's engine (:func:`prefill_worker_engine`), its token budget and stated running
    cap split over the ranks (SGLang, ``EngineProfile.per_attention_rank``), and the prefill
    workers' own overlap setting (TensorRT-LLM context servers run without it). The one reading
    of the prefill ranks' chunk and prompt limit: the steady state's prefill curve and open-loop
    stages (through :func:`disaggregated_engines`) and the closed loop's TTFT
    (:func:`disaggregated_prediction`) read it. Without chunked prefill the budget is the worker's
    ``--max-prefill-tokens``, which SGLang does not divide (``scheduler.py``
    ``self.max_prefill_tokens = server_args.max_prefill_tokens``; ``-1 // dp_size`` stays
    -1)."""
    worker = prefill_worker_engine(eng)
    rank = worker.per_attention_rank(prefill.par.attention_dp)
    if eng.prefill_chunked_prefill is False:
        rank = dataclasses.replace(rank, max_num_batched_tokens=worker.max_num_batched_tokens)
    if eng.prefill_worker_overlap is not None:
        rank = dataclasses.replace(rank, overlap_scheduler=eng.prefill_worker_overlap)
    return rank


def disaggregated_engines(
    eng: EngineProfile, prefill: Pool, decode: Pool, work: Workload
) -> tuple[EngineProfile, EngineProfile]:
    """The engine as the prefill workers and as the decode workers run it."""
    # A decode worker pre-allocates the KV pages of every request it accepts before the transfer
    # (SGLang PD disaggregation "decode pre-allocation"; Dynamo/NIXL target buffers), so it
    # admits against its pool rather than preempting later.
    # Each attention-DP rank of a pool schedules with its share of the engine's budget and
    # stated running cap (SGLang, EngineProfile.per_attention_rank); the prefill ranks with the
    # prefill workers' own settings.
    eng_p = prefill_rank_engine(eng, prefill)
    eng_d = dataclasses.replace(
        eng.per_attention_rank(decode.par.attention_dp), kv_policy="reserve"
    )
    if eng.decode_moe_dp_communication is not None:
        # A launch that sets the decode workers' MoE all-to-all apart (SGLang
        # --moe-a2a-backend deepep on the decode workers only, EngineProfile).
        eng_d = dataclasses.replace(eng_d, moe_dp_communication=eng.decode_moe_dp_communication)
    if prefill.max_batch is not None:
        tokens = max(int(prefill.max_batch * work.input_len), 1)
        eng_p = dataclasses.replace(
            eng_p, max_num_batched_tokens=min(eng_p.max_num_batched_tokens, tokens)
        )
    if decode.max_batch is not None:
        eng_d = dataclasses.replace(eng_d, max_num_seqs=min(eng_d.max_num_seqs, decode.max_batch))
    return eng_p, eng_d


class DisaggregatedCurves(NamedTuple):
    """What a disaggregated deployment's prediction reads for a client, before the client's own
    load (:func:`disaggregated_curves`)."""

    prefill: Pool
    decode: Pool
    eng: EngineProfile
    eng_p: EngineProfile
    eng_d: EngineProfile
    it_p: IterationModel
    it_d: IterationModel
    work: Workload
    decode_work: Workload
    kv_d: float
    mem_gib: float
    decode_fits: bool
    """The decode workers hold one request's KV cache (prompt and output) beside their weights."""
    transfer_s: float
    x_total: np.ndarray
    curves: _Curves
    stages: tuple[Stage, Stage] | None
    """An open loop's admission stages at their capacities; None for a closed loop."""
    prefill_fits: bool = True
    """The prefill workers hold one prompt's KV cache beside their weights."""

    @property
    def fits(self) -> bool:
        """Both pools hold a request (the deployment's answer, the search's screen)."""
        return self.decode_fits and self.prefill_fits


def predict_disaggregated(
    model: ModelSpec,
    cluster: Cluster,
    prefill: Pool,
    decode: Pool,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    client: Client,
    speculation: Speculation | None = None,
) -> Prediction:
    """Prefill workers hand each prompt's KV cache to decode workers (DistServe, Splitwise).
    ``speculation`` runs on both pools: the decode workers verify and draft, the prefill
    workers run the draft module over the prompt (TensorRT-LLM's context phase, tech blog 2),
    unless the launch gives it to the decode workers only
    (``EngineProfile.prefill_worker_speculation``)."""
    built = disaggregated_curves(
        model, cluster, prefill, decode, fmt, kv_dtype, profile, eng, work, client, speculation
    )
    return disaggregated_prediction(built, client)


def disaggregated_curves(
    model: ModelSpec,
    cluster: Cluster,
    prefill: Pool,
    decode: Pool,
    fmt: WeightFormat,
    kv_dtype: str,
    profile: Profile,
    eng: EngineProfile,
    work: Workload,
    client: Client,
    speculation: Speculation | None = None,
) -> DisaggregatedCurves:
    """The part of :func:`predict_disaggregated` the client's load does not change: both pools'
    curves over the deployment's load, its capacity resolved where ``client`` reaches it (any
    open loop; a closed loop past the grid's top point), and an open loop's stages. For an open
    loop it is the same at every rate, so the SLO search reads one deployment at many rates
    through :func:`disaggregated_prediction` without rebuilding it."""
    eng_p, eng_d = disaggregated_engines(eng, prefill, decode, work)
    eng_w = prefill_worker_engine(eng)
    spec_p = prefill_worker_speculation(eng, speculation)
    it_p = _iteration_model(model, cluster, prefill.par, fmt, kv_dtype, profile, eng_w, spec_p)
    it_d = _iteration_model(model, cluster, decode.par, fmt, kv_dtype, profile, eng_d, speculation)
    kv_d, _, mem_d = kv_pool(
        model, cluster, decode.par, fmt, kv_dtype, profile, eng, work, speculation
    )
    kv_p, _, mem_p = kv_pool(
        model, cluster, prefill.par, fmt, kv_dtype, profile, eng_w, work, spec_p
    )
    # Both pools must hold a request: the decode workers its prompt and output, the prefill
    # workers its prompt (a prefill worker that cannot hold its weights and one prompt's KV
    # cache was shown as fitting at 133.8 GiB on an 80 GiB H100; review, helper-148).
    prefill_fits = kv_p >= work.input_len
    decode_fits = kv_d >= work.input_len + work.output_len
    kv_d = max(kv_d, work.input_len + work.output_len)
    decode_work = Workload(input_len=work.input_len, output_len=work.output_len, prefix_hit=1.0)
    probe = load_curve(it_d, eng_d, decode_work, kv_d)
    x_hi = float(probe.x.max()) * decode.ranks
    transfer = kv_transfer_s(model, cluster, prefill, decode, kv_dtype, profile, work.input_len)
    steps = max(work.output_len - 1.0, 0.0)

    def curves(x_total: np.ndarray) -> _Curves:
        pc = prefill_curve(it_p, eng_p, work, x_total / prefill.ranks)
        dc = load_curve(it_d, eng_d, decode_work, kv_d, x_grid=x_total / decode.ranks)
        transfer_wait = kv_transfer_wait_s(transfer, x_total / prefill.ranks)
        hand_off = transfer + np.where(np.isfinite(transfer_wait), transfer_wait, 0.0)
        decode_wait = decode_admission_s(dc.iteration_s, hand_off, eng_d)
        # SGLang --scheduler-recv-interval on the decode workers: the prefill waits for the
        # decode worker to take the request (decode_poll_wait).
        poll = decode_poll_wait(eng_d, dc.decoding, dc.decode_only_s)
        ttft = poll + pc.ttft_s + decode_wait
        ok = pc.feasible & dc.feasible & np.isfinite(transfer_wait)
        e2e = ttft + steps * dc.tpot_s
        return _Curves(pc, dc, transfer_wait, decode_wait, ttft, e2e, ok, poll)

    x_total = np.geomspace(x_hi * 1e-5, x_hi * 4.0, GRID)
    cv = curves(x_total)
    # The deployment's capacity lies between the last feasible grid point and the next (a
    # 15% step). A client at or past it runs at the capacity (a saturated closed loop's TTFT is
    # C / capacity less the decode time), so the step would show as tens of percent of TTFT:
    # resolve the capacity inside that interval when the client reaches it (the rule the
    # aggregated steady state uses too, ``steady_state.refine_edge``).
    feasible_at = np.flatnonzero(cv.ok)
    if feasible_at.size and feasible_at[-1] + 1 < x_total.size:
        i = int(feasible_at[-1])
        if client.request_rate is not None:
            # Any open loop: its queue's slots and hold are read at the capacity (as
            # ``steady_state.needs_capacity`` says for aggregated engines).
            reaches = True
        else:
            reaches = float(client.concurrency or 1) > x_total[i] * cv.e2e[i]
        if reaches:
            fine = refine_edge(x_total, cv.ok, lambda xs: curves(xs).ok)
            x_total = np.unique(np.concatenate([x_total, fine]))
            cv = curves(x_total)
    stages: tuple[Stage, Stage] | None = None
    if client.request_rate is not None:
        ok_at = np.flatnonzero(cv.ok)
        top = int(ok_at[-1]) if ok_at.size else 0
        cap = float(x_total[top])
        # The decode workers bind where they turn infeasible right past the resolved edge.
        binds = top + 1 < x_total.size and not cv.dc.feasible[top + 1]
        edge = (cap / decode.ranks, float(cv.dc.running[top])) if binds else None
        stages = _open_loop_stages(
            it_p, eng_p, it_d, eng_d, prefill, decode, work, decode_work, kv_d, probe, edge
        )
    return DisaggregatedCurves(
        prefill=prefill, decode=decode, eng=eng, eng_p=eng_p, eng_d=eng_d, it_p=it_p, it_d=it_d,
        work=work, decode_work=decode_work, kv_d=kv_d, mem_gib=max(mem_p, mem_d), decode_fits=decode_fits,
        transfer_s=transfer, x_total=x_total, curves=cv, stages=stages,
        prefill_fits=prefill_fits,
    )  # fmt: skip


def disaggregated_prediction(built: DisaggregatedCurves, client: Client) -> Prediction:
    """:func:`predict_disaggregated` of the deployment ``built`` (:func:`disaggregated_curves`
    for this client, or for any open loop when ``client`` is one)."""
    prefill, decode, eng, eng_p, eng_d = (
        built.prefill, built.decode, built.eng, built.eng_p, built.eng_d,
    )  # fmt: skip
    it_p, it_d, work, decode_work, kv_d = (
        built.it_p, built.it_d, built.work, built.decode_work, built.kv_d,
    )  # fmt: skip
    mem_gib, decode_fits, transfer, x_total, cv, stages = (
        built.mem_gib, built.decode_fits, built.transfer_s, built.x_total, built.curves,
        built.stages,
    )  # fmt: skip
    assert (stages is None) == (client.request_rate is None), "built for another kind of client"
    steps = max(work.output_len - 1.0, 0.0)
    pc, dc, transfer_wait, decode_wait, ttft, e2e, ok, poll_wait = cv
    idx = np.flatnonzero(ok)
    share = pools_placement(prefill, decode, it_p.cluster.gpus_per_node).same_node_share(
        "prefill", "decode"
    )
    link = (
        "over NVLink (both pools in one node)"
        if share == 1.0
        else "over the NIC (the pools on different nodes)"
        if share == 0.0
        else f"({share:.0%} of prefill/decode worker pairs share a node: NVLink; the rest the NIC)"
    )
    notes = [f"KV transfer {transfer * 1e3:.2f} ms per request {link}"]
    if not idx.size:
        # No steady state even at the lightest load (a pool cannot hold one request's work in
        # its budget or cache): evaluate the lightest load point and say so.
        notes.append("no steady state found for this worker split; lightest load point shown")
        idx = np.array([0])
    top = int(idx[-1])
    idx = idx[idx <= top]
    sim: ClosedLoopTTFT | None = None
    if client.request_rate is not None:
        rate = float(client.request_rate)
        cap = float(x_total[top])
        x = min(rate, cap)
        assert stages is not None
        n_open = measured_requests(work, client)
        queue, bottleneck = disaggregated_open_wait(rate, cap, stages, n_open)
        saturated = rate >= cap
        notes.append(
            f"open-loop queue at the {bottleneck.name} workers ({bottleneck.slots:.1f} slots, "
            f"capacity {cap:.3f} req/s)"
        )
    else:
        conc = float(client.concurrency or 1)
        in_flight = x_total * e2e
        if conc <= in_flight[top]:
            x = float(np.interp(conc, in_flight[idx], x_total[idx]))
        else:
            x = float(x_total[top])
        saturated = bool(conc > in_flight[top])

    def at(a: np.ndarray) -> float:
        return float(np.interp(x, x_total, a))

    tpot = at(dc.tpot_s)
    if client.request_rate is None:
        # Every closed loop, fixed lengths or not (the limit of no spread): its start-up burst
        # and rounds at the prefill workers (which re-bunch when lengths vary) and its decode
        # slots, request by request with the stages' own times (``disagg_closed_loop``).
        kv_requests = kv_capacity_requests(kv_d, decode_work, eng_d)
        slots = decode.ranks * min(float(eng_d.max_num_seqs), kv_requests)
        # SGLang pre-allocates a request's slot and KV before its prefill: the request slots
        # its ranks hold from arrival, the KV they hold bounding them too (none elsewhere).
        held = eng.arrival_slots(eng_d.max_num_seqs, decode.par.attention_dp)
        arrival = decode.ranks * min(held, kv_requests) if math.isfinite(held) else math.inf
        # A prefill rank's own token budget (its share under SGLang's attention DP, the prefill
        # workers' own chunk), not eng_p's, which folds the prompt cap into tokens.
        rank_eng = prefill_rank_engine(eng, prefill)
        sim = closed_loop_ttft(
            it_p, eng_p, prefill, work, client, at(decode_wait), slots, tpot,
            rank_tokens=float(rank_eng.max_num_batched_tokens), poll_s=at(poll_wait),
            decode=decode, arrival_slots=arrival,
        )  # fmt: skip
        t_ttft = sim.mean_ttft_s
        prefill_part = sim.mean_prefill_s
        queue = sim.mean_slot_wait_s
        followed = len(sim.ttft_s) // sim.runs
        lengths = "fixed lengths" if work.fixed else "lengths varying"
        rest = (
            "" if followed >= sim.requests else ", the last full-load rounds standing for the rest"
        )
        if sim.runs > 1:
            rest += f"; the mean of {sim.runs} random deals to the decode workers"
        notes.append(
            f"closed loop followed request by request ({followed} of {sim.requests:.0f} "
            f"requests of {client.concurrency} clients, {lengths}): the burst of its first "
            f"round and the rounds after it at the prefill workers{rest}"
        )
    else:
        t_ttft = at(ttft) + queue
        prefill_part = at(pc.ttft_s)
    if decode.routing != "least-loaded" and decode.workers > 1:
        # Both loops: the closed loop's followed slot wait; the open loop's decode stage
        # queues per worker (``finite_run_wait``), its wait inside the deployment's queue.
        how = "in turn" if decode.routing == "round-robin" else "at random"
        waits = (
            f"a request waits {queue * 1e3:.0f} ms on average for a slot on its worker"
            if sim is not None
            else "each worker queues its own share of the arrivals"
        )
        notes.append(
            f"decode workers picked {how} ({decode.routing}), blind to their load: {waits}"
        )
    hand_off = transfer + at(np.where(np.isfinite(transfer_wait), transfer_wait, 0.0))
    # The start-up burst is inside the prefill part (followed closed loop) or absent (open
    # loop); the note keeps its field for the scripts that read it.
    notes.append(
        f"TTFT parts: prefill workers {prefill_part * 1e3:.0f} ms, decode admission "
        f"{at(decode_wait) * 1e3:.0f} ms (the KV hand-off, {hand_off * 1e3:.1f} ms, runs inside "
        f"it), client burst 0 ms, queue {queue * 1e3:.0f} ms"
    )
    if (poll_ms := at(poll_wait) * 1e3) > 0.0:
        notes.append(
            f"decode workers' receive interval {eng_d.recv_interval}: a request waits "
            f"{poll_ms:.0f} ms for their poll before its prefill may start"
        )
    served = x
    if sim is not None:
        # A closed loop of C clients completes C / E2E requests a second (Little's law), with
        # the followed TTFT: its burst, re-bunched waves and waits for a decode slot (on a busy
        # worker, with a blind router) are spent by the clients too, which the steady state's
        # rate leaves out. The same for every router: one decode worker reads the same.
        served = min(x, float(client.concurrency or 1) / (t_ttft + steps * tpot))
    # The decode workers hold what the served rate keeps decoding (Little's law again: the
    # requests decoding and their KV scale with the rate at one decode time).
    held = served / x if x > 0.0 else 1.0
    point = OperatingPoint(
        x=served,
        queue_s=queue,
        iteration_s=at(dc.iteration_s),
        decode_only_s=at(dc.decode_only_s),
        own_prefill_s=at(dc.decode_only_s),
        prefill_iterations=1.0,
        running=at(dc.running) * held,
        kv_occupancy=min(at(dc.kv_tokens_used) * held / kv_d, 1.0),
        preemptions_per_request=0.0,
        ttft_s=t_ttft,
        tpot_s=tpot,
        e2e_s=t_ttft + steps * tpot,
        saturated=saturated,
        tokens_per_iteration=it_d.tokens_per_iteration,
    )
    if not decode_fits:
        notes.append("decode workers hold no room for one request's KV cache")
    if not built.prefill_fits:
        notes.append("prefill workers hold no room for one prompt's KV cache")
    fits = built.fits
    pred = _prediction(
        "disaggregated",
        prefill.gpus + decode.gpus,
        fits,
        mem_gib,
        kv_d,
        point,
        1,
        work,
        it_d,
        notes,
    )
    pct = dict(pred.pct)
    if sim is not None:
        ttft_q = weighted_quantiles(sim.ttft_s, sim.weight, np.array(PERCENTILES) / 100.0)
    else:
        spread = at(pc.iteration_s)
        ttft_q = t_ttft - 0.5 * spread + np.array(PERCENTILES) / 100.0 * spread
    for i, q in enumerate(PERCENTILES):
        pct[f"ttft_p{q}"] = float(ttft_q[i])
        pct[f"e2e_p{q}"] = pct[f"ttft_p{q}"] + steps * pct[f"tpot_p{q}"]
    fields = {f: getattr(pred, f) for f in pred.__slots__}
    limit = disaggregated_limit(cv.pc, cv.dc, cv.transfer_wait, cv.ok)
    return Prediction(**{**fields, "pct": pct, "capacity_limit": limit})


def disaggregated_limit(
    pc: PrefillCurve, dc: LoadCurve, transfer_wait: np.ndarray, ok: np.ndarray
) -> str:
    """What ends a disaggregated deployment's feasible loads, at its first infeasible load:
    the prefill workers' throughput (full token-budget iterations back to back), the KV
    transfers' link, or the decode workers' own limit (``steady_state.capacity_limit``); ``""``
    when every load is feasible."""
    bad = np.flatnonzero(~ok)
    if not bad.size:
        return ""
    i = int(bad[0])
    names = ["prefill_throughput"] if not pc.feasible[i] else []
    names += ["kv_transfer"] if not np.isfinite(transfer_wait[i]) else []
    if not dc.feasible[i]:
        names += [f"decode_{name}" for name in limits_at(dc, i)]
    return "+".join(names)
