"""The SLO search's capacity is resolved, not read off the grid, and resolving only where it can
matter gives the answer of resolving every candidate.

Where the capacity, not the SLO, ends a candidate's walk up its load curve, its goodput on the
grid sits up to a grid step (15%) below the capacity (``steady_state.resolve_capacity``). The
search resolves best-first: a candidate is resolved only while the bound of its next grid load
could still reach a shown place (``planner/serving/search.py``, :func:`rank`). The reference
resolves every candidate; the two must agree on the shown places and their figures. Since branch
search-agree the shown places are priced by ``infer``'s own prediction (``search.price``) rather
than the pre-screen's resolved edge, under the same best-first rule; the pre-screen's grid,
resolved and bound readings are still checked candidate by candidate here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from gpuscale.api import infer
from gpuscale.api import serving_search as ss
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving import search as ps
from gpuscale.planner.serving.search import Candidate, Pricer, Scored, Scorer, rank

CASES: list[tuple[str, dict[str, Any]]] = [
    # capacity-bound disaggregated deployments overtake the grid's winner here
    ("llama3.1-70b", {"gpu": "h200-sxm", "gpus": 8, "weights": "fp8", "slo_ttft_ms": 2000,
                      "slo_tpot_ms": 50}),
    # the README's tour
    ("llama3.1-70b", {"gpu": "h200-sxm", "gpus": 16, "weights": "fp8", "slo_ttft_ms": 500,
                      "slo_tpot_ms": 30}),
    ("llama3.1-8b", {"gpu": "h100-sxm", "gpus": 8, "engine": "tensorrt-llm", "slo_ttft_ms": 500,
                     "slo_tpot_ms": 40}),
    ("qwen3-32b", {"gpu": "h100-sxm", "gpus": 8, "engine": "sglang", "slo_ttft_ms": 1000,
                   "slo_tpot_ms": 30, "input_len": 8192}),
    ("deepseek-r1", {"gpu": "h200-sxm", "gpus": 16, "engine": "sglang", "slo_ttft_ms": 2000,
                     "slo_tpot_ms": 50}),
]  # fmt: skip


def _search(
    monkeypatch: pytest.MonkeyPatch, places: int | None, model: str, kw: dict[str, Any]
) -> tuple[ss.SearchResult, list[Candidate], Scorer]:
    """The API search with ``places`` final (None: every candidate), and its scorer."""
    seen: dict[str, Any] = {}

    def spy(
        cands: list[Candidate], scorer: Scorer, keep: int | None, price_one: Pricer | None = None
    ) -> list[Scored]:
        seen.update(cands=cands, scorer=scorer, pricer=price_one)
        return rank(cands, scorer, keep, price_one)

    with monkeypatch.context() as m:
        m.setattr(ss, "rank", spy)
        result = ss.search(model, resolved_places=places, **kw)
    return result, seen["cands"], seen["scorer"]


def _figures(s: Scored) -> tuple[str, float, float, float, int]:
    return (s.cand.label, s.goodput_tokens_per_s, s.ttft_p99_s, s.tpot_p99_s, s.mean_in_flight)


@pytest.mark.parametrize(("model", "kw"), CASES, ids=[f"{m}-{k['gpus']}" for m, k in CASES])
def test_pruned_search_equals_resolving_every_candidate(
    monkeypatch: pytest.MonkeyPatch, model: str, kw: dict[str, Any]
) -> None:
    pruned, cands, scorer = _search(monkeypatch, ss.RESOLVED_PLACES, model, kw)
    full, _, _ = _search(monkeypatch, None, model, kw)
    places = ss.RESOLVED_PLACES
    assert places >= 2
    assert len(pruned.ranked) >= 2
    assert [_figures(s) for s in pruned.ranked[:places]] == [
        _figures(s) for s in full.ranked[:places]
    ]
    assert all(s.capacity_resolved for s in pruned.ranked[:places])
    assert pruned.explanation() == full.explanation()
    # The rest keeps the order: none of it beats the last resolved place.
    per_gpu = [s.per_gpu for s in pruned.ranked]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert {s.cand.label for s in pruned.ranked} == {s.cand.label for s in full.ranked}
    # The ingredients, candidate by candidate: the grid's goodput is a lower bound, the next
    # grid load an upper bound (whether the capacity or the SLO ends the walk), and a goodput
    # the grid's end stops is final.
    for c in cands:
        grid, exact = scorer(c, False), scorer(c, True)
        assert (grid is None) == (exact is None), c.label
        if grid is None or exact is None:
            continue
        assert grid.goodput_tokens_per_s <= exact.goodput_tokens_per_s, c.label
        assert exact.goodput_tokens_per_s <= grid.goodput_bound_tokens_per_s * (1 + 1e-12)
        if grid.capacity_resolved:
            assert _figures(grid) == pytest.approx(_figures(exact), rel=1e-12), c.label


def test_resolving_moves_goodput_off_the_grid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: on the third case a deployment the capacity stops is read off the grid
    more than 4% below its priced goodput (9%), and every shown place moves."""
    model, kw = CASES[2]
    grid, _, _ = _search(monkeypatch, 0, model, kw)
    resolved, _, _ = _search(monkeypatch, ss.RESOLVED_PLACES, model, kw)
    on_grid = {s.cand.label: s.per_gpu for s in grid.ranked}
    shown = resolved.ranked[:4]
    assert all(s.per_gpu != on_grid[s.cand.label] for s in shown)
    assert any(s.limit == "capacity" and s.per_gpu > 1.04 * on_grid[s.cand.label] for s in shown)


@pytest.mark.parametrize(
    ("model", "gpu", "engine", "isl", "osl"),
    [
        ("llama3.1-8b", "h100-sxm", "tensorrt-llm", 128, 2048),
        ("llama3.1-8b", "h200-sxm", "vllm", 1024, 8192),
        ("qwen3-32b", "h200-sxm", "sglang", 1024, 8192),
    ],
)
def test_unbounded_goodput_is_the_saturated_capacity_of_one_prediction(
    monkeypatch: pytest.MonkeyPatch, model: str, gpu: str, engine: str, isl: int, osl: int
) -> None:
    """Without an SLO a one-GPU search's goodput is the engine's capacity, the rate a single
    prediction saturates at under an open loop far past it (``predict_aggregated`` resolves
    it): the same number, where the grid's top point falls short."""
    kw = {"gpu": gpu, "gpus": 1, "engine": engine, "input_len": isl, "output_len": osl}
    found, _, _ = _search(monkeypatch, ss.RESOLVED_PLACES, model, kw)
    grid, _, _ = _search(monkeypatch, 0, model, kw)
    sat = infer(model, gpu=gpu, engine=engine, input_len=isl, output_len=osl, request_rate=1e6)
    capacity = sat.to_dict()["options"][0]["output_tokens_per_s"]
    assert found.ranked[0].goodput_tokens_per_s == pytest.approx(capacity, rel=1e-12)
    assert grid.ranked[0].goodput_tokens_per_s < capacity * (1 - 5e-4)


def test_goodput_is_monotone_in_the_slo() -> None:
    """A looser TPOT target keeps every deployment that met the tighter one at least as high:
    the winner's goodput per GPU never falls, and resolving never lowers a grid goodput."""
    best = []
    for tpot in (20, 25, 30, 40, 60, 100):
        r = ss.search(
            "llama3.1-70b",
            gpu="h200-sxm",
            gpus=8,
            weights="fp8",
            slo_ttft_ms=1000,
            slo_tpot_ms=tpot,
        )
        best.append(r.ranked[0].per_gpu if r.ranked else 0.0)
    assert best == sorted(best) and best[-1] > best[0] > 0


def test_verdict_names_the_resolved_winner_and_runner_up() -> None:
    model, kw = CASES[0]
    r = ss.search(model, **kw)
    text = r.explanation()
    w, u = r.ranked[0], r.ranked[1]
    assert text.startswith(f"winner: {w.cand.label} ")
    assert f"Runner-up: {u.cand.label} at {u.per_gpu:,.0f} tok/s per GPU" in text
    assert f"serves {w.per_gpu:,.0f} output tok/s per GPU" in text
    why = {"capacity": "runs out of batch", "ttft": "its TTFT p99", "tpot": "its TPOT p99"}
    why["ttft+tpot"] = "its TTFT and TPOT p99s"
    assert why[u.limit] in text.split("Runner-up:")[1]
    doc = r.to_dict()
    assert doc["options"][0]["exact"] and doc["options"][1]["exact"]


def _fake(n: int, rng: np.random.Generator) -> tuple[list[Candidate], Scorer, list[int]]:
    """``n`` candidates on 1-8 GPUs with grid goodputs, resolved ones between the grid's and
    the bound (a fifth final, a tenth not meeting the SLO), ties included; counts resolves."""
    cands = [
        Candidate(label=f"c{k}", mode="aggregated", par=Parallelism(), replicas=int(g))
        for k, g in enumerate(rng.integers(1, 9, n))
    ]
    grid = rng.choice([100.0, 200.0, 300.0, 400.0], n) * rng.choice([1.0, 1.1, 1.2], n)
    bound = grid * rng.choice([1.0, 1.15], n)
    exact = grid + (bound - grid) * rng.choice([0.0, 0.5, 1.0], n)
    final = rng.random(n) < 0.2
    none = rng.random(n) < 0.1
    calls = [0]

    def scorer(c: Candidate, resolve: bool) -> Scored | None:
        k = int(c.label[1:])
        if none[k]:
            return None
        calls[0] += resolve
        done = resolve or final[k]
        value = exact[k] if done else grid[k]
        return Scored(
            cand=c,
            mean_in_flight=1,
            goodput_tokens_per_s=float(value),
            ttft_p99_s=0.1,
            tpot_p99_s=0.01,
            requests_per_s=float(value) / 100,
            capacity_resolved=bool(done),
            goodput_bound_tokens_per_s=float(value if done else bound[k]),
        )

    return cands, scorer, calls


@pytest.mark.parametrize("keep", [1, 2, 8])
def test_best_first_rank_equals_the_definition_on_random_problems(keep: int) -> None:
    rng = np.random.default_rng(keep)
    saved = 0
    for _ in range(200):
        n = int(rng.integers(1, 40))
        cands, scorer, calls = _fake(n, rng)
        full = rank(cands, scorer, None)
        every = calls[0]
        calls[0] = 0
        pruned = rank(cands, scorer, keep)
        assert [(s.cand.label, s.goodput_tokens_per_s) for s in pruned[:keep]] == [
            (s.cand.label, s.goodput_tokens_per_s) for s in full[:keep]
        ]
        assert {s.cand.label for s in pruned} == {s.cand.label for s in full}
        per_gpu = [s.per_gpu for s in pruned]
        assert per_gpu == sorted(per_gpu, reverse=True)
        assert calls[0] <= every
        saved += every - calls[0]
    assert saved > 0


def test_search_module_resolves_with_the_steady_state_rule() -> None:
    """One rule: the search calls the steady state's resolution, not a copy of it."""
    from gpuscale.planner.serving import steady_state

    assert ps.resolve_capacity is steady_state.resolve_capacity
    assert ps.refine_edge is steady_state.refine_edge


def test_resolved_places_is_checked_and_reported() -> None:
    from gpuscale.errors import InputError

    with pytest.raises(InputError, match="resolved_places"):
        ss.search("llama3.1-8b", gpu="h100-sxm", gpus=2, resolved_places=-1)
    doc = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=2, resolved_places=None).to_dict()
    assert doc["priced"] == len(doc["options"]) <= doc["evaluated"]
    assert all(o["capacity_resolved"] and o["exact"] for o in doc["options"])
    grid = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=2, resolved_places=0)
    assert grid.priced == 0
    assert not any(s.exact for s in grid.ranked)
    # The search prices its places instead of resolving the pre-screen's edge: a count of
    # resolved edges read 0 on every search, beside the places it priced.
    shown = ss.search("llama3.1-8b", gpu="h100-sxm", gpus=2).to_dict()
    assert shown["priced"] >= 1 and "resolved" not in shown and "resolved" not in doc


def test_limit_names_what_ends_the_walk() -> None:
    """``limit`` says which bound stops each deployment: lifting the SLO it names raises its
    goodput, and a deployment stopped by its capacity keeps its goodput with no SLO at all."""
    base = {"gpu": "h200-sxm", "gpus": 8, "weights": "fp8", "resolved_places": None}

    def goodput(ttft: float | None, tpot: float | None) -> dict[str, Scored]:
        r = ss.search("llama3.1-70b", slo_ttft_ms=ttft, slo_tpot_ms=tpot, **base)
        return {s.cand.label: s for s in r.ranked}

    slo = goodput(2000, 50)
    free_ttft, free_tpot, free = goodput(None, 50), goodput(2000, None), goodput(None, None)
    seen = set()
    for label, s in slo.items():
        seen.add(s.limit)
        g = s.goodput_tokens_per_s
        if s.limit == "capacity":
            assert free[label].goodput_tokens_per_s == pytest.approx(g, rel=1e-12), label
        else:
            lifted = {"ttft": free_ttft, "tpot": free_tpot, "ttft+tpot": free}[s.limit]
            assert lifted[label].goodput_tokens_per_s > g, label
    assert "capacity" in seen and len(seen) >= 2
