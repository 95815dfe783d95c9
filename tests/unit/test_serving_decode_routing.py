"""How requests reach the decode workers of a disaggregated deployment: a router that looks for
a free slot, one that deals in turn (Dynamo's default frontend), or one that deals at random
(several frontends behind nginx); and the launches' frontends read from the srt-slurm recipes."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.planner.serving.disagg_closed_loop import ROUTINGS, PrefillStage, simulate
from gpuscale.planner.serving.steady_state import finite_run_wait
from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import load_records, read_record
from gpuscale.validation.inferencex_multinode import (
    FRONTENDS_COLUMNS,
    FRONTENDS_FILE,
    default_frontends,
    recipes_decode_routing,
)
from gpuscale.validation.inferencex_tables import load_tables
from tests.benchmark_scripts import load_benchmark

SERVING = DATA_DIR / "serving"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
# The script reads every version with the prefill-chunks script's git helpers (its sibling).
load_benchmark(BENCHMARKS / "recipe_prefill_chunks.py", "recipe_prefill_chunks")
frontend_values = load_benchmark(BENCHMARKS / "recipe_frontends.py").frontend_values


def _loop(routing: str, clients: int = 4, workers: int = 4, requests: int = 40) -> np.ndarray:
    """Slot waits of ``clients`` against ``workers`` decode workers of one slot each: prompts
    of no prefill time, every decode 1 s (101 tokens at 10 ms), fixed lengths."""
    stage = PrefillStage(
        workers=1, ranks=1, rank_tokens=1e9, rank_prompts=1, iteration_s=lambda _: 0.0
    )
    sim = simulate(
        concurrency=clients,
        input_lens=np.full(requests, 10.0),
        output_lens=np.full(requests, 101.0),
        prefill=stage,
        admission_s=0.0,
        decode_slots=workers,
        tpot_s=0.01,
        decode_workers=workers,
        routing=routing,
    )
    return np.asarray(sim.slot_wait_s)


def test_a_slot_for_each_client_waits_only_when_dealt_blind() -> None:
    # One slot a client: a router that looks for a free slot, or one that deals in turn to
    # clients that come back in the order they left, never makes a request wait; a random deal
    # sends some to a busy worker, where they wait for its request to end.
    assert _loop("least-loaded").max() == 0.0
    assert _loop("round-robin").max() == 0.0
    random = _loop("random")
    assert random.mean() > 0.1
    # A wait is whole decodes on the worker it was sent to.
    assert np.allclose(random / 1.0, np.round(random / 1.0), atol=1e-9)


def test_a_random_deal_is_the_same_every_call() -> None:
    assert np.array_equal(_loop("random"), _loop("random"))


def test_one_worker_is_one_pool_whatever_the_routing() -> None:
    for routing in ROUTINGS:
        assert _loop(routing, clients=3, workers=1, requests=30) == pytest.approx(
            _loop("least-loaded", clients=3, workers=1, requests=30)
        )


def test_an_unknown_routing_is_refused() -> None:
    with pytest.raises(ValueError, match="one of least-loaded, round-robin, random"):
        _loop("nearest")


def test_open_loop_a_random_deal_waits_longest() -> None:
    # Four workers of two slots each held 1 s, Poisson arrivals at 6/s (75% of the 8/s). With
    # equal holds a deal in turn is the pooled queue (request i waits for request i - 8 either
    # way); a random deal waits longer, also in a run of 3 requests on 2 one-slot workers.
    pooled = finite_run_wait(6.0, 8, 1.0, 2000)
    turn = finite_run_wait(6.0, 8, 1.0, 2000, workers=4, routing="round-robin")
    random = finite_run_wait(6.0, 8, 1.0, 2000, workers=4, routing="random")
    assert pooled > 0.0 and turn == pytest.approx(pooled) and 3 * pooled < random
    few = [finite_run_wait(10.0, 2, 1.0, 3, 2, r) for r in ROUTINGS]
    assert few[0] == pytest.approx(few[1]) and few[2] > few[0] > 0.0
    # One worker: the same queue.
    assert finite_run_wait(6.0, 8, 1.0, 2000, workers=1, routing="random") == pooled


def _disagg(routing: str, **load: float) -> dict[str, float]:
    result = infer(
        "deepseek-r1",
        gpu="h200-sxm",
        engine="tensorrt-llm",
        input_len=1024,
        output_len=1024,
        prefill_workers=1,
        prefill_tp=8,
        prefill_ep=8,
        decode_workers=4,
        decode_tp=8,
        decode_ep=8,
        decode_batch=2,
        decode_routing=routing,
        **load,
    )
    return result.to_dict()["options"][0]


def test_infer_prices_the_routing_closed_and_open_loop() -> None:
    closed = {r: _disagg(r, concurrency=8) for r in ROUTINGS}
    assert closed["least-loaded"]["ttft_ms"] < closed["random"]["ttft_ms"]
    # The clients wait too: fewer requests a second at the same concurrency (Little's law).
    assert closed["random"]["output_tokens_per_s"] < closed["least-loaded"]["output_tokens_per_s"]
    assert closed["random"]["decode_routing"] == "random"
    opened = {r: _disagg(r, request_rate=0.6) for r in ROUTINGS}
    blind = max(opened["least-loaded"]["ttft_ms"], opened["round-robin"]["ttft_ms"])
    assert blind < opened["random"]["ttft_ms"]
    # The open loop's notes say the router is blind too, as the closed loop's do.
    for loop in ({"request_rate": 0.6}, {"concurrency": 8}):
        notes = infer(
            "deepseek-r1", gpu="h200-sxm", engine="tensorrt-llm", input_len=1024,
            output_len=1024, prefill_workers=1, prefill_tp=8, prefill_ep=8, decode_workers=4,
            decode_tp=8, decode_ep=8, decode_batch=2, decode_routing="round-robin", **loop,
        ).prediction.notes  # fmt: skip
        assert any("picked in turn (round-robin), blind to their load" in n for n in notes)
    # One decode worker: every routing is the same deployment, throughput included.
    one = [
        infer(
            "deepseek-r1", gpu="h200-sxm", engine="tensorrt-llm", concurrency=64,
            prefill_workers=1, prefill_tp=8, decode_workers=1, decode_tp=8, decode_routing=r,
        ).to_dict()["options"][0]["requests_per_s"]
        for r in ROUTINGS
    ]  # fmt: skip
    assert one[0] == one[1] == one[2]
    # ... also where its slots bind and requests wait for them (fuzz, helper-146: the blind
    # router's Little's-law throughput was applied to one worker too).
    bound = [
        infer(
            "llama3.1-70b", gpu="h100-sxm", engine="tensorrt-llm", weights="fp8",
            concurrency=256, prefill_workers=3, prefill_tp=2, decode_workers=1, decode_tp=2,
            decode_routing=r,
        ).to_dict()["options"][0]
        for r in ROUTINGS
    ]  # fmt: skip
    assert bound[0]["ttft_ms"] > 100.0  # the slots bind: requests wait for one
    assert bound[0] == bound[1] | {"decode_routing": "least-loaded"}
    assert bound[0] == bound[2] | {"decode_routing": "least-loaded"}


def test_routing_is_refused_for_an_aggregated_engine() -> None:
    with pytest.raises(InputError, match="--decode-routing random applies only to disaggregated"):
        infer("llama3.1-8b", gpu="h100-sxm", concurrency=4, decode_routing="random")
    with pytest.raises(InputError, match="accepted least-loaded, round-robin, random"):
        _disagg("nearest", concurrency=4)


RECIPE = """
resources:
  prefill_nodes: {p}
  decode_nodes: {d}
  gpus_per_node: 4
frontend:
  type: dynamo
{extra}
"""


@pytest.mark.parametrize(
    ("p", "d", "extra", "frontends"),
    [
        (2, 8, "", 9),  # nginx on the head node, a frontend on each other node
        (4, 12, "", 10),  # at most num_additional_frontends + 1
        (1, 1, "  num_additional_frontends: 0", 1),
        (1, 0, "", 1),  # one node: one frontend, no nginx
        (1, 8, "  enable_multiple_frontends: false", 1),
    ],
)
def test_the_frontends_a_recipe_starts(p: int, d: int, extra: str, frontends: int) -> None:
    values = frontend_values(RECIPE.format(p=p, d=d, extra=extra))
    assert values is not None
    assert int(values[4]) == frontends and int(values[3]) == p + d


def _line(recipe: str, frontends: int, first: str, last: str, args: str = "") -> dict[str, str]:
    return {
        "recipe": recipe,
        "frontend_type": "dynamo",
        "frontends": str(frontends),
        "router_args": args,
        "first_day": first,
        "last_day": last,
    }


def test_recipes_give_the_routing_their_frontends_deal_by() -> None:
    table = [
        _line("recipes/a.yaml", 1, "2026-01-01", "2026-03-01"),
        _line("recipes/b.yaml", 9, "2026-01-01", "2026-03-01"),
        _line("recipes/c.yaml", 5, "2026-01-10", "2026-01-10"),
        _line("recipes/c.yaml", 1, "2026-02-04", "2026-03-01"),
        _line("recipes/d.yaml", 1, "2026-01-01", "2026-03-01", args="router-mode=kv"),
    ]
    day = "2026-02-10"
    assert recipes_decode_routing(["recipes/a.yaml"], day, table)[0] == {
        "decode_routing": "round-robin"
    }
    kw, note = recipes_decode_routing(["recipes/b.yaml"], day, table)
    assert kw == {"decode_routing": "random"} and "9 Dynamo frontends" in note
    # A changed file: the version in force on the day, none on a day that does not decide.
    assert recipes_decode_routing(["recipes/c.yaml"], day, table)[0] == {
        "decode_routing": "round-robin"
    }
    kw, note = recipes_decode_routing(["recipes/c.yaml"], "2026-02-04", table)
    assert kw == {} and "does not decide" in note
    # Recipes that disagree, a router the rule does not read, a recipe not on file: nothing.
    kw, note = recipes_decode_routing(["recipes/a.yaml", "recipes/b.yaml"], day, table)
    assert kw == {} and "[1, 9]" in note
    assert recipes_decode_routing(["recipes/d.yaml"], day, table)[0] == {}
    assert "not on file" in recipes_decode_routing(["recipes/e.yaml"], day, table)[1]
    assert recipes_decode_routing([], day, table) == ({}, "")


def test_a_boundary_day_is_read_where_every_version_in_question_gives_one_value() -> None:
    # gb200-fp4/1k1k/low-latency.yaml changed its additional frontends (9 -> 3) on 2026-02-04
    # while its 3 worker nodes kept min(additional + 1, nodes - 1) = 2 frontends: either
    # version ran the same deal that day. The old rule compared lines, not the value read.
    table = [
        ln
        for ln in default_frontends()
        if ln["recipe"] == "recipes/gb200-fp4/1k1k/low-latency.yaml"
    ]
    assert len({ln["additional"] for ln in table}) == 2
    assert {ln["frontends"] for ln in table} == {"2"}
    for day in ("2026-02-04", "2026-02-20"):
        kw, note = recipes_decode_routing(["recipes/gb200-fp4/1k1k/low-latency.yaml"], day, table)
        assert kw == {"decode_routing": "random"}, note
    # A day before every version still does not decide.
    kw, note = recipes_decode_routing(
        ["recipes/gb200-fp4/1k1k/low-latency.yaml"], "2026-01-20", table
    )
    assert kw == {} and "before every version read" in note
    # Two values on the boundary day: unread (the line after it, read the day after).
    changed = [
        _line("recipes/f.yaml", 2, "2026-01-01", "2026-01-31"),
        _line("recipes/f.yaml", 1, "2026-02-04", "2026-03-01"),
    ]
    assert recipes_decode_routing(["recipes/f.yaml"], "2026-02-04", changed)[0] == {}
    assert recipes_decode_routing(["recipes/f.yaml"], "2026-02-05", changed)[0] == {
        "decode_routing": "round-robin"
    }


def _timed(frontends: int, first: str, last: str, additional: str = "9") -> dict[str, str]:
    return {
        **_line("recipes/g.yaml", frontends, first[:10], last[:10]),
        "additional": additional,
        "first_commit": first,
        "last_commit": last,
    }


def test_lines_started_on_one_day_are_ordered_by_their_commits_not_guessed() -> None:
    day = "2026-02-01"
    # Day-only lines that start together: the one before them may still have run (review of
    # the first value rule: it read 2 frontends here though the 1-frontend version may have).
    untimed = [
        _line("recipes/f.yaml", 1, "2026-01-01", "2026-01-20"),
        _line("recipes/f.yaml", 2, day, day),
        _line("recipes/f.yaml", 2, day, "2026-03-01"),
    ]
    kw, note = recipes_decode_routing(["recipes/f.yaml"], day, untimed)
    assert kw == {} and "does not decide" in note
    # With the commits' instants a later day is exact: 5 frontends at 08:00, 1 at 19:00, the
    # 5-frontend line has no later commit, so from the next day on the single frontend runs.
    timed = [
        _timed(5, "2026-02-05T08:00:00Z", "2026-02-05T08:00:00Z"),
        _timed(1, "2026-02-05T19:00:00Z", "2026-03-03T09:00:00Z"),
    ]
    assert recipes_decode_routing(["recipes/g.yaml"], "2026-02-05", timed)[0] == {}
    assert recipes_decode_routing(["recipes/g.yaml"], "2026-02-07", timed)[0] == {
        "decode_routing": "round-robin"
    }
    # Interleaved versions: a line whose last commit is after every other line's is in force
    # after it; between, both may be.
    interleaved = [
        _timed(1, "2026-01-01T00:00:00Z", "2026-01-20T00:00:00Z"),
        _timed(4, "2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"),
    ]
    assert recipes_decode_routing(["recipes/g.yaml"], "2026-01-25", interleaved)[0] == {
        "decode_routing": "round-robin"
    }
    assert recipes_decode_routing(["recipes/g.yaml"], "2026-01-10", interleaved)[0] == {}


def test_the_table_has_its_columns_and_one_count_per_line() -> None:
    with (SERVING / FRONTENDS_FILE).open() as f:
        assert tuple(csv.DictReader(f).fieldnames or ()) == FRONTENDS_COLUMNS
    lines = default_frontends()
    assert lines
    for ln in lines:
        nodes, count = int(ln["worker_nodes"]), int(ln["frontends"])
        many = ln["multiple"] == "true" and nodes > 1
        assert count == (min(int(ln["additional"]) + 1, nodes - 1) if many else 1)


def _record(hardware: str, day: str, conc: str) -> dict[str, str]:
    records = load_records(SERVING / "inferencex_api_dsr1.csv")
    (rec,) = [
        r
        for r in records
        if r["hardware"] == hardware
        and r["framework"] == "dynamo-trt"
        and r["spec_method"] == "none"
        and r["date"] == day
        and r["conc"] == conc
        and r["isl"] == "1024"
        and r["osl"] == "8192"
        and r["decode_num_workers"] == "4"
    ]
    return rec


def test_held_out_records_read_their_launchs_frontends() -> None:
    # GB200 FP8 ctx1_gen4_tep8_batch1 (2026-02-05): recipes with the schema's default
    # frontends (nginx and nine frontends); GB300 FP8 of the same shape states
    # enable_multiple_frontends: false.
    tables = load_tables(SERVING)
    gb200 = read_record(_record("gb200", "2026-02-05", "4"), tables)
    assert gb200.kwargs["decode_routing"] == "random"
    assert any("frontends behind nginx" in n for n in gb200.assumptions)
    gb300 = [
        r
        for r in load_records(SERVING / "inferencex_api_dsr1.csv")
        if r["hardware"] == "gb300" and r["framework"] == "dynamo-trt" and r["conc"] == "4"
    ]
    routings = {read_record(r, tables).kwargs.get("decode_routing") for r in gb300}
    assert routings == {"round-robin"}


@pytest.mark.parametrize("routing", ROUTINGS)
def test_a_closed_loop_completes_no_more_than_its_clients_over_their_e2e(routing: str) -> None:
    # Little's law with the followed TTFT, for every router: the steady state's rate left the
    # burst and slot waits out (least-loaded reported 6,580 tok/s where C / E2E gave 6,465).
    o = infer(
        "llama3.1-70b", gpu="h100-sxm", engine="tensorrt-llm", weights="fp8", concurrency=256,
        prefill_workers=3, prefill_tp=2, decode_workers=2, decode_tp=2, decode_routing=routing,
    ).to_dict()["options"][0]  # fmt: skip
    assert o["requests_per_s"] <= 256 / o["e2e_s"] * (1 + 1e-9)
    # ... and holds what that rate keeps decoding (review, helper-148: 127.3 running per rank
    # read at the steady state's rate against 124.4 by Little's law; the rest is admission).
    decoding = o["requests_per_s"] * (o["e2e_s"] - o["ttft_ms"] / 1e3) / 2
    assert o["running_requests_per_rank"] == pytest.approx(decoding, rel=0.01)
