"""Prior spreads of the one-run calibration estimated from other stacks (empirical Bayes).

:func:`gpuscale.planner.calibrate_run.calibrate_run` splits a run's log-throughput gap over the
quantities in proportion to ``elasticity x sigma^2``. The sourced :data:`~gpuscale.planner.
calibrate_run.SIGMA` says how far each quantity differs between stacks from published
per-stack benchmarks (``catalog/data/calibration_priors.yaml``); this module asks the measured
runs of *other* stacks instead.

The model (a hierarchical, random-effects one): stack ``s`` differs from the profile by
``x_s = ln(speed factors)``, one per quantity, ``x_sk ~ N(0, v_k)`` independently; each of its runs
``r`` has gap ``g_sr = ln(measured step / predicted step) = -sum_k e_srk x_sk + eps_sr`` to first
order (``e_srk`` the run's elasticities, :func:`~gpuscale.planner.calibrate_run.run_elasticities`),
with ``eps_sr ~ N(0, tau^2)`` the part of the model's error that is not the stack's (it changes
from run to run). So the gaps of one stack are jointly ``N(0, E_s diag(v) E_s^T + tau^2 I)``: runs
of a stack that differ in what they stress (attention share, node count, model width) are what
separates the quantities. ``v`` and ``tau^2`` are the maximum of that marginal likelihood times a
prior on ``v``, found by expectation-maximisation for variance components (Dempster, Laird and
Rubin 1977, JRSS B 39:1, Sec. 4.4; the random-effects case, Laird and Ware 1982, Biometrics
38:963, Sec. 3): the E-step is each stack's Gaussian posterior of ``x_s`` (mean ``m_s``, covariance
``P_s``), the M-step ``v_k = (sum_s (m_sk^2 + P_skk) + w sigma_k^2) / (S + w)`` and
``tau^2 = sum_s (|g_s - E_s m_s|^2 + tr(E_s P_s E_s^T)) / N``.

The prior is the sourced spread, worth :data:`PRIOR_WEIGHT` stacks (a scaled inverse-chi-square
prior on ``v_k`` whose mode is ``SIGMA_k^2``; Gelman et al., *Bayesian Data Analysis*, 3rd ed.,
Sec. 2.6): a quantity that no stack's runs inform (its elasticity 0 everywhere) keeps its sourced
spread exactly, and one is never set to zero spread without evidence. A stack whose runs barely
depend on a quantity hands its prior back (``m ~ 0``, ``P ~ v``): it neither raises nor lowers it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpuscale.errors import InputError
from gpuscale.planner.calibrate_run import QUANTITIES, SIGMA

PRIOR_WEIGHT = 2.0
"""How many stacks' worth of evidence the sourced spread counts as: the weakest prior whose
mode is the sourced value and that a couple of stacks can overrule (fixed before any held-out
error was looked at; benchmarks/calibrate_prior.py prints the figures at 1 and 4 as well)."""

ROBUST_DOF = 4.0
"""Degrees of freedom of the Student-t run-to-run residual when ``robust=True``: the value
Lange, Little and Taylor (1989, JASA 84:881, Sec. 2) recommend when it is not estimated. A
Gaussian residual lets one run the model misses by 30% (llm-foundry's 70B at 64 A100-40GB)
set a between-stack spread; the t residual down-weights it (the scale-mixture EM, ibid. Sec. 3)."""

MIN_NOISE = 1e-4
"""Floor of the run-to-run residual spread tau (0.01% in step): the gaps are rounded published
figures (3-4 significant digits), so no stack is known better than that."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StackRuns:
    """The measured runs of one stack, as the estimator reads them."""

    gaps: tuple[float, ...]
    """``ln(measured step / predicted step)`` per run, under the uncalibrated profile."""
    elasticities: tuple[Mapping[str, float], ...]
    """Per run, ``|d ln(step) / d ln(quantity)|`` for every quantity (missing: 0)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Spreads:
    """The estimated spreads and what they came from."""

    sigma: dict[str, float]
    """Per quantity, the posterior-mode between-stack spread (log scale, one SD)."""
    noise: float
    """``tau``: the run-to-run residual spread within a stack."""
    stacks: int
    runs: int
    iterations: int
    prior_weight: float


def empirical_spreads(
    stacks: Sequence[StackRuns],
    *,
    prior: Mapping[str, float] = SIGMA,
    prior_weight: float = PRIOR_WEIGHT,
    robust: bool = False,
    max_iterations: int = 5000,
    tolerance: float = 1e-9,
) -> Spreads:
    """The spreads ``sigma_k = sqrt(v_k)`` that maximise the stacks' marginal likelihood times the
    prior (module docstring). ``prior``: a spread per quantity of :data:`QUANTITIES`.
    ``robust``: the run-to-run residual is Student-t (:data:`ROBUST_DOF`) instead of Gaussian,
    each run weighted by ``(nu + 1) / (nu + r^2 / tau^2)`` in the EM (Lange et al. 1989)."""
    if set(prior) != set(QUANTITIES) or not all(v > 0 for v in prior.values()):
        raise InputError(
            f"the prior needs a positive spread for each of {', '.join(QUANTITIES)}",
            field="prior",
        )
    if prior_weight <= 0:
        raise InputError("the prior weight must be positive (stacks)", field="prior_weight")
    data = []
    for stack in stacks:
        if len(stack.gaps) != len(stack.elasticities):
            raise InputError("one elasticity set per gap", field="stacks")
        if not stack.gaps:
            continue
        g = np.asarray(stack.gaps, dtype=float)
        e = np.array([[float(el.get(q, 0.0)) for q in QUANTITIES] for el in stack.elasticities])
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(e))):
            raise InputError("gaps and elasticities must be finite", field="stacks")
        data.append((g, e))
    s0 = np.array([prior[q] ** 2 for q in QUANTITIES])
    v = s0.copy()
    n_runs = sum(len(g) for g, _ in data)
    # Start the residual at the gaps' mean square: everything unexplained.
    tau2 = max(float(np.mean(np.concatenate([g for g, _ in data]) ** 2)) if data else 0.0, 1e-6)
    weights = [np.ones(len(g)) for g, _ in data]
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (reported)
        second = np.zeros(len(QUANTITIES))
        residual = 0.0
        for i, (g, e) in enumerate(data):
            # E-step: the stack's posterior of x (sign-free: e enters squared in what is kept).
            w = weights[i]
            precision = e.T @ (e * w[:, None]) / tau2 + np.diag(1.0 / v)
            cov = np.linalg.inv(precision)
            mean = cov @ e.T @ (w * g) / tau2
            second += mean**2 + np.diag(cov)
            fit = g - e @ mean
            expected = fit**2 + np.einsum("rk,kl,rl->r", e, cov, e)
            residual += float(w @ expected)
            if robust:
                weights[i] = (ROBUST_DOF + 1.0) / (ROBUST_DOF + expected / tau2)
        new_v = (second + prior_weight * s0) / (len(data) + prior_weight)
        new_tau2 = max(residual / n_runs, MIN_NOISE**2) if n_runs else MIN_NOISE**2
        done = (
            np.max(np.abs(np.log(new_v / v))) < tolerance
            and abs(math.log(new_tau2 / tau2)) < tolerance
        )
        v, tau2 = new_v, new_tau2
        if done:
            break
    return Spreads(
        sigma={q: float(math.sqrt(v[i])) for i, q in enumerate(QUANTITIES)},
        noise=math.sqrt(tau2),
        stacks=len(data),
        runs=n_runs,
        iterations=iterations,
        prior_weight=prior_weight,
    )
