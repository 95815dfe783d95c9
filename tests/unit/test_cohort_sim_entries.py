"""The cohort simulation's shortcuts for decoding cohorts (``cohort_sim._Rank``: one token count
per first-token iteration, the ``open`` list, the ``n_dec`` count, a merge that compares only
the pairs that can be alike) agree with the per-cohort rules they stand for: checked after every
iteration of fixed-length closed loops that split bursts, merge cohorts, run several rounds,
wait for KV room, poll SGLang's receive interval, speculate (a fraction of a token per
iteration) and step attention-DP ranks together."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest

from gpuscale.api import infer
from gpuscale.planner.serving import cohort_sim
from gpuscale.planner.serving.cohort_sim import NO_LIMIT, _Cohort, _Rank

DEPLOYMENTS: list[tuple[str, dict[str, Any]]] = [
    # 8192-token prompts in an 8192-token budget: one prompt per iteration, hundreds of cohorts
    ("llama3.1-8b", {"engine": "vllm", "concurrency": 160, "input_len": 8192, "output_len": 96}),
    # KV room for 48: the rest wait, admitted as completions free slots, over several rounds
    (
        "llama3.1-8b",
        {
            "engine": "vllm",
            "concurrency": 200,
            "input_len": 2000,
            "output_len": 300,
            "engine_options": {"max_num_seqs": 48},
        },
    ),
    (
        "llama3.1-8b",
        {
            "engine": "sglang",
            "concurrency": 37,
            "input_len": 2000,
            "output_len": 300,
            "engine_options": {"recv_interval": 10},
        },
    ),
    (
        "llama3.1-8b",
        {"engine": "tensorrt-llm", "concurrency": 64, "input_len": 1024, "output_len": 256},
    ),
    # MTP: a fraction of a token per iteration; 300 clients over 8 ranks in step
    (
        "deepseek-r1",
        {
            "engine": "sglang",
            "tp": 8,
            "ep": 8,
            "attention_dp": 8,
            "weights": "fp8",
            "speculative": "mtp",
            "draft_tokens": 3,
            "concurrency": 300,
            "input_len": 2000,
            "output_len": 300,
        },
    ),
    # random lengths: the staggered steady state with the first round's burst
    (
        "llama3.1-8b",
        {
            "engine": "vllm",
            "concurrency": 300,
            "input_len": 4000,
            "output_len": 200,
            "input_cv": 0.3,
            "output_cv": 0.3,
        },
    ),
]


class _Reference:
    """Each decoding cohort's tokens kept one by one (the rule before the shortcuts: every
    decoding cohort adds its tokens per iteration, a cohort is done at the output length), and
    the checks that the rank's shortcuts give the same."""

    def __init__(self) -> None:
        self.tokens: dict[int, float] = {}
        self.seen = {"fraction": 0, "finished": 0, "merged": 0, "twins": 0, "jumps": 0}

    def decoding(self, r: _Rank) -> list[_Cohort]:
        return [c for c in r.cohorts if c.first_token >= 0.0]

    def key(self, c: _Cohort) -> tuple[object, ...]:
        tokens = self.tokens[id(c)] if c.first_token >= 0.0 else 0.0
        return (c.admitted, c.arrival, c.done_tokens, tokens, c.first_token, c.cycle,
                c.ready_at_iteration)  # fmt: skip

    def check_state(self, r: _Rank) -> None:
        decoding = self.decoding(r)
        assert r.open == [c for c in r.cohorts if c.first_token < 0.0]
        assert r.n_dec == sum(c.size for c in decoding)
        for c in decoding:
            assert r.generated[c.entry] == self.tokens[id(c)]
        if r.x.per_it != 1.0:
            self.seen["fraction"] += 1
        self.seen["twins"] += bool(r.shared)

    def add(self, r: _Rank, tokens: float) -> None:
        for c in self.decoding(r):
            self.tokens[id(c)] += tokens

    def check_steps(self, r: _Rank, iteration: int) -> None:
        """The decode-only jump: to the first completion of any decoding cohort."""
        decoding = self.decoding(r)
        if r.steps is None or not decoding:
            return
        waiting = [c for c in r.cohorts if not c.admitted]
        soon = (
            [c.ready_at_iteration - iteration for c in waiting] if r.x.cap - r.running >= 1 else []
        )
        osl, per_it = r.x.osl, r.x.per_it
        ends = [math.ceil((osl - self.tokens[id(c)]) / per_it - 1e-9) for c in decoding]
        assert r.steps == max(min([*ends, *soon]), 1) != NO_LIMIT
        self.seen["jumps"] += 1

    def check_finished(self, r: _Rank, done: list[_Cohort]) -> None:
        osl = r.x.osl
        expected = [c for c in self.decoding(r) if self.tokens[id(c)] >= osl - 1e-9]
        assert [id(c) for c in done] == [id(c) for c in expected]
        self.seen["finished"] += len(done)

    def check_merged(self, r: _Rank, before: int) -> None:
        """After a merge no two neighbours are in the same state (the rule: one pass over
        every cohort)."""
        keys = [self.key(c) for c in r.cohorts]
        assert all(a != b for a, b in pairwise(keys))
        self.seen["merged"] += before - len(r.cohorts)


def _watch(monkeypatch: pytest.MonkeyPatch) -> _Reference:
    ref = _Reference()
    plan, one, jump = _Rank.plan, _Rank.one_iteration, _Rank.decode_steps
    finished, merge, complete = _Rank._finished, _Rank._merge, _Rank.complete

    def w_plan(r: _Rank, iteration: int) -> None:
        plan(r, iteration)
        ref.check_steps(r, iteration)

    def w_one(r: _Rank, now: float, dt: float) -> None:
        if r.n_dec_now > 0:
            ref.add(r, r.x.per_it)
        one(r, now, dt)
        for c in r.finished_prefill:
            ref.tokens[id(c)] = 1.0

    def w_jump(r: _Rank, steps: int, dt: float) -> None:
        ref.add(r, steps * r.x.per_it)
        jump(r, steps, dt)

    def w_finished(r: _Rank) -> list[_Cohort]:
        done = finished(r)
        ref.check_finished(r, done)
        return done

    def w_merge(r: _Rank) -> None:
        before = len(r.cohorts)
        merge(r)
        ref.check_merged(r, before)

    def w_complete(r: _Rank, now: float, iteration: int) -> None:
        ref.check_state(r)
        complete(r, now, iteration)
        ref.check_state(r)

    wrappers: dict[str, Callable[..., Any]] = {
        "plan": w_plan,
        "one_iteration": w_one,
        "decode_steps": w_jump,
        "_finished": w_finished,
        "_merge": w_merge,
        "complete": w_complete,
    }
    for name, fn in wrappers.items():
        monkeypatch.setattr(cohort_sim._Rank, name, fn)
    return ref


def test_shortcuts_follow_the_per_cohort_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = _watch(monkeypatch)
    for model, kw in DEPLOYMENTS:
        infer(model, gpu="h200-sxm", **kw)
    # every shortcut was taken: the checks above ran on something
    assert all(n > 0 for n in ref.seen.values()), ref.seen
