"""Steady state of a continuously batching engine (one attention rank), vectorized over load.

The engine runs iterations back to back (Orca, Yu et al. OSDI'22); each one decodes one token
for every running request and spends the rest of its token budget on prompt chunks (Sarathi,
Agrawal et al. 2024, arXiv:2403.02310). At a throughput of ``x`` requests/s, Little's law
(Little 1961) fixes the iteration's composition: ``n = x * (OSL-1) * T`` requests are decoding
and ``x * T * ISL`` prompt tokens are prefilled per iteration of length ``T``, and ``T`` is the
fixed point ``T = iteration_time(n(T), prefill(T))`` (solved by iteration on a grid of ``x``).
A load point is feasible while the fixed point exists, the running requests fit under
``max_num_seqs`` and in the KV pages, and the prompt tokens fit the budget. A closed-loop client
(``C`` in flight) settles where ``x * e2e(x) = C``; past the capacity the surplus waits in the
queue, and that wait is part of TTFT. The capacity is resolved between grid points where a
client reaches it (:func:`resolve_capacity`), not read off the grid's last feasible point.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Literal

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.serving.iteration import IterationModel
from gpuscale.planner.serving.adp_lockstep import lockstep_mix

GRID = 96
Z = {50: 0.0, 90: 1.2816, 99: 2.3263}
CAPACITY_REFINE = 511
"""Points per round that resolve a capacity between two neighbouring grid loads: two rounds
narrow a 20% grid step to below :data:`CAPACITY_TOL` (the cost of a round is mostly per call,
not per point)."""
CAPACITY_TOL = 1e-6
"""Relative width to which a capacity is resolved. A closed loop's requests in flight exceed
its running requests by at least half an iteration's arrivals, a share ``0.5 / (OSL-1)`` of
them (the wait for the iteration in flight, :func:`load_curve`), so a capacity resolved this
finely never reads a client of ``C`` <= the running cap as saturated for outputs up to ~5e5
tokens."""
CAPACITY_ROUNDS = 8
"""At most this many refinement rounds."""


def refine_edge(
    grid: np.ndarray, ok: np.ndarray, feasible: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """Loads to add to the increasing ``grid`` so that its last feasible point lies within
    :data:`CAPACITY_TOL` of the feasibility edge (the capacity, or where any condition that
    ``feasible`` adds ends: the SLO search's p99 targets).

    The edge lies between the last feasible grid point and the next (a 15% step on the
    geometric grids of this module); a client at or past the capacity runs at it, so the step
    would show as a false queue or a jump of tens of percent in TTFT. Each round evaluates
    ``feasible`` on :data:`CAPACITY_REFINE` evenly spaced loads of the bracketing interval (the
    interval's ends included as the first and last of the points it is given, so a rule that
    compares a point with the one before sees its true neighbour) and keeps the sub-interval
    where feasibility ends. One rule for every steady state (aggregated engines here,
    disaggregated deployments in ``deployment.py``)."""
    hits = np.flatnonzero(ok)
    if not hits.size or hits[-1] + 1 >= grid.size:
        return np.empty(0)
    lo, hi = float(grid[hits[-1]]), float(grid[hits[-1] + 1])
    added: list[np.ndarray] = []
    for _ in range(CAPACITY_ROUNDS):
        if hi - lo <= CAPACITY_TOL * hi:
            break
        pts = np.linspace(lo, hi, CAPACITY_REFINE + 2)
        inner_ok = np.asarray(feasible(pts), dtype=bool)[1:-1]
        inner = pts[1:-1]
        added.append(inner)
        last = np.flatnonzero(inner_ok)
        if not last.size:
            hi = float(inner[0])
        else:
            k = int(last[-1])
            lo = float(inner[k])
            hi = float(inner[k + 1]) if k + 1 < inner.size else hi
    return np.concatenate(added) if added else np.empty(0)


@dataclass(frozen=True, slots=True, kw_only=True)
class Workload:
    input_len: float
    output_len: float
    prefix_hit: float = 0.0
    """Share of each prompt found in the prefix cache (not recomputed)."""
    input_cv: float = 0.0
    """Coefficient of variation of the prompt length (lognormal); 0 = fixed lengths."""
    output_cv: float = 0.0
    """Coefficient of variation of the output length (lognormal); 0 = fixed lengths."""

    @property
    def fixed(self) -> bool:
        return self.input_cv == 0.0 and self.output_cv == 0.0


def lognormal_factor(cv: float, z: float) -> float:
    """Quantile of a lognormal length relative to its mean: ``exp(-s^2/2 + s z)`` with
    ``s^2 = ln(1 + cv^2)``."""
    if cv <= 0:
        return 1.0
    s2 = float(np.log1p(cv * cv))
    return float(np.exp(-s2 / 2.0 + np.sqrt(s2) * z))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadCurve:
    """Per-rank steady state at each throughput ``x`` (requests/s) of the grid."""

    x: np.ndarray
    decoding: np.ndarray
    """Requests decoding (the curve's parameter ``n``)."""
    iteration_s: np.ndarray
    decode_only_s: np.ndarray
    own_prefill_s: np.ndarray
    prefill_iterations: np.ndarray
    running: np.ndarray
    kv_tokens_used: np.ndarray
    feasible: np.ndarray
    ttft_s: np.ndarray
    """Without client queueing: delay to the next iteration + prefill iterations + request work."""
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    tokens_per_iteration: float = 1.0
    """Output tokens one iteration emits per decoding request (speculative decoding: the
    expected accepted length, ``IterationModel.tokens_per_iteration``; else 1)."""
    over: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int8))
    """At each load, the limits it passes: bit ``k`` for ``CAPACITY_LIMITS[k]``
    (:func:`capacity_limit`)."""


CAPACITY_LIMITS = ("running_slots", "kv_cache", "token_budget", "throughput_peak")
"""What ends a load curve's feasible loads (:func:`load_curve`): the running requests reach
the engine's running cap (``max_num_seqs``) or the requests the KV pool holds, whichever is
smaller; the prompts fill the token budget beside the decodes (the prefill throughput); or
the throughput peaks (more running requests buy none)."""


def limits_at(curve: LoadCurve, i: int) -> list[str]:
    """The names of :data:`CAPACITY_LIMITS` the load ``i`` of ``curve`` passes."""
    bits = int(curve.over[i]) if curve.over.size else 0
    return [name for k, name in enumerate(CAPACITY_LIMITS) if bits >> k & 1]


def capacity_limit(curve: LoadCurve) -> str:
    """What ends the curve's feasible loads, as computed at its first infeasible load (the
    capacity's edge, resolved or on the grid): names of :data:`CAPACITY_LIMITS` joined by
    ``+``, or ``""`` when every load of the curve is feasible."""
    bad = np.flatnonzero(~curve.feasible)
    return "+".join(limits_at(curve, int(bad[0]))) if bad.size else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatingPoint:
    """Where a client settles on a load curve, per rank."""

    x: float
    queue_s: float
    iteration_s: float
    decode_only_s: float
    own_prefill_s: float
    prefill_iterations: float
    running: float
    kv_occupancy: float
    preemptions_per_request: float
    ttft_s: float
    tpot_s: float
    e2e_s: float
    saturated: bool
    tokens_per_iteration: float = 1.0
    """As :attr:`LoadCurve.tokens_per_iteration`."""


def kv_capacity_requests(kv_tokens: float, work: Workload, eng: EngineProfile) -> float:
    """Requests the KV pool holds: ``reserve`` keeps prompt + full output per request; on
    demand a request holds, on average over its life, its prompt plus half its output."""
    page = eng.page_size
    if eng.kv_policy == "reserve":
        per = np.ceil((work.input_len + work.output_len) / page) * page
    else:
        per = np.ceil((work.input_len + work.output_len / 2.0) / page) * page + page / 2
    return float(kv_tokens / max(per, 1.0))


def _recompute_tokens(
    n: np.ndarray, work: Workload, eng: EngineProfile, kv_tokens: float
) -> np.ndarray:
    """Prompt tokens recomputed per request after preemption. An on-demand pool admits on the
    prompt alone; when the running requests' contexts outgrow it, the scheduler evicts the
    latest and later recomputes its prompt and the tokens it had generated (vLLM
    ``PreemptionMode.RECOMPUTE``; Kwon et al. 2023, arXiv:2309.06180 Sec. 4.5). The share of
    requests preempted is the part of the running set whose full context cannot be held."""
    if eng.kv_policy == "reserve":
        return np.zeros_like(n)
    full = n * (work.input_len + work.output_len)
    share = np.clip(1.0 - kv_tokens / np.maximum(full, 1e-9), 0.0, 1.0)
    return share * (work.input_len + work.output_len / 2.0)


def _chunk_tokens(
    eng: EngineProfile, n: np.ndarray, new_tokens: float, queries: float = 1.0
) -> np.ndarray:
    """Prompt tokens one prompt puts into the iteration that prefills it: the whole prompt
    without chunked prefill, else what the token budget leaves beside the ``n`` decodes (each
    ``queries`` tokens of the budget: its token and its drafts under speculative decoding,
    TensorRT-LLM counts them in ``max_num_tokens``)."""
    if eng.chunked_prefill:
        room = np.maximum(float(eng.max_num_batched_tokens) - n * queries, 1.0)
        return np.minimum(new_tokens, room)
    return np.full_like(n, new_tokens)


def prefill_batch_prompts(eng: EngineProfile, n: np.ndarray, new_tokens: float) -> np.ndarray:
    """Whole prompts of ``new_tokens`` one prefill batch may start beside ``n`` decodes under
    SGLang's ``--max-prefill-tokens`` (``eng.max_prefill_tokens``; ``inf`` without one).

    SGLang 0.5.x (v0.5.6.post2 ``managers/schedule_policy.py``): ``PrefillAdder`` starts
    ``rem_input_tokens`` at the limit less the mixed decode tokens (``scheduler.py``
    ``get_new_batch_prefill`` passes ``running_bs`` when ``--enable-mixed-chunk`` is on, else
    0), and ``add_one_req`` refuses a request whose whole prompt reaches what is left unless it
    is the batch's first (``real_input_tokens >= self.rem_input_tokens and
    len(self.can_run_list) != 0``). So the first prompt always starts and a later one only
    while it is below what is left: ``max(1, ceil(left / ISL) - 1)`` with ``left`` the limit
    less the mixed decodes, the rule :func:`cohort_sim.simulate` applies per iteration. The
    steady state reads it as a capacity: at most this many prompts start per iteration."""
    decodes = np.asarray(n, dtype=float)
    if eng.max_prefill_tokens is None or new_tokens <= 0.0:
        return np.full_like(decodes, np.inf)
    # The mixed decode tokens are the running requests (``running_bs``), one each.
    mixed = decodes if eng.prefill_policy != "prefill_first" else np.zeros_like(decodes)
    left = float(eng.max_prefill_tokens) - mixed
    return prompts_under_prefill_limit(left, new_tokens, first=True)


def prompts_under_prefill_limit(
    left: np.ndarray | float, prompt_tokens: float, *, first: bool
) -> np.ndarray:
    """Prompts of ``prompt_tokens`` (still to prefill) that SGLang 0.5.x's ``add_one_req``
    starts while ``left`` tokens of ``--max-prefill-tokens`` remain (``rem_input_tokens``): it
    refuses a prompt that reaches what is left unless the batch is empty (``first``), so the
    ``k``-th starts only while ``k x prompt < left``: ``ceil(left / prompt) - 1``, at least 1 for
    an empty batch, 0 after. ``inf`` where there is no limit. The one rule of the steady state
    (:func:`prefill_batch_prompts`) and of ``cohort_sim.simulate`` (per cohort, ``left`` what
    the batch's earlier prompts leave)."""
    x = np.ceil(np.asarray(left, dtype=float) / prompt_tokens) - 1.0
    return np.maximum(x, 1.0 if first else 0.0)


def iteration_mix(
    it: IterationModel,
    eng: EngineProfile,
    n: np.ndarray,
    ctx: np.ndarray,
    p: np.ndarray,
    half: np.ndarray,
    new_tokens: float,
    batch: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, prompt-carrying, decode-only) iteration seconds when ``p`` prompt tokens per
    iteration on average arrive as whole chunks.

    The scheduler prefills a waiting prompt in one iteration (or budget-sized chunks): a share
    ``f = p / packet`` of the iterations carry ``packet`` prompt tokens beside the ``n`` decodes
    and the rest decode only (Orca's iteration-level scheduling, Yu et al. OSDI'22 Sec. 3;
    Sarathi-Serve's chunks, Agrawal et al. 2024 arXiv:2403.02310 Sec. 4), so the mean is
    ``(1 - f) T(n, 0) + f T(n, packet)``, not ``T(n, p)``. The iteration time is not linear in
    the tokens it carries: the weights are read once per iteration whatever its tokens (the
    dense floor), and an MoE layer reads every expert its tokens touch, which saturates with
    the tokens (``expert_load``); spreading a prompt thinly over every iteration would charge
    each one the experts of the prompt's tokens (an MoE over-charge) and hide the prompt's
    compute under the weight-read floor (a dense under-charge). ``packet`` is at least one
    prompt chunk and grows to ``p`` when prompts queue faster than one chunk per iteration;
    ``batch`` prompts released together (TensorRT-LLM batch waiting, :func:`batch_wait`) make
    one packet of ``batch`` whole prompts."""
    chunk = _chunk_tokens(eng, n, new_tokens, it.queries) * batch
    packet = np.maximum(chunk, p)
    share = np.clip(p / np.maximum(packet, 1e-9), 0.0, 1.0)
    with_prompt = it.time_s(n, ctx, packet, half)
    decode_only = it.time_s(n, ctx, np.zeros_like(n), np.zeros_like(n))
    mean = (1.0 - share) * decode_only + share * with_prompt
    return np.asarray(mean), np.asarray(with_prompt), np.asarray(decode_only)


def adp_balance_wait_s(rate: np.ndarray, ranks: int, timeout_s: np.ndarray) -> np.ndarray:
    """Mean time a new prompt is held by TensorRT-LLM's attention-DP context balancing.

    With ``attention_dp_config.enable_balance`` the executor schedules no context request
    until every attention-DP rank has one, or until ``timeout_iters`` iterations have passed
    since the last release (``PyExecutor._balance_adp_requests``, TensorRT-LLM 1.1: the
    iteration counter grows while not every rank has a context request, and both releases
    reset it; the hold is lifted when not every rank has generation requests). After a
    release each rank's next prompt arrives after an exponential time at its ``rate`` (Poisson
    arrivals per rank), so the next release comes at ``F = min(max of ranks arrivals,
    timeout)``, a stopping time of the arrivals. The mean hold per prompt is the expected
    total hold of a cycle over its expected prompts (renewal-reward; Ross, Introduction to
    Probability Models, Ch. 7). The total hold is ``int_0^F N(t) dt`` with ``N(t)`` the prompts
    so far; ``F > t`` exactly when some rank has none by ``t``, so ``E[N_i(t) 1{F > t}] =
    rate t (1 - (1 - exp(-rate t))^(ranks-1))`` (rank i's count matters only with the others
    all arrived), and the expected prompts are ``ranks rate E[F]`` (Wald). Hence

        hold = int_0^T t (1 - (1 - e^(-rate t))^(ranks-1)) dt / int_0^T (1 - (1 - e^(-rate t))^ranks) dt.

    The prompt that completes the set is released at once, so one rank waits for nothing.
    (``E[F^2] / (2 E[F])``, what a prompt arriving independently of the releases would wait,
    overstates it: up to 75% with two ranks; tests/unit/test_serving_adp_balance.py replays
    the rule on simulated arrivals.)"""
    r = np.atleast_1d(np.asarray(rate, dtype=float))
    to = np.broadcast_to(np.asarray(timeout_s, dtype=float), r.shape)
    # Past ln(ranks) + 40 mean inter-arrival times every rank has had a prompt (survival
    # below e^-40): integrate to that or to the timeout, whichever comes first.
    upper = np.minimum(to, (np.log(ranks) + 40.0) / np.maximum(r, 1e-30))
    u = upper[..., None] * np.linspace(0.0, 1.0, 513)
    all_but_one = (1.0 - np.exp(-r[..., None] * u)) ** (ranks - 1)
    survival = 1.0 - all_but_one * (1.0 - np.exp(-r[..., None] * u))
    prompts = np.trapezoid(survival, u, axis=-1)
    held = np.trapezoid(u * (1.0 - all_but_one), u, axis=-1)
    return np.asarray(np.where(prompts > 0.0, held / np.maximum(prompts, 1e-30), 0.0))


def batch_wait(
    arrivals: np.ndarray, timeout_iters: float, need: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(mean iterations a new prompt is held, prompts released together) under TensorRT-LLM's
    batch waiting.

    With ``batch_wait_timeout_iters`` and ``batch_wait_max_tokens_ratio`` set and no attention
    DP, ``PyExecutor._schedule`` passes the scheduled context requests through
    ``_waiting_requests`` whenever generation requests are running: it holds them all until
    its counter of held iterations reaches ``timeout_iters`` or the scheduled tokens (whole
    prompts plus one per decode) reach ``ratio x max_num_tokens``, then releases them together
    and resets the counter (TensorRT-LLM 1.1, ``tensorrt_llm/_torch/pyexecutor/
    py_executor.py``). So the first prompt after a release starts a window of ``timeout_iters``
    iterations that closes early when ``need - 1`` more prompts arrive. With prompts arriving
    as a Poisson stream of ``arrivals`` per iteration, ``mu = arrivals x timeout`` and
    ``q_j = P(Poisson(mu) >= j)``, ``m = need - 1``: the window lasts ``sum_{j<=m} q_j /
    arrivals`` (the window ends at the m-th arrival or at the timeout), the prompts behind the
    first wait ``sum_{2<=j<=m} (j-1) q_j / arrivals`` in all (integrals of the Poisson
    probabilities over the window: int_0^T P(N(t) = k) dt = P(N(T) > k) / arrivals), and
    ``1 + sum_{j<=m} q_j`` prompts are released; by renewal-reward (Ross, Introduction to
    Probability Models, Ch. 7) the mean hold per prompt is ``sum_j j q_j / (arrivals (1 +
    sum_j q_j))``, the whole timeout at light load."""
    a = np.maximum(np.atleast_1d(np.asarray(arrivals, dtype=float)), 1e-12)
    m = np.maximum(np.broadcast_to(np.asarray(need, dtype=float), a.shape) - 1.0, 0.0)
    mu = a * timeout_iters
    # Beyond mu + 12 sqrt(mu) + 24 the Poisson tail is below 1e-30: a larger m never binds.
    top = int(
        np.ceil(min(float(m.max(initial=0.0)), float(mu.max()) + 12.0 * np.sqrt(mu.max()) + 24))
    )
    if top < 1:
        return np.zeros_like(a), np.ones_like(a)
    k = np.arange(top + 40, dtype=float)
    logfact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, k.size)))])
    pmf = np.exp(k * np.log(mu[:, None]) - mu[:, None] - logfact)
    tail = np.cumsum(pmf[:, ::-1], axis=1)[:, ::-1]  # tail[:, j] = P(N >= j)
    j = np.arange(1, top + 1, dtype=float)
    q = tail[:, 1 : top + 1] * (j <= m[:, None])
    held = (q * j).sum(axis=1) / (a * (1.0 + q.sum(axis=1)))
    return np.where(m > 0, held, 0.0), 1.0 + q.sum(axis=1)


def _ranks_mix(
    it: IterationModel,
    eng: EngineProfile,
    n: np.ndarray,
    ctx: np.ndarray,
    p: np.ndarray,
    half: np.ndarray,
    new_tokens: float,
    batch: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`iteration_mix` of one rank, with the attention-DP ranks of an MoE engine in step
    (``adp_lockstep.lockstep_mix``: an iteration lasts as long as its fullest rank)."""
    t, own, dec_only = iteration_mix(it, eng, n, ctx, p, half, new_tokens, batch)
    a = p / max(new_tokens, 1.0)
    t, own = lockstep_mix(it, eng, n, ctx, half, new_tokens, a, t, own, dec_only)
    return t, own, dec_only


def _recv_packet(
    eng: EngineProfile, n: np.ndarray, decode_steps: float, new_tokens: float
) -> np.ndarray:
    """:func:`recv_batch` as whole prompts of one prefill batch: at most what the chunk budget
    (``max_num_batched_tokens``) takes in one iteration, and at least one prompt."""
    fit = max(float(eng.max_num_batched_tokens) / max(new_tokens, 1.0), 1.0)
    return np.clip(recv_batch(eng, n, decode_steps), 1.0, fit)


def _batch_waiting(
    eng: EngineProfile, n: np.ndarray, decode_steps: float, prompt_len: float, ranks: int
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`batch_wait` at the decode batch ``n`` (prompts arrive ``n / decode_steps`` per
    iteration by Little's law), weighted by the chance that generation requests run (the
    executor does not hold prompts on an idle engine; ``n`` taken as Poisson); no hold with
    attention DP (that path balances ranks instead) or when either setting is 0 (a zero
    timeout or ratio releases at once)."""
    ratio, timeout = eng.batch_wait_max_tokens_ratio, eng.batch_wait_timeout_iters
    if ranks > 1 or ratio <= 0.0 or timeout <= 0:
        return np.zeros_like(n), np.ones_like(n)
    need = np.ceil((ratio * eng.max_num_batched_tokens - n) / max(prompt_len, 1.0))
    held, batch = batch_wait(n / decode_steps, float(timeout), need)
    busy = 1.0 - np.exp(-n)
    return busy * held, 1.0 + busy * (batch - 1.0)


def recv_batch(eng: EngineProfile, n: np.ndarray, decode_steps: float) -> np.ndarray:
    """Prompts one SGLang poll for new requests brings in, when it brings any, under
    ``--scheduler-recv-interval`` (``eng.recv_interval``; 1 without one).

    The scheduler polls after every prefill batch and otherwise after ``recv_interval`` decode
    (or verify) batches (``SchedulerRecvSkipper.handle``, python/sglang/srt/managers/
    scheduler_recv_skipper.py: counter += 1 per DECODE / TARGET_VERIFY batch, += 1000 per any
    other, poll and reset when it reaches the interval; weights from ``environ.py``
    ``SGLANG_SCHEDULER_RECV_SKIPPER_WEIGHT_*`` since sgl-project/sglang PR #13855, the same
    numbers hard-coded before). The prompts that arrived over a window of ``recv_interval``
    decode iterations are received together and prefilled as one batch: with arrivals a
    Poisson stream of ``n / decode_steps`` per iteration (Little's law), ``m`` per window, a
    poll that finds any brings ``m / (1 - e^-m)`` (the mean of a Poisson count given it is at
    least one)."""
    m = np.asarray(n, dtype=float) / decode_steps * float(eng.recv_interval)
    if eng.recv_interval <= 1:
        return np.ones_like(m)
    return np.where(m > 1e-9, m / -np.expm1(-np.maximum(m, 1e-9)), 1.0)


def recv_wait(
    eng: EngineProfile, mean_s: np.ndarray, own_s: np.ndarray, decode_only_s: np.ndarray
) -> np.ndarray:
    """Mean seconds a new request waits for SGLang's next poll beyond the iteration in flight,
    under ``--scheduler-recv-interval`` (:func:`recv_batch` states the polling rule).

    A request that arrives while the engine decodes waits for the end of the window of
    ``recv_interval`` decode iterations the poll counter is in: the iteration in flight is the
    j-th of the window with j uniform on 1..N (the window starts at the poll after a prefill
    batch or at the previous poll), so (N - 1) / 2 decode iterations more than without the
    interval. One that arrives during a prefill batch is polled right after it (no extra wait).
    Arrivals see the time average (PASTA, Wolff 1982): the share of time in decode-only
    iterations is ``(1 - f) T_dec / T`` with ``f`` the share of prompt-carrying iterations of
    the mean ``T = (1 - f) T_dec + f T_own`` (:func:`iteration_mix`). 0 with an interval of 1."""
    if eng.recv_interval <= 1:
        return np.zeros_like(np.asarray(mean_s, dtype=float))
    span = np.asarray(own_s - decode_only_s, dtype=float)
    # No prompt work in the prompt iterations (every prompt token cached): all decode time.
    decode_share = np.where(
        span > 1e-12, np.clip((own_s - mean_s) / np.maximum(span, 1e-12), 0.0, 1.0), 1.0
    )
    in_decode = np.clip(decode_share * decode_only_s / np.maximum(mean_s, 1e-15), 0.0, 1.0)
    return np.asarray(in_decode * (eng.recv_interval - 1) / 2.0 * decode_only_s)


def decode_poll_wait(
    eng: EngineProfile, decoding: np.ndarray, decode_only_s: np.ndarray
) -> np.ndarray:
    """Mean seconds a new request waits for a disaggregated SGLang decode worker's next poll
    beyond the iteration in flight, under the decode worker's ``--scheduler-recv-interval``
    (``eng.recv_interval``; 0 with 1), and with it the prefill worker's start on the prompt.

    Why it delays the prefill: the decode scheduler takes a new request only when it polls
    (``recv_requests`` returns nothing until ``SchedulerRecvSkipper.handle`` says so:
    :func:`recv_batch`), and only then pre-allocates its KV pages and sends their addresses;
    the prefill worker holds the request in its bootstrap queue until the decode side is ready
    (sgl-project/sglang ``python/sglang/srt/disaggregation/prefill.py``: "Bootstrap Queue ...
    requests whose bootstrap (handshake and preallocation) has not finished"; ``pop_bootstrapped``
    keeps it while the sender polls ``KVPoll.Bootstrapping``, read at 000c2b942). Dynamo hands
    the request to both workers at once (``components/src/dynamo/sglang/request_handlers/llm/
    decode_handler.py``, the frontend's ``bootstrap_info``; ai-dynamo/dynamo at 3d7182b80), so
    the decode worker's extra poll wait lies before the prefill. A busy decode worker runs DECODE
    (or TARGET_VERIFY) batches, one counter step each, so the wait is :func:`recv_wait`'s
    (N - 1) / 2 decode iterations; an idle one counts its empty loop turns (weight 1 for no
    batch) and polls within N of them, which take no model time. A rank holding ``decoding``
    requests on average is taken as busy with the chance that a Poisson count of that mean is
    not zero, as the attention-DP hold reads its ranks (:func:`load_curve`)."""
    n = np.asarray(decoding, dtype=float)
    if eng.recv_interval <= 1:
        return np.zeros_like(n)
    busy = -np.expm1(-np.maximum(n, 0.0))
    return np.asarray(busy * (eng.recv_interval - 1) / 2.0 * np.asarray(decode_only_s))


def load_curve(
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    kv_tokens: float,
    x_grid: np.ndarray | None = None,
    n_grid: np.ndarray | None = None,
) -> LoadCurve:
    """The steady state along a grid of decode batch sizes up to past the capacity.

    Little's law ties the prompt tokens of an iteration to its decode batch without a fixed
    point: ``n = x (OSL-1) T`` and ``p = x T ISL`` give ``p = n ISL / (OSL-1)`` prompt tokens per
    iteration on average, so each grid point is one evaluation of the iteration time and
    ``x = n / ((OSL-1) T)``. The prompt tokens arrive as whole chunks (:func:`iteration_mix`),
    so ``T`` is the mean over prefill-carrying and decode-only iterations. With ``x_grid`` the
    curve is resampled at those throughputs (interpolated along the monotone ``x(n)``); with
    ``n_grid`` it is evaluated at those decode batches (:func:`resolve_capacity`)."""
    isl, osl = work.input_len, work.output_len
    new_tokens = isl * (1.0 - work.prefix_hit)
    # Decode iterations per request: each emits ``E`` tokens per request (1, or the expected
    # accepted length under speculative decoding), so a request decodes (OSL-1)/E of them.
    per_iteration = it.tokens_per_iteration
    decode_steps = max(osl - 1.0, 1e-3) / per_iteration
    budget = float(eng.max_num_batched_tokens)
    cap_req = min(float(eng.max_num_seqs), kv_capacity_requests(kv_tokens, work, eng))
    if n_grid is None:
        # The lightest load carries a thousandth of an iteration's prompt tokens at most: with
        # a prompt many times the budget, or one output token (no decode: ``decode_steps`` is
        # a token's thousandth, its prompts are all there is), a fixed 1e-4 decodes was past
        # the budget already, and no load was feasible.
        most = budget if eng.chunked_prefill else max(budget, new_tokens)  # fits_budget's
        lightest = 1e-3 * most * decode_steps / max(new_tokens, 1.0)
        n = np.geomspace(min(1e-4, lightest), max(cap_req, 1.0) * 1.5, GRID)
    else:
        n = np.asarray(n_grid, dtype=float)
    ctx = np.full_like(n, isl + osl / 2.0)
    half = np.full_like(n, isl / 2.0)
    p = n * (new_tokens + _recompute_tokens(n, work, eng, kv_tokens)) / decode_steps
    ranks = it.par.attention_dp
    held, batch = _batch_waiting(eng, n, decode_steps, isl, ranks)
    batch = batch * _recv_packet(eng, n, decode_steps, new_tokens)
    t, own, dec_only = _ranks_mix(it, eng, n, ctx, p, half, new_tokens, batch)
    x = n / (decode_steps * t)
    if x_grid is not None:
        x_mono = np.maximum.accumulate(x)
        n = np.interp(x_grid, x_mono, n, right=np.inf)
        over = ~np.isfinite(n)
        n = np.where(over, n[~over].max() if (~over).any() else 1e-4, n)
        p = n * (new_tokens + _recompute_tokens(n, work, eng, kv_tokens)) / decode_steps
        ctx = np.full_like(n, isl + osl / 2.0)
        half = np.full_like(n, isl / 2.0)
        held, batch = _batch_waiting(eng, n, decode_steps, isl, ranks)
        batch = batch * _recv_packet(eng, n, decode_steps, new_tokens)
        t, own, dec_only = _ranks_mix(it, eng, n, ctx, p, half, new_tokens, batch)
        x = np.asarray(x_grid, dtype=float)
        beyond = over
    else:
        beyond = np.zeros_like(n, dtype=bool)
    # A prompt's own iteration(s) (``own``): the whole prompt (or budget-sized chunks) beside
    # the decodes, the prompt-carrying iteration of ``iteration_mix``.
    k_p = np.ceil(new_tokens / np.maximum(_chunk_tokens(eng, n, new_tokens, it.queries), 1.0))
    # Little's law: the requests being prefilled (and held by batch waiting) run beside the n
    # decodes, holding their KV pages.
    running = n + x * t * (k_p + held)
    room = np.maximum(budget - n * it.queries, 1.0)  # what the budget leaves beside the decodes
    fits_budget = p <= room if eng.chunked_prefill else p <= max(budget, new_tokens)
    # SGLang's --max-prefill-tokens: at most ``prefill_batch_prompts`` prompts start per
    # iteration (one prefill batch each), the first whole or budget-chunked.
    if eng.max_prefill_tokens is not None and new_tokens > 0.0:
        fits_budget &= p <= prefill_batch_prompts(eng, n, new_tokens) * new_tokens
    # Past the top of x(n) more running requests buy no throughput: the engine is saturated.
    # Padded CUDA graphs (``IterationModel.decode_graph_sizes``) make x(n) a sawtooth, each
    # captured size a tooth: a load past a tooth's top moves the batch up to the next size,
    # where x rises again, so the rise is read on the unpadded iteration.
    x_rise = x
    if it.decode_graph_sizes and x_grid is None:
        free = dataclasses.replace(it, decode_graph_sizes=())
        t_free = _ranks_mix(free, eng, n, ctx, p, half, new_tokens, batch)[0]
        x_rise = n / (decode_steps * t_free)
    rising = np.concatenate([[True], np.diff(x_rise) > 0])
    # Feasible loads are a prefix of the grid: past the first load the engine cannot carry (a
    # cap, the budget, or the top of x(n)) a later rise of x(n) is another branch, which the
    # operating point (``_point``, interpolating up to the first fall) never reads.
    feasible = np.logical_and.accumulate((running <= cap_req) & fits_budget & rising & ~beyond)
    # Which limit each load passes (CAPACITY_LIMITS' bits): the smaller of the running cap and
    # the KV pool's requests is the one ``running`` reaches.
    full = running > cap_req
    slots_bind = float(eng.max_num_seqs) <= kv_capacity_requests(kv_tokens, work, eng)
    over = (
        (full & slots_bind) * 1
        + (full & (not slots_bind)) * 2
        + ~fits_budget * 4
        + (~rising | beyond) * 8
    ).astype(np.int8)
    # A new request waits for the iteration in flight (half of one on average) and, with an
    # overlapped scheduler, for one more before its prefill starts.
    delay = t * (0.5 + (1.0 if eng.overlap_scheduler else 0.0))
    # TensorRT-LLM batch waiting holds the prompt ``held`` iterations before that (the
    # iterations it waits through are the mean ``t``).
    ttft = delay + held * t + own + (k_p - 1.0) * np.maximum(own, t)
    ttft = ttft + eng.request_overhead_ms * 1e-3
    # SGLang --scheduler-recv-interval: the wait for the next poll (not running yet: it holds
    # no slot or KV pages, so ``running`` does not count it).
    ttft = ttft + recv_wait(eng, t, own, dec_only)
    if eng.adp_balance_timeout_iters > 0 and ranks > 1:
        # The hold applies only while every rank has requests decoding; a rank's decoding
        # requests are taken as Poisson with mean n (requests spread evenly over the ranks).
        all_busy = (1.0 - np.exp(-n)) ** ranks
        hold = adp_balance_wait_s(x, ranks, eng.adp_balance_timeout_iters * t)
        ttft = ttft + all_busy * hold
    # TPOT is the time between output tokens after the first: a request of one output token
    # has none (vLLM's benchmark_serving leaves it out of the TPOT mean; the cohort model
    # reads 0 too), not the iteration time.
    tpot = t / per_iteration if osl > 1.0 else np.zeros_like(t)
    e2e = ttft + max(osl - 1.0, 0.0) * tpot
    return LoadCurve(
        x=x,
        decoding=n,
        iteration_s=t,
        decode_only_s=dec_only,
        own_prefill_s=own,
        prefill_iterations=k_p,
        running=running,
        kv_tokens_used=running * (isl + osl / 2.0),
        feasible=feasible,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        tokens_per_iteration=per_iteration,
        over=over,
    )


def _last_feasible(curve: LoadCurve) -> int:
    ok = np.flatnonzero(curve.feasible)
    return int(ok[-1]) if ok.size else 0


def resolve_capacity(
    it: IterationModel,
    eng: EngineProfile,
    work: Workload,
    kv_tokens: float,
    curve: LoadCurve,
    within: Callable[[LoadCurve], np.ndarray] | None = None,
) -> LoadCurve:
    """``curve`` (from :func:`load_curve` without ``x_grid``) with its capacity resolved:
    decode batches added between its last feasible point and the next (:func:`refine_edge`)
    until the last feasible one sits on the edge, where the running requests reach
    ``max_num_seqs`` or the KV pages, the prompts fill the token budget, or the throughput
    peaks. The points below the old top are kept, so the curve there is unchanged.

    ``within`` adds a condition on the steady state (the SLO search's p99 targets): the edge
    resolved is then that of feasible and ``within``, the condition's crossing where it comes
    before the capacity, by the same rule."""

    def ok(c: LoadCurve) -> np.ndarray:
        return c.feasible if within is None else c.feasible & within(c)

    def feasible(n: np.ndarray) -> np.ndarray:
        return ok(load_curve(it, eng, work, kv_tokens, n_grid=n))

    extra = refine_edge(curve.decoding, ok(curve), feasible)
    if not extra.size:
        return curve
    n = np.unique(np.concatenate([curve.decoding, extra]))
    return load_curve(it, eng, work, kv_tokens, n_grid=n)


def needs_capacity(
    curve: LoadCurve, concurrency: float | None = None, rate: float | None = None
) -> bool:
    """Whether a client's operating point depends on where exactly the capacity lies: a closed
    loop that keeps more requests in flight than the grid's top feasible point holds, and any
    open loop (its admission queue's slots are the running requests at the capacity)."""
    if rate is not None:
        return True
    top = _last_feasible(curve)
    return float(concurrency or 0.0) > float(curve.x[top] * curve.e2e_s[top])


def closed_loop(
    curve: LoadCurve, concurrency: float, kv_tokens: float, work: Workload
) -> OperatingPoint:
    """Operating point of ``concurrency`` requests kept in flight on this rank."""
    ok = curve.feasible
    in_flight = curve.x * curve.e2e_s
    top = _last_feasible(curve)
    if concurrency <= in_flight[top] and ok[0]:
        idx = np.flatnonzero(ok & (np.arange(len(ok)) <= top))
        # In flight rises with the load but for the teeth of padded CUDA graphs (load_curve).
        idx = idx[_new_highs(in_flight[idx])]
        xs, cs = curve.x[idx], in_flight[idx]
        x = float(np.interp(concurrency, cs, xs))
        queue = 0.0
        saturated = False
        # Every figure at the load that holds ``concurrency`` in flight (not at the smallest
        # load of the same throughput, which a padded curve reaches on an earlier tooth).
        along = (idx, cs, float(concurrency))
    else:
        x = float(curve.x[top])
        queue = max(concurrency / x - float(curve.e2e_s[top]), 0.0)
        saturated = True
        along = (np.array([top]), np.array([x]), x)
    return _point(curve, x, queue, saturated, kv_tokens, work, along)


FINITE_RUN_SEED = 20261201
"""Seed of the unit-rate Poisson arrivals of :func:`finite_run_wait` (fixed: the same
arrivals at every rate, so the wait is deterministic and monotone in the rate)."""
FINITE_RUN_REPLICATIONS = 16
"""Benchmark runs averaged by :func:`finite_run_wait` (fewer for very long runs, see
:data:`FINITE_RUN_ARRIVALS`)."""
FINITE_RUN_ARRIVALS = 1 << 18
"""At most this many simulated arrivals per call, over all replications."""


@lru_cache(maxsize=8)
def _unit_arrivals(num_requests: int) -> np.ndarray:
    """Arrival times of ``num_requests`` requests of a unit-rate Poisson stream, one row per
    replication (read-only: cached and shared by every rate)."""
    reps = max(1, min(FINITE_RUN_REPLICATIONS, FINITE_RUN_ARRIVALS // max(num_requests, 1)))
    rng = np.random.default_rng(FINITE_RUN_SEED)
    a = np.cumsum(rng.exponential(size=(reps, num_requests)), axis=1)
    a.setflags(write=False)
    return a


def _fifo_wait(arrivals: np.ndarray, servers: int, service_s: float) -> float:
    """Mean wait of ``arrivals`` (rows of sorted times) at ``servers`` FIFO servers with the
    deterministic service ``service_s``, starting empty.

    With equal deterministic service, departures leave in arrival order, so request ``i``
    takes the server that request ``i - c`` frees: ``s_i = max(a_i, s_{i-c} + S)`` (the
    Kiefer & Wolfowitz 1955 workload recursion of the c-server FIFO queue, Trans. Amer. Math.
    Soc. 78(1), with equal service times). Each residue class
    mod ``c`` is then a single-server Lindley recursion (Lindley 1952, Proc. Camb. Phil. Soc.
    48(2)) whose solution from an empty start is ``s_k = k S + max_{j<=k} (a_j - j S)``: one
    running maximum per class, O(N)."""
    reps, n = arrivals.shape
    if servers >= n or service_s <= 0.0:
        return 0.0
    rows = -(-n // servers)
    pad = rows * servers - n
    # Padding after the last arrival sits at the end of its class: it changes no real start.
    a = np.concatenate([arrivals, np.repeat(arrivals[:, -1:], pad, axis=1)], axis=1)
    a = a.reshape(reps, rows, servers)  # a[:, k, r] is request k * c + r
    ks = (np.arange(rows, dtype=float) * service_s)[None, :, None]
    start = ks + np.maximum.accumulate(a - ks, axis=1)
    wait = (start - a).reshape(reps, rows * servers)[:, :n]
    return float(np.maximum(wait, 0.0).mean())  # no rounding below zero


def finite_run_wait(
    rate: float,
    servers: float,
    service_s: float,
    num_requests: int,
    workers: int = 1,
    routing: str = "least-loaded",
) -> float:
    """Mean admission wait (s) of a benchmark of ``num_requests`` Poisson arrivals at ``rate``
    requests/s to ``servers`` FIFO slots each held ``service_s``, the engine empty at the start.

    ``workers`` and ``routing``: the slots are ``workers`` engines' and the router sends a
    request to any free slot (``least-loaded``: one queue), to each engine in turn
    (``round-robin``: an engine meets every ``workers``-th arrival of the stream, Erlang
    gaps), or to one at random (``random``: a seeded random deal of each run's arrivals, the
    uneven shares included); then each engine is its own queue of ``servers / workers``
    slots.

    Exact for that queue (:func:`_fifo_wait`), averaged over :data:`FINITE_RUN_REPLICATIONS`
    runs of fixed arrivals scaled by ``1 / rate`` (common random numbers: a higher rate only
    brings every arrival earlier, so the wait grows with it). It holds on both sides of the
    capacity ``servers / service_s``: far below it, the steady-state M/D/c wait; past it, the
    queue a run of N requests builds, ``N/2 (1/capacity - 1/rate)`` for large N, with no
    jump between the two. A fractional slot count interpolates between its floor and ceiling."""
    if num_requests < 1 or rate <= 0.0:
        return 0.0
    engines = max(int(workers), 1)
    a = _unit_arrivals(int(num_requests)) / rate
    if engines == 1 or routing == "least-loaded":
        return _slots_wait(a, float(servers), service_s)
    # Each engine its own queue of servers / engines slots, fed the arrivals the router deals
    # it: every engines-th in turn (each residue class), or a seeded random deal per run; the
    # mean over every request (each engine weighted by the requests it got).
    per = float(servers) / engines
    if routing == "round-robin":
        classes = [a[:, k::engines] for k in range(min(engines, a.shape[1]))]
        total = sum(_slots_wait(c, per, service_s) * c.shape[1] for c in classes)
        return total / a.shape[1]
    rng = np.random.default_rng(0)
    total = 0.0
    for row in a:
        dealt = rng.integers(engines, size=row.size)
        for k in range(engines):
            mine = row[dealt == k]
            if mine.size:
                total += _slots_wait(mine[None, :], per, service_s) * mine.size
    return total / a.size


def _slots_wait(arrivals: np.ndarray, servers: float, service_s: float) -> float:
    """:func:`_fifo_wait` at a fractional slot count: between its floor and ceiling."""
    c = max(servers, 1.0)
    lo = int(np.floor(c))
    frac = c - lo
    w = _fifo_wait(arrivals, lo, service_s)
    if frac > 0.0:
        w = (1.0 - frac) * w + frac * _fifo_wait(arrivals, lo + 1, service_s)
    return w


def open_loop(
    curve: LoadCurve, rate: float, kv_tokens: float, work: Workload, num_requests: int
) -> OperatingPoint:
    """Operating point under Poisson arrivals at ``rate`` requests/s on this rank, for a
    benchmark of ``num_requests`` requests.

    The admission queue: the servers are the slots the engine runs at its capacity (the
    running requests there, ``c``). A request waits only while every slot is taken, and with
    every slot taken the engine is in its capacity state, finishing ``capacity`` requests/s:
    so each slot is held ``c / capacity`` (Little's law at the capacity), at every rate. (The
    shorter hold of a lighter load, ``running(x) / x``, would let a full engine finish faster
    than its capacity.) The queue's load is then ``rate / capacity``, and it saturates
    exactly at the capacity. Its mean wait is the exact finite-run FIFO wait of
    :func:`finite_run_wait` at every rate, below and past the capacity: one rule, continuous
    and increasing in the rate. Past the capacity the engine serves the capacity."""
    top = _last_feasible(curve)
    cap = float(curve.x[top])
    slots = max(_point(curve, cap, 0.0, True, kv_tokens, work).running, 1.0)
    wait = finite_run_wait(rate, slots, slots / cap, num_requests)
    saturated = rate >= cap
    return _point(curve, cap if saturated else rate, wait, saturated, kv_tokens, work)


def _new_highs(values: np.ndarray) -> np.ndarray:
    """Positions where ``values`` rises above every earlier one (the first of them included):
    the strictly rising points an interpolation can read along a sawtooth."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.zeros(0, dtype=int)
    before = np.concatenate([[-np.inf], np.maximum.accumulate(v)[:-1]])
    return np.flatnonzero(v > before)


def _point(
    curve: LoadCurve,
    x: float,
    queue: float,
    saturated: bool,
    kv_tokens: float,
    work: Workload,
    along: tuple[np.ndarray, np.ndarray, float] | None = None,
) -> OperatingPoint:
    """The curve's figures at throughput ``x``, or, with ``along`` = (indices, a rising key at
    them, the key's value), at that value of the key (a closed loop's requests in flight)."""
    # Interpolate along the rising part of x(n) only (past the peak, more running requests
    # buy no throughput and x(n) is not a function of n any more). Under padded CUDA graphs the
    # feasible loads run on past the teeth of x(n) (:func:`load_curve`): there the smallest
    # load that reaches each throughput is read, the points where x(n) sets a new high.
    falls = np.flatnonzero(np.diff(curve.x) <= 0)
    end = int(falls[0]) + 1 if falls.size else len(curve.x)
    ok = np.flatnonzero(curve.feasible)
    end = max(end, int(ok[-1]) + 1) if ok.size else end
    head = curve.x[:end]
    keep = _new_highs(head)

    def at(a: np.ndarray) -> float:
        if along is not None:
            idx, key, value = along
            return float(np.interp(value, key, a[idx]))
        return float(np.interp(x, head[keep], a[:end][keep]))

    ttft = at(curve.ttft_s) + queue
    tpot = at(curve.tpot_s)
    used = at(curve.kv_tokens_used)
    # Preemption: an on-demand pool over-committed by prompts must evict when decodes grow into
    # it; the share of requests whose whole context cannot be held is preempted once.
    full_need = at(curve.running) * (work.input_len + work.output_len)
    preempt = max(0.0, 1.0 - kv_tokens / full_need) if full_need > 0 else 0.0
    return OperatingPoint(
        x=x,
        queue_s=queue,
        iteration_s=at(curve.iteration_s),
        decode_only_s=at(curve.decode_only_s),
        own_prefill_s=at(curve.own_prefill_s),
        prefill_iterations=at(curve.prefill_iterations),
        running=at(curve.running),
        kv_occupancy=min(used / kv_tokens, 1.0) if kv_tokens > 0 else 1.0,
        preemptions_per_request=preempt,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + max(work.output_len - 1.0, 0.0) * tpot,
        saturated=saturated,
        tokens_per_iteration=curve.tokens_per_iteration,
    )


PERCENTILES = (50, 90, 99)

STEADY_LEVELS = 1000
"""The steady state's distribution is tabulated at the levels ``j / 1000`` (``j = 1..999``)
when a start burst is mixed in: p50, p90 and p99 are table points, and its CDF is linear in
between (TTFT is linear in the level but for the prompt-length term)."""

BURST_POINTS = 16
"""Most points of a start burst's TTFT the end-to-end mixture crosses with the steady decode
table (its quantiles at equal weights); the TTFT mixture keeps every cohort."""

E2E_GRID = 200
"""Evenly spaced points at which the end-to-end mixture's CDF is evaluated, besides every
fifth level of the steady table (which holds p50, p90 and p99)."""

LEVELS = np.arange(1, STEADY_LEVELS) / STEADY_LEVELS
_LEVEL_Z = np.array([NormalDist().inv_cdf(float(u)) for u in LEVELS])  # once, at import
# The table as a CDF: all mass between its first and last points (the 0.1 % beyond each end is
# folded in), so a gap above the steady state stays a gap.
_CDF_LEVELS = np.concatenate([[0.0], LEVELS[1:-1], [1.0]])


@dataclass(frozen=True, slots=True, kw_only=True)
class StartBurst:
    """A closed-loop benchmark's first round: ``share`` (C / N) of the measured requests arrive
    together on a drained engine and wait ``ttft_s`` (weights ``weight``: requests per value)
    for their first token instead of the steady state's TTFT; their decode is the steady
    state's."""

    ttft_s: np.ndarray
    weight: np.ndarray
    share: float


def quantiles_of_cdf(x: np.ndarray, cdf: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``inf {x : F(x) >= q}`` for a CDF tabulated at sorted ``x`` (``cdf`` nondecreasing),
    linear between points; an atom is a jump, two points at one ``x``. The one rule for every
    percentile the serving model reports: on weighted samples it is the inverse of their
    empirical CDF (Hyndman & Fan 1996, definition 1), so a cohort of identical requests gives
    its own value, as a benchmark's percentile over its requests does; on a tabulated
    continuous distribution it is exact at the table's levels. A tie (``q`` exactly the mass
    up to a value, e.g. p90 with a burst of 10 %) takes the lower value, as that inverse does."""
    qq = np.asarray(q, dtype=float) * cdf[-1] * (1.0 - 1e-12)
    i = np.clip(np.searchsorted(cdf, qq, side="left"), 1, len(cdf) - 1)
    f0, f1 = cdf[i - 1], cdf[i]
    t = np.clip(np.where(f1 > f0, (qq - f0) / np.where(f1 > f0, f1 - f0, 1.0), 1.0), 0.0, 1.0)
    return x[i - 1] + t * (x[i] - x[i - 1])


def weighted_quantiles(values: np.ndarray, weights: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Quantiles ``q`` (in [0, 1]) of weighted values by :func:`quantiles_of_cdf`."""
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    keep = w > 0.0
    order = np.argsort(v[keep], kind="stable")
    v, w = v[keep][order], w[keep][order]
    cum = np.cumsum(w)
    # each value is a jump from the mass below it to the mass up to it
    return quantiles_of_cdf(np.repeat(v, 2), np.stack([cum - w, cum], axis=1).ravel(), q)


def _atoms_cdf(
    atoms: np.ndarray, weights: np.ndarray, x: np.ndarray, side: Literal["left", "right"]
) -> np.ndarray:
    """Mass of sorted ``atoms`` at or below ``x`` (``side="right"``) or below it ("left")."""
    cum = np.concatenate([[0.0], np.cumsum(weights)])
    return cum[np.searchsorted(atoms, x, side=side)]


def _burst_ttft_cdf(
    steady: np.ndarray, share: float, atoms: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(x, CDF) of TTFT: ``1 - share`` of the requests at the steady quantiles ``steady`` (at
    :data:`LEVELS`), ``share`` at the burst's sorted ``atoms`` (weights summing to one)."""
    n = len(atoms)
    x = np.concatenate([steady, atoms, atoms])
    right = np.concatenate([np.ones(len(steady), bool), np.zeros(n, bool), np.ones(n, bool)])
    order = np.lexsort((right, x))  # by x; at an atom its left limit first
    x, right = x[order], right[order]
    burst = np.where(
        right, _atoms_cdf(atoms, weights, x, "right"), _atoms_cdf(atoms, weights, x, "left")
    )
    return x, (1.0 - share) * np.interp(x, steady, _CDF_LEVELS, 0.0, 1.0) + share * burst


def _burst_e2e_cdf(
    steady: np.ndarray, decode: np.ndarray, share: float, atoms: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(x, CDF) of e2e: ``1 - share`` at the steady quantiles ``steady``, ``share`` at a burst
    TTFT (``atoms``) plus an independent steady decode time (quantiles ``decode``)."""
    lo = min(float(steady[0]), float(atoms[0] + decode[0]))
    hi = max(float(steady[-1]), float(atoms[-1] + decode[-1]))
    x = np.unique(np.concatenate([steady[4::5], np.linspace(lo, hi, E2E_GRID)]))
    shifted = x[None, :] - atoms[:, None]
    cdf = np.interp(shifted.ravel(), decode, _CDF_LEVELS, 0.0, 1.0).reshape(shifted.shape)
    burst = weights @ cdf
    return x, (1.0 - share) * np.interp(x, steady, _CDF_LEVELS, 0.0, 1.0) + share * burst


def _lognormal(cv: float, z: np.ndarray) -> np.ndarray:
    """:func:`lognormal_factor` at every ``z``."""
    if cv <= 0:
        return np.ones_like(z)
    s2 = float(np.log1p(cv * cv))
    return np.exp(-s2 / 2.0 + np.sqrt(s2) * z)


def _steady(
    p: OperatingPoint, work: Workload, rate_per_iteration: float, u: np.ndarray, z: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TTFT, TPOT, decode time = e2e - TTFT) of the steady state at quantile levels ``u``
    (``z`` their standard-normal scores). TTFT spreads by where in the iteration in flight a
    request lands (uniform over one iteration) and by its prompt length (own prefill
    iterations in proportion, compute-bound); a request's TPOT averages its OSL-1 iterations,
    of which a Poisson number (mean = others' prompts arriving meanwhile) carry a prefill. The
    terms are taken at the same level (comonotone)."""
    own = p.own_prefill_s * p.prefill_iterations
    ttft = p.ttft_s + (u - 0.5) * p.iteration_s + own * (_lognormal(work.input_cv, z) - 1.0)
    if work.output_len <= 1.0:  # no token after the first: no TPOT, no decode (load_curve)
        return ttft, np.zeros_like(u), np.zeros_like(u)
    steps = max(work.output_len - 1.0, 1.0)
    # Speculative decoding: a request's decode spans steps / E iterations of E tokens each.
    per_it = p.tokens_per_iteration
    iterations = steps / per_it
    extra = max(p.own_prefill_s - p.decode_only_s, 0.0)
    m = max(rate_per_iteration * iterations, 0.0)
    floor = p.decode_only_s / per_it
    if m > 0:
        tpot = floor + np.maximum(m + z * np.sqrt(m), 0.0) * extra / steps
        spread_mean = floor + m * extra / steps
    else:
        tpot = np.full_like(u, p.tpot_s)
        spread_mean = p.tpot_s
    tpot = np.where(u > 0.5, np.maximum(tpot, floor), tpot)
    # Every request shares the iterations it runs in, so the mean of the requests' TPOTs is the
    # mean iteration per token (``p.tpot_s``); the spread above is centred lower where the mean
    # carries what this rank's own decode-only and prefill iterations do not: with attention-DP
    # ranks in lockstep every iteration lasts as long as the fullest rank's
    # (``adp_lockstep.lockstep_mix``; 5-33% for DeepSeek-R1 TP8-EP8-DP-attn8), and near the
    # capacity iterations carrying several prompts (1.5%, Llama-3.1-70B FP8 on one H200 at 15
    # req/s). Each of a request's iterations carries its share of that excess, so it shifts every
    # quantile. Flooring only the quantiles above the median at the mean left the median 31%
    # under the mean and p90 = p99 = the mean (DeepSeek-R1 TP8-EP8-DP-attn8, H200, 4 req/s).
    tpot = tpot + max(p.tpot_s - spread_mean, 0.0)
    decode = np.maximum(steps * _lognormal(work.output_cv, z), 0.0) * tpot
    return ttft, tpot, decode


def steady_tables(
    p: OperatingPoint, work: Workload, rate_per_iteration: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(TTFT, TPOT, decode time) of the steady state at :data:`LEVELS` (:func:`_steady`)."""
    return _steady(p, work, rate_per_iteration, LEVELS, _LEVEL_Z)


def burst_mixture_quantiles(
    ttft: np.ndarray, decode: np.ndarray, burst: StartBurst, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles ``q`` of TTFT and e2e of a run whose steady requests have TTFT ``ttft`` and
    decode time ``decode`` (tables at :data:`LEVELS`, taken at the same level) and whose
    first ``burst.share`` of requests wait the burst's TTFT, then decode like the others."""
    share = min(burst.share, 1.0)
    order = np.argsort(burst.ttft_s, kind="stable")
    atoms = np.asarray(burst.ttft_s, dtype=float)[order]
    w = np.asarray(burst.weight, dtype=float)[order]
    w = w / w.sum()
    ttft_q = quantiles_of_cdf(*_burst_ttft_cdf(ttft, share, atoms, w), q)
    if atoms.size > BURST_POINTS:
        atoms = weighted_quantiles(atoms, w, (np.arange(BURST_POINTS) + 0.5) / BURST_POINTS)
        w = np.full(BURST_POINTS, 1.0 / BURST_POINTS)
    e2e_q = quantiles_of_cdf(*_burst_e2e_cdf(ttft + decode, decode, share, atoms, w), q)
    return ttft_q, e2e_q


def percentiles(
    p: OperatingPoint,
    work: Workload,
    rate_per_iteration: float,
    burst: StartBurst | None = None,
) -> dict[str, float]:
    """p50/p90/p99 of TTFT, TPOT and e2e of the steady state at ``p`` (:func:`_steady`), or,
    with a ``burst``, of the benchmark's mixture that the mean TTFT also counts: ``share`` of
    the requests at the burst's TTFT, the rest at the steady state's (:func:`quantiles_of_cdf`
    of their mixture). A burst request's e2e is its burst TTFT plus a steady decode time (independent);
    TPOT is the steady state's for every request."""
    qs = np.array(PERCENTILES, dtype=float) / 100.0
    z = np.array([Z[q] for q in PERCENTILES])
    ttft, tpot, decode = _steady(p, work, rate_per_iteration, qs, z)
    e2e = ttft + decode
    if burst is not None and burst.share > 0.0:
        s_ttft, _, s_dec = steady_tables(p, work, rate_per_iteration)
        ttft, e2e = burst_mixture_quantiles(s_ttft, s_dec, burst, qs)
    out: dict[str, float] = {}
    for i, q in enumerate(PERCENTILES):
        out[f"ttft_p{q}"] = float(ttft[i])
        out[f"tpot_p{q}"] = float(tpot[i])
        out[f"e2e_p{q}"] = float(e2e[i])
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefillCurve:
    """A prefill-only worker rank at each arrival rate: batches the prompts that arrived during
    the previous iteration (DistServe, Zhong et al. OSDI'24, Sec. 3: prefill instances batch to
    the token budget)."""

    x: np.ndarray
    iteration_s: np.ndarray
    ttft_s: np.ndarray
    feasible: np.ndarray
    capacity: float = float("inf")
    """Most requests/s the rank prefills: full token-budget iterations back to back."""
    chunks: float = 1.0
    """Iterations one prompt's prefill spans: 1, or ``ceil(prompt / budget)`` when chunked
    prefill splits a prompt longer than the token budget (:func:`_chunk_tokens`)."""


def prefill_curve(
    it: IterationModel, eng: EngineProfile, work: Workload, x: np.ndarray
) -> PrefillCurve:
    """Parametrized by the prompt tokens ``b`` of one iteration: ``x = b / (ISL T(b))``; the
    curve is resampled at the throughputs ``x``."""
    new_tokens = max(work.input_len * (1.0 - work.prefix_hit), 1.0)
    # SGLang's --max-prefill-tokens binds a prefill worker's batches too: its event loop builds
    # them with the aggregated scheduler's get_new_batch_prefill / PrefillAdder (v0.5.1 and
    # v0.5.9 disaggregation/prefill.py event_loop_*_disagg_prefill), no decodes beside them.
    # With chunked prefill a prompt longer than the budget runs as budget-sized chunks, one
    # iteration each with its own fixed costs, as in the aggregated model (_chunk_tokens, the
    # ``k_p`` of load_curve): SGLang's prefill workers build their batches with the same
    # PrefillAdder, which truncates a prompt to ``rem_chunk_tokens`` and carries the rest as
    # ``chunked_req`` into the next batch (v0.5.9 managers/schedule_policy.py add_one_req /
    # add_chunked_req; disaggregation/prefill.py sends it with send_kv_chunk(last_chunk=False)).
    chunk = float(_chunk_tokens(eng, np.zeros(1), new_tokens)[0])
    chunks = float(np.ceil(new_tokens / chunk))
    whole = float(prefill_batch_prompts(eng, np.zeros(1), new_tokens)[0]) * new_tokens
    budget = max(min(float(eng.max_num_batched_tokens), whole), chunk)
    b = np.geomspace(new_tokens * 1e-3, budget, GRID)
    zeros = np.zeros_like(b)
    half = np.full_like(b, work.input_len / 2.0)
    t_b = it.time_s(zeros, zeros, np.maximum(b, chunk), half)
    x_b = np.maximum.accumulate(b / (new_tokens * t_b))
    xs = np.asarray(x, dtype=float)
    t = np.interp(xs, x_b, t_b)
    feasible = xs <= x_b[-1]
    delay = t * (0.5 + (1.0 if eng.overlap_scheduler else 0.0))
    return PrefillCurve(
        x=xs,
        iteration_s=t,
        ttft_s=delay + chunks * t + eng.request_overhead_ms * 1e-3,
        feasible=feasible,
        capacity=float(x_b[-1]),
        chunks=chunks,
    )
