"""Iteration-level simulation of a closed-loop benchmark with fixed lengths, by cohorts.

A benchmark client with concurrency ``C`` (genai-perf/aiperf ``--concurrency``, ``vllm bench
--max-concurrency``) sends its first ``C`` requests at once and a new one whenever one finishes.
With fixed prompt and output lengths, requests that start together finish together and return
together: the load moves in *cohorts*. The engine's scheduler decides how a burst is split:
a token budget admits ``budget / ISL`` prompts per iteration (vLLM, TensorRT-LLM mix them with
the running decodes; SGLang runs prefill batches ahead of decodes unless mixed chunking is on),
and how the cohorts drift apart or bunch over later cycles. Each cohort is one record, so a
cycle costs a few events per cohort, and decode-only stretches are jumped over in one step
(their length is known: until the next cohort finishes). A benchmark's warm-up requests
drain before its measured phase, which starts with a burst of ``C`` from an idle engine; the
measured phase is ``rounds`` rounds (the client's requests over its concurrency; unstated:
:data:`BENCHMARK_ROUNDS`), the burst included.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.planner.serving.steady_state import (
    Workload,
    prompts_under_prefill_limit,
    weighted_quantiles,
)

BENCHMARK_ROUNDS = 20
"""Rounds of ``concurrency`` requests a closed-loop benchmark with fixed lengths measures when
its client states no count (``deployment.measured_requests``): today's AIConfigurator generator
(``benchmark/bench_run.sh.j2``, ``BENCH_MULTI_ROUND`` default 20 from 1cc3526b4, 2026-04-01, to
095f58a51) calls ``aiperf profile --concurrency C --num-requests 20*C --warmup-request-count
2*C``. A run of a stated count takes its own: AIConfigurator's eval runner measured ``10*C``
from 2025-08-19 to its removal on 2026-03-03, the generator's template ``50*C`` from 2026-02-11
to 2026-04-01 (``validation.serving_rows.AIC_CLIENT_ERAS``). Either client waits for every
warm-up response before its measured phase (aiperf docs/tutorials/warmup.md, "Grace Period";
genai-perf's perf_analyzer ``ConcurrencyManager::PerformWarmup`` joins its warm-up workers,
``LoadManager::WaitForWarmupAndCleanup``), so the measured requests start from a drained
engine with a burst of ``C`` and the burst is part of the mean."""

SIMULATED_ROUNDS = 4
"""Rounds simulated event by event: the burst, full-load rounds, and the final round (the
tail, whose requests have no successors). With fixed lengths the cohorts settle into a
repeating pattern once the burst has been split by the token budget (a round or two), so the
last full-load round is weighted for the rounds between it and the tail."""

MAX_COHORTS = 256
"""Past this many cohorts the load is effectively staggered: the steady-state model applies.
Not to a burst-only run (one round, no successors): it holds at most ``concurrency`` cohorts and
ends when they do, and it is what the steady state's fallback adds for the benchmark's first
round (``deployment._with_start_burst``), so it must not give up where the full run does."""


def successor_delay_iterations(eng: EngineProfile) -> int:
    """Iterations a closed-loop client's next request skips after the iteration that completed
    its predecessor: one under an overlap scheduler (the host has already prepared the next
    iteration when the request arrives, as for any arrival: the engine profile's source),
    none otherwise. One place for the rule, so that a diagnostic can read the rows with
    another (benchmarks/trt_rc3_ttft_hold.py)."""
    return 1 if eng.overlap_scheduler else 0


@dataclass(slots=True, eq=False)
class _Cohort:
    size: float
    arrival: float
    ready_at_iteration: int
    admitted: bool = False
    done_tokens: float = 0.0
    """Prompt tokens prefilled per request."""
    generated: float = 0.0
    """Tokens emitted per request (speculative decoding adds the expected accepted length per
    iteration, a fraction)."""
    first_token: float = -1.0
    cycle: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CohortResult:
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    weight: np.ndarray
    requests_per_s: float
    mean_running: float
    mean_iteration_s: float
    mean_decode_iteration_s: float


class _Clock:
    """Iteration time from a table over (decode batch, prefill tokens): bilinear interpolation
    of the roofline model, so the event loop never calls numpy per iteration."""

    def __init__(
        self, it: IterationModel, work: Workload, max_running: float, budget: float
    ) -> None:
        self.n = np.unique(np.concatenate([[0.0], np.geomspace(1.0, max(max_running, 1.0), 24)]))
        p_top = max(budget, work.input_len) * 2.0
        self.p = np.unique(np.concatenate([[0.0], np.geomspace(16.0, p_top, 20)]))
        nn, pp = np.meshgrid(self.n, self.p, indexing="ij")
        ctx = np.full_like(nn, work.input_len + work.output_len / 2.0)
        table = it.time_s(
            nn.ravel(), ctx.ravel(), pp.ravel(), np.full(nn.size, work.input_len / 2.0)
        )
        self.rows: list[list[float]] = table.reshape(nn.shape).tolist()
        self.n_list = self.n.tolist()
        self.p_list = self.p.tolist()

    def __call__(self, n: float, p: float) -> float:
        i = min(max(bisect_left(self.n_list, n) - 1, 0), len(self.n_list) - 2)
        j = min(max(bisect_left(self.p_list, p) - 1, 0), len(self.p_list) - 2)
        n0, n1 = self.n_list[i], self.n_list[i + 1]
        p0, p1 = self.p_list[j], self.p_list[j + 1]
        a = min(max((n - n0) / (n1 - n0), 0.0), 1.0)
        b = min(max((p - p0) / (p1 - p0), 0.0), 1.0)
        t = self.rows
        return float(
            t[i][j] * (1 - a) * (1 - b)
            + t[i + 1][j] * a * (1 - b)
            + t[i][j + 1] * (1 - a) * b
            + t[i + 1][j + 1] * a * b
        )


def simulate(
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    concurrency: int,
    max_running: float,
    warmup_cycles: int = 0,
    measured_cycles: int = SIMULATED_ROUNDS,
    rounds: float = BENCHMARK_ROUNDS,
    max_cohorts: int | None = MAX_COHORTS,
) -> CohortResult | None:
    """Simulate ``concurrency`` closed-loop clients on one rank; ``None`` when the load breaks
    into more than ``max_cohorts`` cohorts (then it is staggered and the steady state holds;
    ``None``: no limit, for a single round). ``rounds``: the rounds the benchmark measures; a
    run shorter than ``measured_cycles`` rounds is simulated whole."""
    measured_cycles = max(1, min(measured_cycles, int(np.ceil(rounds - 1e-9))))
    isl = work.input_len * (1.0 - work.prefix_hit)
    osl = max(round(work.output_len), 1)
    # Tokens a decode iteration emits per request and budget tokens it takes (1 and 1, or the
    # expected accepted length and k + 1 under speculative decoding).
    per_it, queries = it.tokens_per_iteration, it.queries
    budget = float(eng.max_num_batched_tokens)
    cap = max(float(min(max_running, eng.max_num_seqs)), 1.0)
    clock = _Clock(it, work, min(cap, float(concurrency)) + 1, budget)
    delay_its = successor_delay_iterations(eng)
    overhead = eng.request_overhead_ms * 1e-3
    cohorts: list[_Cohort] = [_Cohort(size=float(concurrency), arrival=0.0, ready_at_iteration=0)]
    now = 0.0
    iteration = 0
    samples: list[tuple[float, float, float, float]] = []
    done_requests = 0.0
    t_start_measure = -1.0
    total_cycles = warmup_cycles + measured_cycles
    busy_time = 0.0
    iters = 0
    decode_time = 0.0
    decode_iters = 0
    running_area = 0.0
    guard = 0
    dirty = False
    while cohorts:
        guard += 1
        if guard > 200_000 or (max_cohorts is not None and len(cohorts) > max_cohorts):
            return None
        running = sum(c.size for c in cohorts if c.admitted)
        # Admission: FIFO while the running slots (max_num_seqs, KV pages) allow; split a cohort
        # that only partly fits.
        for idx, c in enumerate(cohorts):
            if c.admitted or c.ready_at_iteration > iteration:
                continue
            room = cap - running
            if room < 1.0:
                break
            if c.size > room:
                rest = _Cohort(
                    size=c.size - np.floor(room),
                    arrival=c.arrival,
                    ready_at_iteration=c.ready_at_iteration,
                    cycle=c.cycle,
                )
                c.size = float(np.floor(room))
                cohorts.insert(idx + 1, rest)
                dirty = True
            c.admitted = True
            running += c.size
        decoding = [c for c in cohorts if c.admitted and c.first_token >= 0.0]
        prefilling = [c for c in cohorts if c.admitted and c.first_token < 0.0]
        n_dec = sum(c.size for c in decoding)
        prefill_first = eng.prefill_policy == "prefill_first" and prefilling
        if prefill_first:
            n_dec_now = 0.0
            left = budget
        else:
            n_dec_now = n_dec
            left = max(budget - n_dec * queries, 0.0)
        # SGLang's --max-prefill-tokens (``soft``): the new tokens a prefill batch may start,
        # counted after the mixed decodes (managers/schedule_policy.py PrefillAdder:
        # rem_input_tokens = max_prefill_tokens - mixed decode tokens). In the SGLang of the
        # rows (0.5.x) add_one_req refuses a request whose whole remaining prompt reaches what
        # is left of it, unless it is the batch's first, with or without chunked prefill
        # (``if real_input_tokens >= self.rem_input_tokens and len(self.can_run_list) != 0:
        # return AddReqResult.OTHER``, before the chunk is cut); so a chunk of a later request
        # starts only if that request's whole prompt is below what is left. Only sgl-project/
        # sglang PR #25741 (merged 2026-05, after every SGLang row here) exempted chunked
        # prefill, so that the one crossing it runs. (The ignore_eos path taken with the radix
        # cache disabled, add_one_req_ignore_eos, has no such check; the fixed-length rows that
        # reach this simulation, AIConfigurator's, run with the radix cache on.)
        soft = np.inf if eng.max_prefill_tokens is None else eng.max_prefill_tokens - n_dec_now
        # Prefill allocation, FIFO. A cohort needing more than the budget is split: the requests
        # whose whole (remaining) prompt fits finish now; with chunking the leftover budget
        # advances the rest.
        p_tokens = 0.0
        finished_prefill: list[_Cohort] = []
        for c in prefilling:
            rem = isl - c.done_tokens
            if rem <= 0:
                finished_prefill.append(c)
                continue
            if soft <= 0 and p_tokens > 0.0:
                # Spent: budget_state stops the batch. Not before its first request: the
                # scheduler offers add_one_req the queue's head whatever rem_input_tokens is
                # (mixed decodes may have taken all of it), and add_one_req refuses only when
                # can_run_list is not empty.
                break
            # Requests the soft limit still lets start (inf without one).
            starts = float(prompts_under_prefill_limit(soft, rem, first=p_tokens == 0.0))
            need = c.size * rem
            if need <= left + 1e-9 and c.size <= starts:
                left -= need
                soft -= need
                p_tokens += need
                finished_prefill.append(c)
                continue
            whole = min(float(np.floor(left / rem)) if rem > 0 else 0.0, starts)
            if whole < 1.0 and p_tokens == 0.0 and not eng.chunked_prefill:
                whole = 1.0  # a prompt longer than the budget runs alone (TRT-LLM without chunking)
            if whole >= c.size:
                # The budget rule lets the whole (remaining) cohort in after all.
                left = max(left - need, 0.0)
                soft -= need
                p_tokens += need
                finished_prefill.append(c)
                continue
            if whole >= 1.0:
                part = _Cohort(
                    size=whole,
                    arrival=c.arrival,
                    ready_at_iteration=c.ready_at_iteration,
                    admitted=True,
                    done_tokens=c.done_tokens,
                    cycle=c.cycle,
                )
                c.size -= whole
                cohorts.insert(cohorts.index(c), part)
                dirty = True
                used = whole * rem
                left = max(left - used, 0.0)
                soft -= used
                p_tokens += used
                finished_prefill.append(part)
            if eng.chunked_prefill and left > 0 and (rem < soft or p_tokens == 0.0) and c.size > 0:
                c.done_tokens += left / c.size
                p_tokens += left
                left = 0.0
            break
        if not finished_prefill and p_tokens == 0.0 and n_dec_now == 0.0:
            # Nothing runnable (requests not yet visible to the scheduler): idle one iteration.
            iteration += 1
            now += clock(0.0, 0.0)
            continue
        # Decode-only stretch: jump to the next completion (or arrival becoming schedulable).
        # Waiting cohorts that cannot be admitted (no slot or KV pages) stay waiting until a
        # completion frees room, so they do not stop the jump.
        free = cap - running >= 1.0
        waiting_ready = [c for c in cohorts if not c.admitted]
        pending = bool(prefilling) or (
            free and any(c.ready_at_iteration <= iteration for c in waiting_ready)
        )
        if not pending and n_dec_now > 0:
            steps = min(int(np.ceil((osl - c.generated) / per_it - 1e-9)) for c in decoding)
            if free:
                soon = [c.ready_at_iteration - iteration for c in waiting_ready]
                steps = min([steps, *soon])
            steps = max(steps, 1)
            dt = clock(n_dec_now, 0.0)
            now += steps * dt
            iteration += steps
            iters += steps
            busy_time += steps * dt
            decode_time += steps * dt
            decode_iters += steps
            running_area += steps * dt * running
            for c in decoding:
                c.generated += steps * per_it
        else:
            dt = clock(n_dec_now, p_tokens)
            now += dt
            iteration += 1
            iters += 1
            busy_time += dt
            running_area += dt * running
            if p_tokens == 0.0:
                decode_time += dt
                decode_iters += 1
            if n_dec_now > 0:
                for c in decoding:
                    c.generated += per_it
            for c in finished_prefill:
                c.done_tokens = isl
                c.first_token = now
                c.generated = 1
        # Completions: record, and the clients send their next requests at once.
        for c in [c for c in cohorts if c.first_token >= 0.0 and c.generated >= osl - 1e-9]:
            cohorts.remove(c)
            if c.cycle >= warmup_cycles:
                if t_start_measure < 0:
                    t_start_measure = c.arrival
                ttft = c.first_token - c.arrival + overhead
                e2e = now - c.arrival + overhead
                tpot = (now - c.first_token) / max(osl - 1, 1)
                # The last full-load round stands for the rounds not simulated; the final round
                # is the benchmark's tail, where no new requests follow (see SIMULATED_ROUNDS).
                stand_in = measured_cycles > 2 and c.cycle == total_cycles - 2
                weight = c.size * (max(rounds - measured_cycles, 0) + 1 if stand_in else 1)
                samples.append((ttft, tpot, e2e, weight))
                done_requests += c.size
            if c.cycle + 1 < total_cycles:
                dirty = True
                cohorts.append(
                    _Cohort(
                        size=c.size,
                        arrival=now,
                        ready_at_iteration=iteration + delay_its,
                        cycle=c.cycle + 1,
                    )
                )
        if dirty:
            # Only new or split cohorts can have caught up with a neighbour's state.
            _merge(cohorts)
            dirty = False
    if not samples:
        return None
    arr = np.array(samples)
    # Closed loop: every client always has one request in the system, so Little's law gives
    # the throughput exactly from the mean time in system.
    mean_e2e = float(np.average(arr[:, 2], weights=arr[:, 3]))
    return CohortResult(
        ttft_s=arr[:, 0],
        tpot_s=arr[:, 1],
        e2e_s=arr[:, 2],
        weight=arr[:, 3],
        requests_per_s=concurrency / max(mean_e2e, 1e-12),
        mean_running=running_area / max(busy_time, 1e-12),
        mean_iteration_s=busy_time / max(iters, 1),
        mean_decode_iteration_s=decode_time / max(decode_iters, 1)
        if decode_iters
        else busy_time / max(iters, 1),
    )


def simulate_ranks(
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    concurrency: int,
    ranks: int,
    max_running: float,
    burst_only: bool = False,
    rounds: float = BENCHMARK_ROUNDS,
) -> CohortResult | None:
    """Closed loop of ``concurrency`` clients over ``ranks`` attention ranks (replicas x
    attention-DP groups). A load-balancing router spreads the requests evenly (SGLang's DP
    attention controller round robin, vLLM's DP load balancer, Dynamo's router), so a rank holds
    ``floor(C / ranks)`` of them or one more; each kind of rank is simulated once and weighted
    by how many ranks it stands for. Per-rank figures in the result are averages over all ranks
    (an idle rank counts with no requests), so ``requests_per_s * ranks`` is the total.
    ``burst_only``: only the benchmark's first round, the burst of ``concurrency`` requests on a
    drained engine (one measured round, no successors); else ``rounds`` measured rounds (each
    rank holds its share of the requests and of the concurrency: the same rounds)."""
    lo, extra = divmod(int(concurrency), int(ranks))
    parts: list[tuple[CohortResult, int]] = []
    for load, count in ((lo, ranks - extra), (lo + 1, extra)):
        if load < 1 or count == 0:
            continue
        if burst_only:
            # One round: at most ``load`` cohorts, finite; no cohort limit (MAX_COHORTS).
            sim = simulate(
                it, eng, work, load, max_running, measured_cycles=1, rounds=1, max_cohorts=None
            )
        else:
            sim = simulate(it, eng, work, load, max_running, rounds=rounds)
        if sim is None:
            return None
        parts.append((sim, count))
    if len(parts) == 1 and parts[0][1] == ranks:
        return parts[0][0]
    if not parts:
        return None
    active = sum(count for _, count in parts)
    return CohortResult(
        ttft_s=np.concatenate([p.ttft_s for p, _ in parts]),
        tpot_s=np.concatenate([p.tpot_s for p, _ in parts]),
        e2e_s=np.concatenate([p.e2e_s for p, _ in parts]),
        weight=np.concatenate([p.weight * count for p, count in parts]),
        requests_per_s=sum(p.requests_per_s * count for p, count in parts) / ranks,
        mean_running=sum(p.mean_running * count for p, count in parts) / ranks,
        mean_iteration_s=sum(p.mean_iteration_s * count for p, count in parts) / active,
        mean_decode_iteration_s=sum(p.mean_decode_iteration_s * c for p, c in parts) / active,
    )


def _merge(cohorts: list[_Cohort]) -> None:
    """Cohorts in the same state (same arrival, progress and cycle) are one cohort."""
    out: list[_Cohort] = []
    last: tuple[object, ...] | None = None
    for c in cohorts:
        key = (
            c.admitted, c.arrival, c.done_tokens, c.generated, c.first_token, c.cycle,
            c.ready_at_iteration,
        )  # fmt: skip
        if key == last:
            out[-1].size += c.size
        else:
            out.append(c)
            last = key
    if len(out) != len(cohorts):
        cohorts[:] = out


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """One quantile by :func:`steady_state.weighted_quantiles` (the rule every reported
    percentile uses)."""
    return float(weighted_quantiles(values, weights, np.array([q]))[0])
