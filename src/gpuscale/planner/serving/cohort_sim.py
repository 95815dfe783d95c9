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

import math
from bisect import bisect_left
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.planner.serving.adp_lockstep import DUMMY_DECODE_TOKENS, in_step, step_time_s
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
to 2026-04-01 (``validation.serving_clients.AIC_CLIENT_ERAS``). Either client waits for every
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
    entry: int = -1
    """Once decoding, the index of its tokens emitted per request in the rank's
    ``_Rank.generated`` (``-1`` before its first token); the cohorts that got their first token
    in one iteration share it (every decoding cohort emits alike from then on)."""
    first_token: float = -1.0
    cycle: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CohortResult:
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    weight: np.ndarray
    requests_per_s: float
    """Measured requests over the benchmark's duration, per rank (:attr:`duration_s`)."""
    duration_s: float
    """The measured phase's wall time, from its first request sent to its last response: the
    denominator of every client's throughput (``vllm bench`` ``benchmark_duration``, aiperf's
    and genai-perf's benchmark duration, ``trtllm-bench``'s total latency). Not Little's law's
    ``clients / time in system``, which assumes every client always has a request in flight:
    at the end of a finite run the clients stop sending, and a run of ``C`` requests at once
    (``trtllm-bench throughput``, ``--concurrency`` unlimited) ends with its last response,
    about twice its mean latency when its requests queue for slots."""
    mean_running: float
    mean_iteration_s: float
    mean_decode_iteration_s: float


class _Clock:
    """Iteration time from a table over (decode batch, prefill tokens): bilinear interpolation
    of the roofline model, so the event loop never calls numpy per iteration."""

    def __init__(
        self, it: IterationModel, work: Workload, max_running: float, budget: float
    ) -> None:
        # Padded CUDA graphs make the time a step function of the decodes: each captured size
        # and the point just above it are grid points, so the interpolation stays on a step.
        steps = [s for s in it.decode_graph_sizes if s < max_running]
        self.n = np.unique(
            np.concatenate([
                [0.0], np.geomspace(1.0, max(max_running, 1.0), 24), steps,
                [s + 1e-6 for s in steps],
            ])
        )  # fmt: skip
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


NO_LIMIT = 1 << 40
"""A rank with nothing to run and nothing waiting puts no limit on a decode-only jump."""


class _Rank:
    """One simulated rank (one kind of rank: ranks of the same load move alike): its cohorts,
    its scheduler's choice for the next iteration (:meth:`plan`) and its samples.

    Decoding cohorts (a first token out) are most of a large burst's hundreds of cohorts, and
    all they do is emit alike and finish, so they are not visited per iteration (a visit per
    cohort per iteration made one prediction cost up to ~0.3 s). ``cohorts`` keeps every
    cohort in FIFO order (admission, prefill, completions and merges follow it); ``open`` is
    that order restricted to the cohorts without a first token (waiting or prefilling), all
    that admission and prefill look at. The decoding cohorts are grouped by the iteration that
    gave them their first token (an *entry*: ``_Cohort.entry``, ``by_entry``); their requests
    are counted in ``n_dec`` (whole requests: sums of sizes are exact in any order), and the
    tokens they have emitted are one array over the entries (``generated``), moved on by one
    vector add per iteration: the same float additions, element by element, as one per
    cohort. An earlier entry has had every addition a later one has had, from the same 1
    (rounding is monotone), so it is never behind: the first live entry finishes first, and
    the finished are the entries before the first one still short of the output length."""

    def __init__(self, load: int, ctx: _Setup) -> None:
        self.load = load
        self.x = ctx
        self.to_send = (
            (ctx.rounds + ctx.warmup_cycles - 1) * load
            if ctx.rounds <= ctx.measured_cycles + 1e-9
            else math.inf
        )
        """Requests the clients still send after their first: the benchmark's ``rounds x
        load`` in all where the whole run is simulated (a last round of fewer than ``load``
        goes to the first clients to finish, as a client issues its next request to the first
        free worker), unlimited where the stand-in round extrapolates the run."""
        self.cohorts: list[_Cohort] = [_Cohort(size=float(load), arrival=0.0, ready_at_iteration=0)]
        self.samples: list[tuple[float, float, float, float]] = []
        self.running_area = 0.0
        self.dirty = False
        # The plan of the iteration being run (set by ``plan``).
        self.running = 0.0
        self.n_dec_now = 0.0
        self.p_tokens = 0.0
        self.finished_prefill: list[_Cohort] = []
        # SGLang --scheduler-recv-interval: the iteration of the last poll for new requests
        # (``poll_iteration``), and whether the iteration just run carried prompt tokens (the
        # next loop then polls at once).
        self.poll_anchor = 0
        self.extend_ran = False
        self.open: list[_Cohort] = list(self.cohorts)
        self.n_dec = 0.0
        """Requests decoding (in the cohorts with a first token)."""
        self.by_entry: dict[int, list[_Cohort]] = {}
        self.shared: set[int] = set()
        """The entries with two cohorts in the same state, the only decoding cohorts that may
        merge: but for its entry's tokens, a decoding cohort's state no longer changes."""
        self.generated = np.zeros(64)
        """Tokens emitted per request by the cohorts of each entry (``_Cohort.entry``)."""
        self.first_live = 0
        """The first entry whose cohorts have not finished (entries before it are done)."""
        self.entries = 0
        self.measured_from = math.inf
        """When the first measured request was sent (after the warm-up cycles)."""
        self.stand_in_time = 0.0
        self.stand_in_size = 0.0
        """Requests of the round standing in for the rounds not simulated, and their summed
        time in system (:meth:`stand_in_period`)."""
        self.steps: int | None = None
        """Decode-only iterations this rank can be jumped over (``None``: it has a prompt to
        schedule now); for an idle rank, how long until a waiting request may be scheduled
        (:data:`NO_LIMIT` when it has none)."""

    def stand_in_period(self) -> float:
        """Wall time of the rounds the simulation does not run: as many as the benchmark
        measures beyond the simulated ones, each as long as the stand-in round's mean time in
        system (0 when every round is simulated)."""
        if self.stand_in_size == 0.0:
            return 0.0
        extra = max(self.x.rounds - self.x.measured_cycles, 0.0)
        return extra * self.stand_in_time / self.stand_in_size

    def idle(self) -> bool:
        return not self.finished_prefill and self.p_tokens == 0.0 and self.n_dec_now == 0.0

    def plan(self, iteration: int) -> None:
        """Admit and allocate this iteration's batch (the engine's scheduler)."""
        x = self.x
        eng, cap, budget, isl, queries = x.eng, x.cap, x.budget, x.isl, x.queries
        cohorts = self.cohorts
        # Decoding cohorts are admitted and take no part in admission or prefill (``n_dec``).
        open_ = self.open
        n_dec = self.n_dec
        running = n_dec + sum(c.size for c in open_ if c.admitted)
        # Admission: FIFO while the running slots (max_num_seqs, KV pages) allow; split a cohort
        # that only partly fits.
        idx = 0
        while idx < len(open_):
            c = open_[idx]
            idx += 1
            if c.admitted or c.ready_at_iteration > iteration:
                continue
            room = cap - running
            if room < 1.0:
                break
            if c.size > room:
                rest = _Cohort(
                    size=c.size - math.floor(room),
                    arrival=c.arrival,
                    ready_at_iteration=c.ready_at_iteration,
                    cycle=c.cycle,
                )
                c.size = float(math.floor(room))
                cohorts.insert(cohorts.index(c) + 1, rest)
                open_.insert(idx, rest)
                self.dirty = True
            c.admitted = True
            running += c.size
        prefilling = [c for c in open_ if c.admitted]
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
            starts = (
                math.inf
                if soft == math.inf
                else float(prompts_under_prefill_limit(soft, rem, first=p_tokens == 0.0))
            )
            need = c.size * rem
            if need <= left + 1e-9 and c.size <= starts:
                left -= need
                soft -= need
                p_tokens += need
                finished_prefill.append(c)
                continue
            whole = min(float(math.floor(left / rem)) if rem > 0 else 0.0, starts)
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
                open_.insert(open_.index(c), part)
                self.dirty = True
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
        self.running, self.n_dec_now, self.p_tokens = running, n_dec_now, p_tokens
        self.finished_prefill = finished_prefill
        # Decode-only stretch: it can be jumped to the next completion (or arrival becoming
        # schedulable). Waiting cohorts that cannot be admitted (no slot or KV pages) stay
        # waiting until a completion frees room, so they do not stop the jump.
        free = cap - running >= 1.0
        waiting_ready = [c for c in open_ if not c.admitted]
        pending = bool(prefilling) or (
            free and any(c.ready_at_iteration <= iteration for c in waiting_ready)
        )
        self.steps = None
        if not pending:
            soon = [c.ready_at_iteration - iteration for c in waiting_ready] if free else []
            # The decoding cohort furthest along, the first live entry's, finishes first.
            lead = self.generated[self.first_live] if n_dec > 0.0 else 0.0
            ends = [math.ceil((x.osl - lead) / x.per_it - 1e-9)] if n_dec > 0.0 else []
            self.steps = max(min([*ends, *soon]), 1) if ends or soon else NO_LIMIT

    def decode_steps(self, steps: int, dt: float) -> None:
        """``steps`` decode-only iterations of ``dt`` each."""
        self.running_area += steps * dt * self.running
        self.generated[self.first_live : self.entries] += steps * self.x.per_it

    def poll_iteration(self, iteration: int) -> int:
        """The first iteration from ``iteration`` on whose scheduler loop polls for new
        requests: every one without ``--scheduler-recv-interval``; with it, the loop after a
        prompt-carrying iteration and every ``recv_interval`` decode iterations after the last
        poll (``steady_state.recv_batch`` states the SGLang rule)."""
        n = self.x.eng.recv_interval
        if n <= 1 or iteration <= self.poll_anchor:
            return iteration
        return self.poll_anchor + -(-(iteration - self.poll_anchor) // n) * n

    def one_iteration(self, now: float, dt: float) -> None:
        """The planned iteration, ending at ``now``."""
        self.extend_ran = self.p_tokens > 0.0
        self.running_area += dt * self.running
        if self.n_dec_now > 0:
            self.generated[self.first_live : self.entries] += self.x.per_it
        if self.finished_prefill:
            entry = self._new_entry()
            for c in self.finished_prefill:
                c.done_tokens = self.x.isl
                c.first_token = now
                c.entry = entry
                self.n_dec += c.size
            self.by_entry[entry] = list(self.finished_prefill)
            if _has_twins(self.finished_prefill):
                self.shared.add(entry)
            self.open = [c for c in self.open if c.entry < 0]

    def _new_entry(self) -> int:
        """An entry for the cohorts getting their first token now (one token out)."""
        if self.entries == len(self.generated):
            self.generated = np.concatenate([self.generated, np.zeros(len(self.generated))])
        self.generated[self.entries] = 1.0
        self.entries += 1
        return self.entries - 1

    def _finished(self) -> list[_Cohort]:
        """The decoding cohorts that have emitted their output (in FIFO order); their entries
        are retired."""
        done, lo = self.x.osl - 1e-9, self.first_live
        if self.n_dec == 0.0 or self.generated[lo] < done:
            return []
        end = lo + 1
        while end < self.entries and self.generated[end] >= done:
            end += 1
        self.first_live = end
        finished = [c for e in range(lo, end) for c in self.by_entry.pop(e)]
        self.shared.difference_update(range(lo, end))
        return sorted(finished, key=self.cohorts.index)

    def complete(self, now: float, iteration: int) -> None:
        """Completions: record, and the clients send their next requests at once."""
        x = self.x
        osl = x.osl
        cohorts = self.cohorts
        if self.extend_ran:
            self.poll_anchor, self.extend_ran = iteration, False
        # Requests sent now are seen at the next poll (the overlap scheduler's iteration after).
        ready = self.poll_iteration(iteration) + x.delay_its
        for c in self._finished():
            cohorts.remove(c)
            self.n_dec -= c.size
            if c.cycle >= x.warmup_cycles:
                ttft = c.first_token - c.arrival + x.overhead
                e2e = now - c.arrival + x.overhead
                tpot = (now - c.first_token) / max(osl - 1, 1)
                # The last full-load round stands for the rounds not simulated; the final round
                # is the benchmark's tail, where no new requests follow (see SIMULATED_ROUNDS).
                stand_in = x.measured_cycles > 2 and c.cycle == x.total_cycles - 2
                weight = c.size * (max(x.rounds - x.measured_cycles, 0) + 1 if stand_in else 1)
                self.samples.append((ttft, tpot, e2e, weight))
                if stand_in:
                    self.stand_in_time += c.size * (now - c.arrival)
                    self.stand_in_size += c.size
                if c.cycle == x.warmup_cycles:
                    self.measured_from = min(self.measured_from, c.arrival)
            size = c.size if self.to_send >= c.size - 1e-9 else max(self.to_send, 0.0)
            if c.cycle + 1 < x.total_cycles and size > 1e-9:
                self.to_send -= size
                self.dirty = True
                nxt = _Cohort(size=size, arrival=now, ready_at_iteration=ready, cycle=c.cycle + 1)
                cohorts.append(nxt)
                self.open.append(nxt)
        if self.dirty:
            self._merge()
            self.dirty = False

    def _merge(self) -> None:
        """Neighbouring cohorts in the same state (same arrival, progress and cycle) are one
        cohort. Two neighbours in the same state are both without a first token (then they
        are neighbours in ``open`` too) or decoding cohorts of one entry (those of different
        entries got their first tokens at different times: every iteration takes time), so
        only those pairs are compared."""
        cohorts = self.cohorts
        pairs = [(a, b) for a, b in pairwise(self.open) if _same(a, b)]
        for e in self.shared:
            group = sorted(self.by_entry[e], key=cohorts.index)
            pairs += [(a, b) for a, b in pairwise(group) if _same(a, b)]
        # The later of two neighbours joins the earlier (and its run's first).
        gone = {id(b) for a, b in pairs if cohorts[cohorts.index(a) + 1] is b}
        if not gone:
            return
        out: list[_Cohort] = []
        for c in cohorts:
            if id(c) in gone:
                out[-1].size += c.size
            else:
                out.append(c)
        cohorts[:] = out
        self.open = [c for c in self.open if id(c) not in gone]
        for e in list(self.shared):
            self.by_entry[e] = [c for c in self.by_entry[e] if id(c) not in gone]
            if not _has_twins(self.by_entry[e]):
                self.shared.discard(e)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Setup:
    """What every rank of one simulation shares: the engine's limits and the benchmark."""

    eng: EngineProfile
    cap: float
    budget: float
    isl: float
    osl: int
    per_it: float
    queries: float
    delay_its: int
    overhead: float
    warmup_cycles: int
    measured_cycles: int
    total_cycles: int
    rounds: float


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
    return simulate_in_step(
        it, eng, work, [(concurrency, 1)], max_running, warmup_cycles, measured_cycles, rounds,
        max_cohorts,
    )  # fmt: skip


def simulate_in_step(
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    loads: list[tuple[int, int]],
    max_running: float,
    warmup_cycles: int = 0,
    measured_cycles: int = SIMULATED_ROUNDS,
    rounds: float = BENCHMARK_ROUNDS,
    max_cohorts: int | None = MAX_COHORTS,
) -> CohortResult | None:
    """Ranks that step together, ``loads`` = (clients, ranks) per kind of rank (ranks of one
    kind move alike): each rank's scheduler fills its own batch, and every iteration lasts as
    long as the fullest rank's (``adp_lockstep.step_time_s``; a rank with nothing to run takes
    part with the dummy forward). One kind of one rank is a rank on its own (:func:`simulate`).
    Per-rank figures in the result are averages over the ranks (a rank without clients counts
    with none); the samples are weighted by the ranks they stand for."""
    measured_cycles = max(1, min(measured_cycles, int(np.ceil(rounds - 1e-9))))
    ranks_total = sum(count for _, count in loads)
    active = [(load, count) for load, count in loads if load >= 1 and count >= 1]
    if not active:
        return None
    biggest = max(load for load, _ in active)
    cap = max(float(min(max_running, eng.max_num_seqs)), 1.0)
    budget = float(eng.max_num_batched_tokens)
    clock = _Clock(it, work, min(cap, float(biggest)) + 1, budget)
    setup = _Setup(
        eng=eng,
        cap=cap,
        budget=budget,
        isl=work.input_len * (1.0 - work.prefix_hit),
        osl=max(round(work.output_len), 1),
        # Tokens a decode iteration emits per request and budget tokens it takes (1 and 1, or
        # the expected accepted length and k + 1 under speculative decoding).
        per_it=it.tokens_per_iteration,
        queries=it.queries,
        delay_its=successor_delay_iterations(eng),
        overhead=eng.request_overhead_ms * 1e-3,
        warmup_cycles=warmup_cycles,
        measured_cycles=measured_cycles,
        total_cycles=warmup_cycles + measured_cycles,
        rounds=rounds,
    )
    rank_list = [_Rank(load, setup) for load, _ in active]
    idle_ranks = ranks_total > sum(count for _, count in active)
    dummy = clock(float(DUMMY_DECODE_TOKENS), 0.0)
    now = 0.0
    iteration = 0
    busy_time = 0.0
    iters = 0
    decode_time = 0.0
    decode_iters = 0
    guard = 0
    while any(r.cohorts for r in rank_list):
        guard += 1
        if guard > 200_000 or (
            max_cohorts is not None and any(len(r.cohorts) > max_cohorts for r in rank_list)
        ):
            return None
        for r in rank_list:
            r.plan(iteration)
        if all(r.idle() for r in rank_list):
            # Nothing runnable (requests not yet visible to the scheduler): idle one iteration.
            iteration += 1
            now += clock(0.0, 0.0)
            continue
        # A rank with nothing of its own runs the dummy (so does a rank without clients).
        times: list[float | None] = [None if r.idle() else clock(r.n_dec_now, r.p_tokens)
                                     for r in rank_list]  # fmt: skip
        if idle_ranks:
            times.append(None)
        if all(r.steps is not None for r in rank_list):
            # Decode-only (or idle) on every rank: jump to the first completion or arrival.
            steps = min(r.steps for r in rank_list if r.steps is not None)
            dt = step_time_s(times, dummy)
            now += steps * dt
            iteration += steps
            iters += steps
            busy_time += steps * dt
            decode_time += steps * dt
            decode_iters += steps
            for r in rank_list:
                r.decode_steps(steps, dt)
        else:
            dt = step_time_s(times, dummy)
            now += dt
            iteration += 1
            iters += 1
            busy_time += dt
            if all(r.p_tokens == 0.0 for r in rank_list):
                decode_time += dt
                decode_iters += 1
            for r in rank_list:
                r.one_iteration(now, dt)
        for r in rank_list:
            r.complete(now, iteration)
    parts = [(np.array(r.samples), r.load, count)
             for r, (_, count) in zip(rank_list, active, strict=True)]  # fmt: skip
    if any(arr.size == 0 for arr, _, _ in parts):
        return None
    # The rounds not simulated each last as long as the one standing in for them: a client
    # sends its next request when the last one completes, so a round's length is its time in
    # system (before the client-side overhead the samples add).
    # Each of a client's requests also spends the engine's per-request overhead outside the
    # iterations (``request_overhead_ms``, in every sample's latency).
    duration = (
        now
        - min(r.measured_from for r in rank_list)
        + sum(r.stand_in_period() for r in rank_list) / len(rank_list)
        + setup.overhead * max(setup.rounds, float(measured_cycles))
    )
    throughput = sum(float(arr[:, 3].sum()) * count for arr, _, count in parts) / duration
    running = sum(r.running_area * count for r, (_, count) in zip(rank_list, active, strict=True))
    one = len(parts) == 1 and parts[0][2] == 1
    return CohortResult(
        ttft_s=np.concatenate([arr[:, 0] for arr, _, _ in parts]),
        tpot_s=np.concatenate([arr[:, 1] for arr, _, _ in parts]),
        e2e_s=np.concatenate([arr[:, 2] for arr, _, _ in parts]),
        weight=np.concatenate([arr[:, 3] * (1 if one else count) for arr, _, count in parts]),
        requests_per_s=throughput / ranks_total,
        duration_s=duration,
        mean_running=running / max(busy_time, 1e-12) / ranks_total,
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
    ``floor(C / ranks)`` of them or one more, the ranks with one more spread over the replicas
    as evenly. Ranks apart (replicas, a dense model's DP ranks) are simulated once per kind and
    weighted by how many ranks each stands for; the attention-DP ranks of one MoE engine step
    together (``adp_lockstep.in_step``), so each kind of engine is simulated with its ranks in
    step (:func:`simulate_in_step`). Per-rank figures in the result are averages over all ranks
    (an idle rank counts with no requests), so ``requests_per_s * ranks`` is the total.
    ``burst_only``: only the benchmark's first round, the burst of ``concurrency`` requests on a
    drained engine (one measured round, no successors); else ``rounds`` measured rounds (each
    rank holds its share of the requests and of the concurrency: the same rounds)."""
    lo, extra = divmod(int(concurrency), int(ranks))
    group = it.par.attention_dp if in_step(it) and ranks % it.par.attention_dp == 0 else 1
    engines = ranks // group
    # Engines by how many of their ranks hold one more client: extra // engines or one more.
    each, more = divmod(extra, engines)
    kinds = [(each, engines - more), (each + 1, more)]
    # ``burst_only``: one round, at most ``load`` cohorts, finite; no cohort limit (MAX_COHORTS).
    cycles, length = (1, 1.0) if burst_only else (SIMULATED_ROUNDS, rounds)
    limit = None if burst_only else MAX_COHORTS
    parts: list[tuple[CohortResult, int]] = []
    for plus, count in kinds:
        if count == 0 or (lo == 0 and plus == 0):
            continue
        loads = [(load, n) for load, n in ((lo, group - plus), (lo + 1, plus)) if n > 0]
        sim = simulate_in_step(
            it, eng, work, loads, max_running, measured_cycles=cycles, rounds=length,
            max_cohorts=limit,
        )  # fmt: skip
        if sim is None:
            return None
        parts.append((sim, count * group))
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
        # Engines apart run side by side: the benchmark ends with the last of them.
        requests_per_s=sum(p.requests_per_s * p.duration_s * count for p, count in parts)
        / max(p.duration_s for p, _ in parts)
        / ranks,
        duration_s=max(p.duration_s for p, _ in parts),
        mean_running=sum(p.mean_running * count for p, count in parts) / ranks,
        mean_iteration_s=sum(p.mean_iteration_s * count for p, count in parts) / active,
        mean_decode_iteration_s=sum(p.mean_decode_iteration_s * c for p, c in parts) / active,
    )


def _has_twins(group: list[_Cohort]) -> bool:
    """Whether two of ``group`` are in the same state."""
    return len(group) > 1 and any(_same(a, b) for i, a in enumerate(group) for b in group[i + 1 :])


def _same(a: _Cohort, b: _Cohort) -> bool:
    """Whether two cohorts are in the same state (all but their size): of one entry, they have
    emitted the same tokens."""
    return (
        a.admitted == b.admitted
        and a.arrival == b.arrival
        and a.done_tokens == b.done_tokens
        and a.entry == b.entry
        and a.first_token == b.first_token
        and a.cycle == b.cycle
        and a.ready_at_iteration == b.ready_at_iteration
    )


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """One quantile by :func:`steady_state.weighted_quantiles` (the rule every reported
    percentile uses)."""
    return float(weighted_quantiles(values, weights, np.array([q]))[0])
