"""A closed-loop client against a disaggregated deployment, request by request: the prefill
workers' iterations, the decode workers' slots, and each request's own lengths.

Why a simulation and not the steady state plus a one-time burst. A closed-loop benchmark
(sa-bench, the client of InferenceX's disaggregated runs: ``--max-concurrency C --num-prompts
5C`` after a separate warm-up, lengths uniform over [0.8 L, L]; srt-slurm
``src/srtctl/benchmarks/scripts/sa-bench/bench.sh``) starts with ``C`` prompts at once on a
drained deployment. With every request of one length, the sub-cohorts the prefill workers
split that burst into come back together, spaced by the time it took to prefill them, and each
is one iteration again every round (as many prompts as the budget took, not the near-empty
iteration of a steady stream). With lengths that vary, each request comes back after its own
decode time, so the cohort's returns overtake each other and re-bunch: every later round
reaches the prefill workers as a wave at about their capacity, not as a steady stream, and
queues again. Neither the steady state (a stream at the mean rate) nor a one-time burst prices
either; following the requests does, with the deployment's own iteration times and nothing
fitted (the closed-loop simulation the aggregated fixed-length rows already use,
``cohort_sim``, for this stage).

What is followed, per request: its arrival (the client's previous request on that slot ends),
the wait for and the prefill iteration that takes it (prompts dealt round the attention-DP
ranks in turn up to the per-rank token budget and prompt cap: on an iteration that starts empty
TensorRT-LLM's ``_schedule_attention_dp_requests`` balance, a heap on each rank's load, gives
every rank its turn; an iteration lasts as long as its fullest rank, every rank stepping
together), the KV hand-off and decode admission (``admission_s``, from the
steady state), a wait for a free decode slot when all are held, and its decode, ``(OSL - 1) x
TPOT``. Where the decode worker takes a request slot before the prefill (SGLang's
pre-allocation, ``arrival_slots``), the request first waits for one of those, held from its
arrival to its decode's end. Lengths are the client's distribution in whole tokens at
deterministic, evenly spread quantiles (golden-ratio sequence), so a prediction is reproducible.

Fixed lengths are the same simulation, its limit as the spread goes to zero: the requests of a
sub-cohort end their decode at the same instant and come back together, as the aggregated
fixed-length reading (``cohort_sim``) moves them (a burst of ``C`` on a drained deployment,
split by the token budget, cohorts that return together). Whole-token lengths make the limit
exact: below half a token of spread every request has the mean's length.

Cost. A long run is not followed to its end: the burst, enough full-load rounds for the loop
to settle, and the final round (the tail, whose requests have no successors) are followed, and
the last half of the full-load rounds stands for the rounds not followed (the rule of
``cohort_sim.SIMULATED_ROUNDS``): exact for a pattern that repeats every round (fixed lengths,
where the decode slots do not bind), and a cost that does not grow with the run
(:func:`simulated_requests`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import numpy as np

GOLDEN = (5.0**0.5 - 1.0) / 2.0
"""Additive recurrence ``frac(i x g)`` with ``g`` the golden ratio's fraction: the evenly
spread quantile sequence (Kuipers & Niederreiter, Uniform Distribution of Sequences, Ch. 1)."""
SILVER = 2.0**0.5 - 1.0
"""A second irrational step, for the output lengths, so they do not follow the prompts'."""

SETTLE_ROUNDS = 24
"""Rounds followed of a longer run: the burst, 22 full-load rounds, the tail. The re-bunched
waves of a loaded prefill stage decay over about ten rounds (DeepSeek-R1 1k/1k on H200, one
attention-DP 8 context worker, C = 576, CV 0.0645: round means 3,861, 444, 378, 345, 272, 264
ms, ..., 221 at round 10, 216-224 after; ``benchmarks/disagg_loop_cost.py``), so the last
half of the full-load rounds (12-22) stands for the rest. Fixed lengths with a decode slot for
each client and one prefill worker repeat every round after the burst (the sub-cohorts the token
budget split it into return together and meet the same iterations): there the stand-in is
exact. Where the decode slots bind, fixed lengths cycle over ``slots / gcd(C, slots)`` rounds
(7 clients, 2 slots: two rounds, their means 5% apart), and several prefill workers that a
short decode keeps busy deal the returning cohorts differently from round to round: the
eleven stand-in rounds average such cycles (tests/unit/test_serving_disagg_closed_loop.py)."""
WINDOW_REQUESTS = 2048
"""Fewest requests in the stand-in half: with few clients a round is a few requests, too few to
stand for the length distribution, so more rounds are followed."""

ROUTINGS = ("least-loaded", "round-robin", "random")
"""How requests reach the decode workers: to one with a free slot (``least-loaded``: a pooled
queue), in turn (``round-robin``: Dynamo's frontend default, ``--router-mode round-robin``), or
at random (``random``: several frontends behind a load balancer, each with its own turn)."""
REPLICA_REQUESTS = 2048
"""Fewest requests followed over the deals of a random routing (several runs, their mean)."""
MOST_REPLICAS = 16
"""Most runs of a random routing."""

MOST_FOLLOWED = 200_000
"""Most requests followed where :data:`SETTLE_ROUNDS` rounds of the clients would be more (a
closed loop of over 8,333 clients): fewer rounds then, three at least (the burst, one
full-load round, the tail). Each request costs some microseconds of the event loop: 24
rounds of 50,000 clients took 7 s. With this many clients the run is queue-bound from the
burst on, so the rounds past the first full-load one change little."""


@cache
def _normal_quantiles() -> tuple[np.ndarray, np.ndarray]:
    """The standard normal quantile function on a 4,097-point table, for interpolation."""
    table_u = np.linspace(1e-6, 1.0 - 1e-6, 4097)
    dist = NormalDist()
    return table_u, np.array([dist.inv_cdf(float(v)) for v in table_u])


def simulated_requests(concurrency: int, num_requests: int) -> int:
    """Requests :func:`simulate` follows for a benchmark of ``num_requests``: all of them when
    the run is short, else :data:`SETTLE_ROUNDS` whole rounds of ``concurrency`` (more with
    few clients, for :data:`WINDOW_REQUESTS` in the stand-in half; fewer with very many, for at
    most :data:`MOST_FOLLOWED`). The bound does not grow with ``num_requests``."""
    conc = max(int(concurrency), 1)
    rounds = max(SETTLE_ROUNDS, 2 * -(-WINDOW_REQUESTS // conc) + 2)
    rounds = max(min(rounds, MOST_FOLLOWED // conc), 3)
    return max(min(int(num_requests), rounds * conc), 1)


def client_lengths(mean: float, cv: float, count: int, step: float, burst: int = 0) -> np.ndarray:
    """``count`` lengths of the client's distribution (lognormal of mean ``mean`` and
    coefficient of variation ``cv``, as ``steady_state.Workload`` reads a client) in whole
    tokens, at least one (a client sends token counts: sa-bench's random dataset draws
    integers), at the quantiles ``frac((i + 1/2) x step)``. The first ``burst`` (the requests
    sent at once) are put at the evenly spread quantiles ``(j + 1/2) / burst`` in the order of
    the sequence, so that the first round stands for the distribution however few its requests
    (one: the median), not for the sequence's first terms (the 31st percentile first)."""
    u = np.mod((np.arange(count) + 0.5) * step, 1.0)
    head = min(max(int(burst), 0), count)
    if head:
        order = np.argsort(np.argsort(u[:head], kind="stable"), kind="stable")
        u[:head] = (order + 0.5) / head
    if cv <= 0.0:
        return np.full(count, max(float(np.rint(mean)), 1.0))
    table_u, table_z = _normal_quantiles()
    z = np.interp(u, table_u, table_z)
    s2 = float(np.log1p(cv * cv))
    # lognormal_factor(cv, z), vectorized: exp(-s^2/2 + s z), to whole tokens
    return np.maximum(np.rint(mean * np.exp(-s2 / 2.0 + np.sqrt(s2) * z)), 1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClosedLoopTTFT:
    """Per followed request (seconds): TTFT and its parts, and how many measured requests each
    stands for (``weight``: one, more in the stand-in rounds of a long run; the weights add up
    to the measured count)."""

    ttft_s: np.ndarray
    prefill_s: np.ndarray
    """Arrival to the end of its prefill iteration (the wait for it included), less the wait
    for a decode worker's request slot where it takes one before its prefill
    (``arrival_slots``)."""
    slot_wait_s: np.ndarray
    """Wait for decode slots: a running slot after the hand-off, and a request slot before the
    prefill where it takes one at arrival. TTFT is the prefill part, the admission and this
    wait."""
    weight: np.ndarray
    runs: int = 1
    """Runs followed (several deals of a random routing), their requests one after another."""

    @property
    def requests(self) -> float:
        return float(np.sum(self.weight))

    @property
    def mean_ttft_s(self) -> float:
        return float(np.average(self.ttft_s, weights=self.weight))

    @property
    def mean_prefill_s(self) -> float:
        return float(np.average(self.prefill_s, weights=self.weight))

    @property
    def mean_slot_wait_s(self) -> float:
        return float(np.average(self.slot_wait_s, weights=self.weight))


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillStage:
    """The prefill workers as the scheduler sees them."""

    workers: int
    ranks: int
    """Attention-DP ranks per worker (1 without attention DP)."""
    rank_tokens: float
    """Prompt tokens one rank takes into one iteration (its token budget)."""
    rank_prompts: int
    """Prompts one rank takes into one iteration (its batch cap)."""
    prompt_limit: float = float("inf")
    """SGLang's ``--max-prefill-tokens`` (``EngineProfile.max_prefill_tokens``; ``inf``
    without one): a rank's later prompt joins the iteration only while its tokens and the
    rank's earlier ones stay below it (``steady_state.prompts_under_prefill_limit``)."""
    chunked: bool = False
    """Chunked prefill (``EngineProfile.chunked_prefill``): a prompt longer than what is left of
    its rank's budget takes what is left and carries the rest into the next iteration
    (``steady_state._chunk_tokens``'s rule; SGLang v0.5.9 ``managers/schedule_policy.py``
    ``PrefillAdder.add_one_req`` truncates it to ``rem_chunk_tokens``, ``add_chunked_req``
    puts the rest first into the next batch). Without it a rank's first prompt runs whole."""
    iteration_s: Callable[[float], float]
    """Seconds of an iteration whose fullest rank carries this many prompt tokens."""
    done_after_s: float = 0.0
    """From the iteration's end to the prompt's first token leaving the worker (the request's
    own work)."""
    overlap: bool = False
    """An overlap scheduler returns an iteration's tokens after the next iteration: one more
    iteration's time before the first token leaves (``prefill_curve``'s ``delay``)."""
    on_iteration: Callable[[list[float]], None] | None = None
    """Called with each iteration's prompt tokens per rank (diagnostics,
    ``benchmarks/adp_prefill_ranks.py``); None in predictions."""


def simulate(
    *,
    concurrency: int,
    input_lens: np.ndarray,
    output_lens: np.ndarray,
    prefill: PrefillStage,
    admission_s: float,
    decode_slots: float,
    tpot_s: float,
    num_requests: int | None = None,
    ready_after_s: float = 0.0,
    decode_workers: int = 1,
    routing: str = "least-loaded",
    arrival_slots: float = math.inf,
) -> ClosedLoopTTFT:
    """Follow ``len(input_lens)`` requests of a closed loop of ``concurrency`` clients, all
    sent at once at time 0 on a drained deployment, each client sending its next request
    when its previous one ends, through ``prefill`` and ``decode_slots`` decode slots held
    ``(OSL - 1) x tpot_s`` each after ``admission_s``. ``num_requests``: the benchmark's
    measured count when more than are followed (``None``: as many); the followed requests are
    then whole rounds (the burst, full-load rounds, the tail) and the last half of the
    full-load rounds stands for the requests not followed (:func:`_weights`).
    ``ready_after_s``: how long after it is sent a request of a later round (not the burst)
    becomes ready for the prefill workers (a wait ahead of them, inside its TTFT).

    Iteration by iteration: the waiting prompts, first come first served, go round the ranks
    (one each in turn, the balance of an empty iteration) while each rank has room for the next
    under its prompt cap, token budget and ``prompt_limit`` (a rank's first
    prompt always fits: whole, or under chunked prefill a budget-sized chunk whose rest stays
    on that worker and leads its next iteration; a later one is chunked into what is left of
    the budget); the first prompt with no room ends the intake. The iteration lasts as long as
    its fullest rank, and a run of iterations that repeat it exactly (every rank full with a
    held prompt that still needs a whole budget) is priced at once. Iterations are followed in
    the order they start (the earliest free worker next); a finished prompt takes the earliest free decode
    slot (with several prefill workers two iterations' prompts can reach the slots out of
    time order: less than one iteration, and only while every slot is held); a request beyond
    the free slots waits for the earliest one its predecessors free.

    ``decode_workers`` and ``routing`` (:data:`ROUTINGS`): the slots are ``decode_workers``
    workers' and the router sends a finished prompt to one of them: to any free slot
    (``least-loaded``, one pool), to each worker in turn in the order prompts finish
    (``round-robin``), or to one at random (``random``); then it waits for a slot of that
    worker even while another has one free. A random routing is followed over several deals
    (seeded: the same answer every call) and their mean taken.

    ``arrival_slots``: request slots of the decode workers (all together, as ``decode_slots``)
    that a request takes when it is sent, before its prefill, and holds to the end of its
    decode, beside the running slot it takes after the hand-off; one sent while every request
    slot of its worker is held reaches the prefill workers only when an earlier request's
    decode ends (first come, first served, in time order), and its worker is chosen as it is
    sent. SGLang's disaggregated decode worker pre-allocates a request's slot and prompt KV
    before its prefill may start (``EngineProfile.arrival_slots``). ``inf``: none (the
    slot is taken after the hand-off only)."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r}: one of {', '.join(ROUTINGS)}")
    workers = max(int(decode_workers), 1)
    # Either kind of slot that binds makes the router's deal matter.
    binds = any(
        bool(np.isfinite(held / workers) and held / workers < concurrency)
        for held in (decode_slots, arrival_slots)
    )
    if routing == "least-loaded" or workers == 1 or not binds:
        runs: list[np.random.Generator | None] = [None]
    else:
        # A random deal is a sample, not the expectation: the mean of several deals (at
        # least REPLICA_REQUESTS requests in all) stands for it; round robin is one deal.
        reps = max(1, min(MOST_REPLICAS, math.ceil(REPLICA_REQUESTS / max(len(input_lens), 1))))
        runs = [np.random.default_rng(seed) for seed in range(reps if routing == "random" else 1)]
    run = _Run(
        concurrency=concurrency, input_lens=input_lens, output_lens=output_lens,
        prefill=prefill, admission_s=admission_s, decode_slots=decode_slots, tpot_s=tpot_s,
        ready_after_s=ready_after_s, decode_workers=workers, arrival_slots=arrival_slots,
    )  # fmt: skip
    parts = [_follow(run, routing if rng is not None else "least-loaded", rng) for rng in runs]
    weight = _weights(
        len(input_lens), max(min(int(concurrency), len(input_lens)), 1),
        len(input_lens) if num_requests is None else int(num_requests),
    )  # fmt: skip
    return ClosedLoopTTFT(
        ttft_s=np.concatenate([p[0] for p in parts]),
        prefill_s=np.concatenate([p[1] for p in parts]),
        slot_wait_s=np.concatenate([p[2] for p in parts]),
        weight=np.tile(weight / len(parts), len(parts)),
        runs=len(parts),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    """What one run of :func:`simulate` follows (its arguments, every deal the same)."""

    concurrency: int
    input_lens: np.ndarray
    output_lens: np.ndarray
    prefill: PrefillStage
    admission_s: float
    decode_slots: float
    tpot_s: float
    ready_after_s: float
    decode_workers: int
    arrival_slots: float = math.inf


def _follow(
    run: _Run, routing: str, rng: np.random.Generator | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One run of :func:`simulate`: TTFT, prefill part and decode-slot wait per request."""
    input_lens, output_lens, prefill = run.input_lens, run.output_lens, run.prefill
    admission_s, decode_slots, tpot_s = run.admission_s, run.decode_slots, run.tpot_s
    ready_after_s, decode_workers, concurrency = (
        run.ready_after_s, run.decode_workers, run.concurrency,
    )  # fmt: skip
    n = len(input_lens)
    ins = np.maximum(np.asarray(input_lens, dtype=float), 1.0).tolist()
    decode_time = (np.maximum(np.asarray(output_lens, dtype=float) - 1.0, 0.0) * tpot_s).tolist()
    conc = max(min(int(concurrency), n), 1)
    ranks = max(int(prefill.ranks), 1)
    cap = max(int(prefill.rank_prompts), 1)
    budget = float(prefill.rank_tokens)
    limit = float(prefill.prompt_limit)
    chunked = bool(prefill.chunked)
    left = list(ins)  # prompt tokens each request has still to prefill
    most = ranks * cap
    waiting: list[tuple[float, int]] = [(0.0, i) for i in range(conc)]  # a heap: (arrival, id)
    sent = conc
    free = [0.0] * max(int(prefill.workers), 1)
    pooled = routing == "least-loaded"
    # The decode slots: one pool (a router that sends a request to a worker with a free slot)
    # or each worker's own (a router blind to the workers' load: the request waits on the
    # worker it was sent to while another may have a free slot).
    per = decode_slots if pooled else decode_slots / decode_workers
    binding = bool(np.isfinite(per) and per < conc)
    pools = 1 if pooled else decode_workers
    slots: list[list[float]] = [[0.0] * max(int(per), 1) if binding else [] for _ in range(pools)]
    dealt = 0
    # A random router's deal, one worker per finished prompt in the order they finish, drawn
    # at once for the run (a draw per request cost seconds at C >= 8000).
    deal = None
    if routing == "random" and rng is not None:
        deal = rng.integers(decode_workers, size=n)
    arrival = [0.0] * n
    ttft = [0.0] * n
    pre = [0.0] * n
    wait = [0.0] * n
    pop, push = heapq.heappop, heapq.heappush

    def next_pool() -> int:
        """The decode worker (slot pool) the router picks for the next request it routes."""
        nonlocal dealt
        dealt += 1
        if pooled:
            return 0
        if routing == "round-robin":
            return (dealt - 1) % decode_workers
        assert deal is not None
        return int(deal[dealt - 1])

    # Request slots taken at arrival (SGLang's pre-allocation), where they bind: per pool how
    # many are free, the requests sent while all were held ((ready, id), a heap), and the
    # events that move them, in time order before each iteration that starts after them: a
    # decode's end (0) frees its request slot and sends the client's next request (1).
    per_early = run.arrival_slots if pooled else run.arrival_slots / decode_workers
    early = bool(np.isfinite(per_early) and per_early < conc)
    open_slots = [max(int(per_early), 1) if early else 0 for _ in range(pools)]
    pending: list[list[tuple[float, int]]] = [[] for _ in range(pools)]
    events: list[tuple[float, int, int]] = []
    pool_of = [0] * n

    def enter(i: int, ready_at: float) -> None:
        """Request ``i``, sent and ready for the prefill workers at ``ready_at``, takes a free
        request slot of the worker the router picks, or waits for one. Every event up to
        ``ready_at`` is processed before it, so a free slot is free by then."""
        k = next_pool()
        pool_of[i] = k
        if open_slots[k]:
            open_slots[k] -= 1
            push(waiting, (ready_at, i))
        else:
            push(pending[k], (ready_at, i))

    if early:
        waiting = []
        for i in range(conc):
            enter(i, 0.0)
    # A prompt whose prefill goes on (chunked) stays on the worker that started it and leads
    # its next iteration (SGLang's chunked_req), ready as soon as that worker is free.
    held: list[list[tuple[float, int]]] = [[] for _ in free]
    while waiting or any(held) or events:
        head = waiting[0][0] if waiting else math.inf
        w = min(range(len(free)), key=lambda k: free[k] if held[k] else max(free[k], head))
        start = free[w] if held[w] else max(free[w], head)
        if events and events[0][0] <= start:
            t, kind, i = pop(events)
            if kind == 0:
                k = pool_of[i]
                if pending[k]:
                    ready_at, j = pop(pending[k])
                    wait[j] = t - ready_at
                    push(waiting, (t, j))
                else:
                    open_slots[k] += 1
                if sent < n:
                    arrival[sent] = t
                    push(events, (t + ready_after_s, 1, sent))
                    sent += 1
            else:
                enter(i, t)
            continue
        load = [0.0] * ranks
        taken: list[int] = []
        carried: list[tuple[float, int]] = []
        ahead = held[w]
        held[w] = []
        while (ahead or (waiting and waiting[0][0] <= start)) and len(taken) < most:
            i = ahead[0][1] if ahead else waiting[0][1]
            r = len(taken) % ranks
            need = left[i]
            # SGLang's PrefillAdder.add_one_req refuses a prompt that reaches what is left of
            # --max-prefill-tokens unless the batch is empty (prompts_under_prefill_limit);
            # under chunked prefill it truncates one that passes the budget's rest instead.
            room = budget - load[r]
            too_big = room <= 0.0 if chunked else load[r] + need > budget
            if len(taken) >= ranks and (too_big or load[r] + need >= limit):
                break
            item = ahead.pop(0) if ahead else pop(waiting)
            part = min(need, budget if len(taken) < ranks else room) if chunked else need
            load[r] += part
            left[i] = need - part
            taken.append(i)
            if left[i] > 0.0:
                carried.append(item)
        held[w] = carried
        if prefill.on_iteration is not None:
            prefill.on_iteration(load)
        span = prefill.iteration_s(max(load))
        end = start + span
        busy = span  # the worker's time to its next iteration
        # Every rank full with a held prompt that still needs a whole budget or more: the
        # iterations until one of them is down to its last chunk are this one again (no room
        # for another prompt, the same tokens per rank), so they are taken at once; a prompt
        # longer than the budget many times over (a 1-token budget) was thousands of them.
        if chunked and len(carried) == ranks and all(tokens == budget for tokens in load):
            repeat = min(math.ceil(left[i] / budget) for _, i in carried) - 1
            if repeat > 0:
                for _, i in carried:
                    left[i] -= repeat * budget
                busy += repeat * span
                if prefill.on_iteration is not None:
                    for _ in range(repeat):
                        prefill.on_iteration(load)
        free[w] = start + busy
        done = end + prefill.done_after_s + (span if prefill.overlap else 0.0)
        ready = done + admission_s
        for i in taken:
            if left[i] > 0.0:
                continue  # its prefill goes on in a later iteration
            pool = slots[pool_of[i] if early else next_pool()]
            admit = max(ready, pop(pool)) if binding else ready
            finish = admit + decode_time[i]
            if binding:
                push(pool, finish)
            if early:
                # Its request slot, held since it was sent, frees at its decode's end.
                pre[i] = done - arrival[i] - wait[i]
                wait[i] += admit - ready
                ttft[i] = admit - arrival[i]
                push(events, (finish, 0, i))
                continue
            pre[i] = done - arrival[i]
            wait[i] = admit - ready
            ttft[i] = admit - arrival[i]
            if sent < n:
                arrival[sent] = finish
                push(waiting, (finish + ready_after_s, sent))
                sent += 1
    return np.array(ttft), np.array(pre), np.array(wait)


def _weights(followed: int, concurrency: int, measured: int) -> np.ndarray:
    """How many measured requests each followed one stands for: one each, and the ``measured -
    followed`` not followed spread evenly over the last half of the full-load rounds (rounds 1
    to ``R - 2`` of the ``R`` followed, sent in order; round ``R - 1`` is the tail). With a
    pattern that repeats every round this is the whole run's mean exactly."""
    weight = np.ones(followed)
    rest = measured - followed
    if rest <= 0:
        return weight
    rounds = followed // concurrency
    if rounds < 3 or rounds * concurrency != followed:
        raise ValueError(
            f"a run longer than the requests followed needs whole rounds, one full-load round "
            f"at least ({followed} requests of {concurrency} clients)"
        )
    full = rounds - 2
    lo = (rounds - 1 - (full + 1) // 2) * concurrency
    hi = (rounds - 1) * concurrency
    weight[lo:hi] += rest / (hi - lo)
    return weight
