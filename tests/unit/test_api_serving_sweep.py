"""The load sweep: one deployment at several loads, read as a latency-throughput curve."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpuscale
from gpuscale.errors import InputError

DEPLOYMENT = {"gpu": "h100-sxm", "engine": "vllm", "tp": 1, "input_len": 512, "output_len": 256}


@pytest.fixture(scope="module")
def sweep() -> gpuscale.api.LoadSweepResult:
    return gpuscale.infer_sweep("llama3.1-8b", concurrency=[1, 4, 16, 64, 256, 1024], **DEPLOYMENT)


def test_each_point_is_the_single_load_answer(sweep: gpuscale.api.LoadSweepResult) -> None:
    doc = sweep.to_dict()
    one = gpuscale.infer("llama3.1-8b", concurrency=16, **DEPLOYMENT).to_dict()["options"][0]
    point = next(p for p in doc["points"] if p["concurrency"] == 16)
    assert {k: point[k] for k in one} == one


def test_more_load_never_cuts_latency(sweep: gpuscale.api.LoadSweepResult) -> None:
    rows = sweep.to_dict()["points"]
    tpot = [r["tpot_ms"] for r in rows]
    assert all(b >= a * 0.999 for a, b in itertools.pairwise(tpot)), tpot
    # TTFT under a closed-loop burst is not monotone point to point (the engine's token budget
    # batches a burst's prefills differently), but queueing past the knee dominates.
    assert rows[-1]["ttft_ms"] > 10 * rows[0]["ttft_ms"]


def test_knee_is_where_throughput_stops_growing(sweep: gpuscale.api.LoadSweepResult) -> None:
    doc = sweep.to_dict()
    rows = doc["points"]
    knee = doc["knee"]["concurrency"]
    i = [r["concurrency"] for r in rows].index(knee)
    tps = [r["output_tokens_per_s"] for r in rows]
    assert tps[i] >= 1.05 * tps[i - 1]
    assert all(b < 1.05 * a for a, b in itertools.pairwise(tps[i:]))
    assert f"concurrency {knee}" in doc["verdict"]


def test_figure_is_latency_against_throughput(sweep: gpuscale.api.LoadSweepResult) -> None:
    (fig,) = sweep.figures()
    rows = sweep.to_dict()["points"]
    assert len(fig.data) == 4
    assert list(fig.data[0].x) == [r["output_tokens_per_s_per_gpu"] for r in rows]
    assert list(fig.data[0].y) == [r["tpot_ms"] for r in rows]


def test_open_loop_sweep() -> None:
    doc = gpuscale.infer_sweep("llama3.1-8b", request_rate=[1.0, 4.0], **DEPLOYMENT).to_dict()
    assert doc["load"] == "request_rate"
    assert [p["request_rate"] for p in doc["points"]] == [1.0, 4.0]


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({}, "concurrency", "exactly one"),
        ({"concurrency": [1], "request_rate": [1.0]}, "concurrency", "exactly one"),
        ({"concurrency": []}, "concurrency", "1 to 64"),
        ({"concurrency": list(range(1, 70))}, "concurrency", "1 to 64"),
        ({"concurrency": [8, 4]}, "concurrency", "ascending"),
        ({"concurrency": [4, 4]}, "concurrency", "distinct"),
        ({"concurrency": [0, 4]}, "concurrency", "1 to 1,000,000"),
        # A string, one number, a None or a nested list failed deep inside the sweep.
        ({"concurrency": "1,2,4"}, "concurrency", "a list of whole numbers, e.g. [1, 8, 64]"),
        ({"concurrency": 5}, "concurrency", "concurrency must be a list of whole numbers"),
        ({"concurrency": [None]}, "concurrency", "got [None]"),
        ({"concurrency": [[1]]}, "concurrency", "a list of whole numbers"),
        ({"concurrency": [1.5]}, "concurrency", "a list of whole numbers"),
        ({"request_rate": 3.0}, "request_rate", "request_rate must be a list of numbers"),
    ],
)
def test_bad_loads_are_one_line(kwargs: dict, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        gpuscale.infer_sweep("llama3.1-8b", **kwargs, **DEPLOYMENT)
    assert err.value.field == field
    assert words in str(err.value)
    assert "\n" not in str(err.value)


def test_numpy_loads_are_a_list_of_loads() -> None:
    """A numpy array of loads failed on its truth value (``request_rate or ()``)."""
    doc = gpuscale.infer_sweep(
        "llama3.1-8b", request_rate=np.array([1.0, 4.0]), **DEPLOYMENT
    ).to_dict()
    assert [p["request_rate"] for p in doc["points"]] == [1.0, 4.0]
    doc = gpuscale.infer_sweep("llama3.1-8b", concurrency=np.arange(1, 3), **DEPLOYMENT).to_dict()
    assert [p["concurrency"] for p in doc["points"]] == [1, 2]


def test_a_curve_still_rising_says_so() -> None:
    doc = gpuscale.infer_sweep("llama3.1-8b", concurrency=[1, 4, 16], **DEPLOYMENT).to_dict()
    assert doc["knee"]["concurrency"] == 16
    assert doc["verdict"].endswith("it has not levelled off in this range")
