"""benchmarks/serving_noise_floor.py: the repeatability floor of the public serving rows."""

from __future__ import annotations

import json

from tests.benchmark_scripts import run_benchmark


def test_noise_floor_figures_are_consistent() -> None:
    out = run_benchmark("serving_noise_floor", "--no-model", "--json", timeout=120)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["rows"] == 1884 and 0 < doc["runs"] < doc["rows"]
    for metric in ("ttft", "tpot"):
        for cell in doc["repeats"][metric].values():
            assert cell["groups"] > 0 and cell["runs"] >= 2 * cell["groups"]
            # the best single answer never does worse than the geometric mean
            assert 0 <= cell["floor"] <= cell["from_geomean"] + 1e-12
            assert cell["max_ratio"] >= 1
        agg = doc["repeats"][metric]["all/agg"]
        assert agg["groups"] >= 10
        for cell in doc["order"][metric].values():
            assert 0 <= cell["falls_25"] <= cell["falls_10"] <= cell["pairs"]
            assert 0 <= cell["bound_on_all_sweeps"] < 1
            assert (cell["runs_in_falling_sweeps"] > 0) == (cell["falls_10"] > 0)
        assert doc["order"][metric]["all/agg/all"]["pairs"] > 100
        for cell in doc["table"].values():
            f = cell[metric]
            assert f["model"] is None  # --no-model
            # a model both deterministic and monotone pays at least the repeats' price
            assert 0 <= f["repeat_floor"] <= f["monotone_bound"] + 1e-12
            # far below the serving target: the floor does not excuse a 20% error
            assert f["monotone_bound"] < 0.2
    assert doc["table"]["all/agg/all"]["ttft"]["monotone_bound"] > 0


def test_a_negative_worst_is_one_line_and_exit_2() -> None:
    out = run_benchmark("serving_noise_floor", "--no-model", "--worst", "-1")
    assert out.returncode == 2
    assert "--worst -1: the number of groups listed must be 0 or more" in out.stderr
    assert "Traceback" not in out.stderr
