"""Speculative decoding (MTP) in the serving model: the accepted-length formula, the cost of a
verification and of the draft passes, and TPOT within its physical bounds."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.api.speculative import speculation
from gpuscale.catalog.serving_engines import engine
from gpuscale.catalog.speculative import draft_module
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.costmodel.serving.speculative import (
    Speculation,
    acceptance_for_length,
    tokens_per_iteration,
)
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model, kv_pool
from gpuscale.planner.serving.steady_state import Workload

R1 = "deepseek-ai/DeepSeek-R1"
LOAD = {
    "gpu": "h200-sxm", "engine": "tensorrt-llm", "tp": 8, "ep": 8,
    "input_len": 1024, "output_len": 1024,
}  # fmt: skip


def _it(spec: Speculation | None = None):  # type: ignore[no-untyped-def]
    eng = engine("tensorrt-llm").for_device(catalog.gpu("h200-sxm"))
    return _iteration_model(
        catalog.model(R1),
        catalog.cluster("h200-sxm", 8),
        Parallelism(tp=8, ep=8),
        weight_format("fp8_block"),
        "fp8",
        load_profile_for(eng.cost_profile, None),
        eng,
        spec,
    )


def test_accepted_length_by_hand() -> None:
    # E = 1 + a + a^2 + a^3 (Leviathan et al. 2023, Eq. 1)
    assert tokens_per_iteration(0.5, 3) == pytest.approx(1.875)
    assert tokens_per_iteration(0.0, 3) == 1.0 and tokens_per_iteration(1.0, 3) == 4.0
    assert tokens_per_iteration(0.9, 1) == pytest.approx(1.9)


@given(st.integers(1, 8), st.floats(0.0, 1.0))
def test_published_length_round_trips(k: int, a: float) -> None:
    length = tokens_per_iteration(a, k)
    assert tokens_per_iteration(acceptance_for_length(length, k), k) == pytest.approx(length)


def test_default_acceptance_is_the_published_figure() -> None:
    # TensorRT-LLM tech blog 1: 1.92 / 2.58 / 2.82 tokens per iteration at MTP 1 / 2 / 3
    spec = catalog.model(R1)
    for k, length in ((1, 1.92), (2, 2.58), (3, 2.82)):
        s = speculation(spec, "mtp", k)
        assert s is not None and s.tokens_per_iteration == pytest.approx(length)
    assert draft_module("mtp", "deepseek-v3") is draft_module("mtp", "deepseek-r1")
    # k = 1: the DeepSeek-V3 report's 85-90% acceptance of the second token, near the blog's 0.92
    one = speculation(spec, "mtp", 1)
    assert one is not None and 0.85 <= one.acceptance <= 0.95


def test_bad_options_are_input_errors() -> None:
    spec = catalog.model(R1)
    for kw in (
        {"speculative": "eagle", "draft_tokens": 3},
        {"speculative": "mtp"},
        {"speculative": "mtp", "draft_tokens": 0},
        {"speculative": "mtp", "draft_tokens": 3, "acceptance": 1.5},
        {"speculative": "none", "draft_tokens": 3},
        {"speculative": "mtp", "draft_tokens": 9},  # no published figure at 9
    ):
        with pytest.raises(InputError):
            speculation(spec, **kw)  # type: ignore[arg-type]
    with pytest.raises(InputError):
        speculation(catalog.model("llama3.1-8b"), "mtp", 3, 0.8)  # no MTP module


def test_verification_costs_more_than_a_plain_step_and_less_than_k_plus_one() -> None:
    k = 3
    plain, spec = _it(), _it(Speculation(draft_tokens=k, acceptance=0.77))
    n = np.array([1.0, 4.0, 16.0, 64.0])
    ctx = np.full_like(n, 1536.0)
    z = np.zeros_like(n)
    t0, t1 = plain.time_s(n, ctx, z, z), spec.time_s(n, ctx, z, z)
    draft = spec.draft_s(n, ctx, z, z)
    assert np.all(draft > 0) and np.all(t1 > t0 + draft * 0.999)
    # The weights are read once for all k + 1 positions: far cheaper than k + 1 plain steps.
    assert np.all(t1 < (k + 1) * t0)
    # The k chained draft passes run one block each: a small share of the 61-layer forward.
    assert np.all(draft < 0.25 * t0)


def test_tpot_falls_within_physical_bounds() -> None:
    plain = infer(R1, concurrency=4, **LOAD).to_dict()["options"][0]
    for k in (1, 2, 3):
        o = infer(R1, concurrency=4, speculative="mtp", draft_tokens=k, **LOAD).to_dict()
        o = o["options"][0]
        e = o["tokens_per_iteration"]
        # Never below the plain TPOT over E (a verification costs at least a plain step), and
        # below the plain TPOT (the weight-bound decode pays for the drafts at light load).
        assert plain["tpot_ms"] / e < o["tpot_ms"] < plain["tpot_ms"]
        assert o["draft_tokens"] == k and o["speculative"] == "mtp"
    # no speculation: the JSON keeps its keys
    assert "speculative" not in plain


def test_acceptance_zero_only_costs_and_one_is_the_limit() -> None:
    plain = infer(R1, concurrency=4, **LOAD).to_dict()["options"][0]["tpot_ms"]
    zero = infer(R1, concurrency=4, speculative="mtp", draft_tokens=3, acceptance=0.0, **LOAD)
    full = infer(R1, concurrency=4, speculative="mtp", draft_tokens=3, acceptance=1.0, **LOAD)
    assert zero.to_dict()["options"][0]["tpot_ms"] > plain
    assert full.to_dict()["options"][0]["tpot_ms"] < zero.to_dict()["options"][0]["tpot_ms"] / 3.5


def test_draft_module_holds_weights_and_kv() -> None:
    s = Speculation(draft_tokens=3, acceptance=0.77)
    eng = engine("tensorrt-llm").for_device(catalog.gpu("h200-sxm"))
    args = (
        catalog.model(R1), catalog.cluster("h200-sxm", 8), Parallelism(tp=8, ep=8),
        weight_format("fp8_block"), "fp8", load_profile_for(eng.cost_profile, None), eng,
        Workload(input_len=1024, output_len=1024),
    )  # fmt: skip
    kv0, w0, _ = kv_pool(*args)
    kv1, w1, _ = kv_pool(*args, s)
    # One more MoE block of FP8 weights (~11 GB over 8 GPUs) and one more layer of MLA latent.
    assert 0.8 < (w1 - w0) < 2.0
    assert kv1 < kv0 * 61 / 61.5


def test_disaggregated_speculation_runs_on_the_decode_workers() -> None:
    disagg = {
        "prefill_workers": 1, "prefill_tp": 8, "prefill_ep": 8,
        "decode_workers": 2, "decode_tp": 8, "decode_ep": 8,
    }  # fmt: skip
    base = {k: v for k, v in LOAD.items() if k not in ("tp", "ep")}
    plain = infer(R1, concurrency=32, **base, **disagg).to_dict()["options"][0]
    mtp = infer(R1, concurrency=32, speculative="mtp", draft_tokens=3, **base, **disagg)
    o = mtp.to_dict()["options"][0]
    assert o["tpot_ms"] < plain["tpot_ms"] and o["tokens_per_iteration"] == pytest.approx(2.82)
    # the prompt's draft pass makes the prefill a little longer, not shorter
    assert o["ttft_ms"] >= plain["ttft_ms"] * 0.99


def test_cohort_simulation_finishes_in_fewer_iterations() -> None:
    # fixed lengths take the cohort simulation: the request ends after ceil(1023 / E) steps
    plain = infer(R1, concurrency=2, **LOAD).to_dict()["options"][0]
    mtp = infer(R1, concurrency=2, speculative="mtp", draft_tokens=3, **LOAD).to_dict()
    o = mtp["options"][0]
    assert "cohorts" in " ".join(o["notes"]) and "cohorts" in " ".join(plain["notes"])
    ratio = o["tpot_ms"] / plain["tpot_ms"]
    it_ratio = o["iteration_ms"] / plain["iteration_ms"]
    assert ratio == pytest.approx(it_ratio / 2.82, rel=0.02)


def test_speculation_is_a_frozen_value() -> None:
    s = Speculation(draft_tokens=2, acceptance=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.draft_tokens = 3  # type: ignore[misc]
    with pytest.raises(InputError):
        Speculation(draft_tokens=2, acceptance=-0.1)
