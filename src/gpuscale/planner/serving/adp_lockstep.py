"""Attention-DP ranks of an MoE engine step together: the steady state's iteration mix when an
iteration lasts as long as its fullest rank.

Why. Under attention data parallelism every rank runs its own requests through attention, but
the MoE layers gather and scatter (or all-to-all) the tokens of every rank in every layer, so
no rank finishes an iteration before the slowest one, and a rank with nothing scheduled runs a
dummy forward to take part: TensorRT-LLM's CUTLASS MoE all-gathers ``all_rank_num_tokens``
before ``fused_moe`` and reduce-scatters after (``fused_moe_cutlass.py`` at 000a01de), and its
executor pads an idle rank with a dummy request (``PyExecutor._pad_attention_dp_dummy_request``);
vLLM: "Forward passes must be aligned, and expert layers across all ranks are required to
synchronize during every forward pass ... empty 'dummy' forward passes are performed in all
ranks that don't currently have any requests scheduled" (docs/serving/
data_parallel_deployment.md, v0.12.0). The per-rank steady state (``steady_state.
iteration_mix``) mixes only a rank's own prompt-carrying iterations with its decode-only
ones; with ``R`` ranks in step, a rank's iteration carries prompts whenever any rank's does.

Two schedules of the prompts, by the engine's launch:

- *No balancing* (the engine default): each rank's prompts arrive on their own (requests are
  dealt to the ranks evenly by count, TensorRT-LLM ``_balance_requests_across_ranks``: a heap
  on the ranks' active tokens among those below the expected count), so a share ``f`` of a
  rank's iterations carrying a prompt becomes ``1 - (1 - f)^R`` of the common iterations.
- *TensorRT-LLM ``attention_dp_config.enable_balance``* (``timeout_iters``): context requests
  are held until every rank has one or the timeout has passed since the last release
  (``PyExecutor._balance_adp_requests``, TensorRT-LLM 1.1; ``steady_state.adp_balance_wait_s``
  prices the hold), then every rank's held prompts run in the same iteration. One release per
  cycle of ``E[F]`` iterations; a rank holds the prompts that reached it in the cycle, Poisson of
  mean ``m = a E[F]`` (``a`` its prompts per iteration; Wald's identity gives the mean, the
  Poisson shape is the approximation), and the release runs as many iterations as its fullest
  rank needs, ``E[max_r ceil(X_r / c)]`` with ``c`` the whole prompts a rank's token budget
  takes beside its decodes (no chunked prefill), each carrying ``min(E[max_r X_r], c)`` prompts
  on that rank. A released prompt waits on average for half the release's other iterations.
"""

from __future__ import annotations

import numpy as np

from gpuscale.catalog.serving_engines import EngineProfile
from gpuscale.costmodel.serving.iteration import IterationModel

DUMMY_DECODE_TOKENS = 1
"""Tokens of the dummy forward an idle rank runs while another rank of its group has work:
vLLM 0.12.0 ``DPEngineCoreProc.run_busy_loop`` calls ``execute_dummy_batch`` when its own step
executed nothing while the group is running, and the worker runs ``_dummy_run(1,
uniform_decode=True)`` (``v1/worker/gpu_worker.py``), a one-token decode; TensorRT-LLM's
``_pad_attention_dp_dummy_request`` adds one generation request."""


def in_step(it: IterationModel) -> bool:
    """Whether the attention-DP ranks of one engine step together: more than one rank and an
    MoE model (the gather/scatter or all-to-all of every MoE layer spans the ranks; a dense
    model's DP ranks share nothing per layer)."""
    return it.par.attention_dp > 1 and it.model.is_moe


def step_time_s(rank_times_s: list[float | None], dummy_s: float) -> float:
    """One iteration of ranks in step: as long as its fullest rank's own iteration, an idle rank
    (``None``) taking part with the dummy forward (:data:`DUMMY_DECODE_TOKENS`). vLLM 0.12.0
    also pads every rank's batch to the largest across the group under CUDA graphs
    (``coordinate_batch_across_dp``, ``num_tokens_across_dp`` = the max when
    ``allow_dp_padding``, ``v1/worker/dp_utils.py``), so no rank ends before the fullest one.
    The one rule of the ranks in step: :func:`lockstep_mix` takes its expectation over the
    steady state's per-rank mix, ``cohort_sim`` applies it per simulated iteration."""
    return max([dummy_s if t is None else t for t in rank_times_s])


POISSON_TERMS = 512
"""Terms of the Poisson distributions summed: far past any cycle's mean count here (a rank
receives at most a few prompts per iteration for at most ``timeout_iters`` iterations)."""


def _poisson_cdf(mean: np.ndarray) -> np.ndarray:
    """``P(X <= k)`` for ``k = 0 .. POISSON_TERMS - 1``, one row per mean."""
    m = np.maximum(np.atleast_1d(np.asarray(mean, dtype=float)), 1e-300)
    k = np.arange(POISSON_TERMS, dtype=float)
    logfact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1.0, POISSON_TERMS)))])
    pmf = np.exp(k * np.log(m[:, None]) - m[:, None] - logfact)
    return np.clip(np.cumsum(pmf, axis=1), 0.0, 1.0)


def expected_max_poisson(mean: np.ndarray, ranks: int, per: np.ndarray | float = 1.0) -> np.ndarray:
    """``E[max_r ceil(X_r / per)]`` over ``ranks`` independent Poisson counts of mean ``mean``
    (``per = 1``: the largest count): ``sum_{j >= 1} (1 - P(X <= (j - 1) per)^ranks)``."""
    m = np.atleast_1d(np.asarray(mean, dtype=float))
    c = np.maximum(np.broadcast_to(np.asarray(per, dtype=float), m.shape), 1.0)
    cdf = _poisson_cdf(m)
    j = np.arange(1, POISSON_TERMS + 1, dtype=float)
    idx = np.minimum(((j[None, :] - 1.0) * c[:, None]).astype(int), POISSON_TERMS - 1)
    below = np.take_along_axis(cdf, idx, axis=1)
    # Past the last term the cdf is 1: the sum's terms vanish there.
    return np.asarray((1.0 - below**ranks).sum(axis=1))


def balance_cycle_iterations(rate: np.ndarray, ranks: int, timeout_iters: float) -> np.ndarray:
    """Mean iterations from one balanced release to the next, ``E[min(max_r T_r, timeout)]``
    with ``T_r`` each rank's first arrival (exponential at ``rate`` per iteration), the
    integral of ``P(some rank has none by t) = 1 - (1 - e^(-rate t))^ranks`` up to the timeout
    (the ``prompts`` integral of ``steady_state.adp_balance_wait_s``, in iterations); at least
    one iteration."""
    r = np.maximum(np.atleast_1d(np.asarray(rate, dtype=float)), 1e-30)
    upper = np.minimum(float(timeout_iters), (np.log(ranks) + 40.0) / r)
    u = upper[:, None] * np.linspace(0.0, 1.0, 513)
    survival = 1.0 - (1.0 - np.exp(-r[:, None] * u)) ** ranks
    return np.maximum(np.trapezoid(survival, u, axis=1), 1.0)


def lockstep_mix(
    it: IterationModel,
    eng: EngineProfile,
    n: np.ndarray,
    ctx: np.ndarray,
    half: np.ndarray,
    new_tokens: float,
    prompts_per_iteration: np.ndarray,
    mean: np.ndarray,
    with_prompt: np.ndarray,
    decode_only: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(mean iteration, a prompt's own iteration(s)) of one of ``R = attention_dp`` ranks in
    step, from the per-rank mix of ``steady_state.iteration_mix`` (``mean`` of a rank alone,
    ``with_prompt``, ``decode_only``) at ``prompts_per_iteration`` new prompts per rank per
    iteration. Unchanged with one rank, for a dense model (no collective in every layer), or
    without prompts."""
    ranks = it.par.attention_dp
    a = np.asarray(prompts_per_iteration, dtype=float)
    if not in_step(it) or new_tokens <= 0.0:
        return mean, with_prompt
    # A rank's share of prompt-carrying iterations, as ``iteration_mix`` weighs them.
    share = np.clip((mean - decode_only) / np.maximum(with_prompt - decode_only, 1e-30), 0.0, 1.0)
    # ``step_time_s`` in expectation: the common iteration carries a prompt (and lasts as long
    # as a prompt-carrying rank's) unless no rank's does.
    free = (1.0 - (1.0 - share) ** ranks) * (with_prompt - decode_only) + decode_only
    if eng.adp_balance_timeout_iters <= 0:
        return np.asarray(free), with_prompt
    cycle = balance_cycle_iterations(a, ranks, float(eng.adp_balance_timeout_iters))
    held = a * cycle
    # Whole prompts a rank's token budget takes beside its decodes (TensorRT-LLM counts each
    # decode's positions in max_num_tokens; a first prompt always fits).
    room = float(eng.max_num_batched_tokens) - n * it.queries
    fits = np.maximum(np.floor(room / max(new_tokens, 1.0)), 1.0)
    releases = np.maximum(expected_max_poisson(held, ranks, fits), 1.0)
    fullest = np.minimum(np.maximum(expected_max_poisson(held, ranks), 1.0), fits)
    release = np.asarray(it.time_s(n, ctx, fullest * new_tokens, half), dtype=float)
    per_release = np.clip(releases / cycle, 0.0, 1.0)
    balanced = (1.0 - per_release) * decode_only + per_release * release
    own = release * (1.0 + (releases - 1.0) / 2.0)
    # The executor holds prompts only while every rank has generation requests (a rank's
    # decoding requests taken as Poisson of mean n, as the hold itself is weighed).
    busy = (1.0 - np.exp(-n)) ** ranks
    t = busy * balanced + (1.0 - busy) * free
    return np.asarray(t), np.asarray(busy * own + (1.0 - busy) * with_prompt)
