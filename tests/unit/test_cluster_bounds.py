"""Inputs that used to hang the cluster commands or run the machine out of memory (a fuzz of the
CLI, 2026-12-04): each is now one line, or a run that ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from gpuscale.cluster.simulate import MAX_RESTARTS, Failures, simulate
from gpuscale.cluster.slowdown import SlowdownModel
from gpuscale.cluster.spec import MAX_GPUS_PER_NODE, MAX_NODES, load_cluster, parse_cluster
from gpuscale.cluster.trace import MAX_LOAD_GPUS, read_trace, synthetic_philly
from gpuscale.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _doc(**pod: Any) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / "lab-64.yaml").read_text())
    doc["pods"] = [{"count": 1, "leaves": 1, "nodes_per_leaf": 1, "node_type": "a100", **pod}]
    return doc


@pytest.mark.parametrize(
    "pod",
    [
        {"nodes_per_leaf": 10**9},
        {"count": 10**9},
        {"leaves": 10**6, "nodes_per_leaf": 10**6},
        {"nodes_per_leaf": MAX_NODES + 1},
    ],
)
@pytest.mark.timeout(30)  # 10^9 nodes per leaf was minutes and gigabytes before the bound
def test_a_huge_pod_is_one_line_before_any_node_is_built(pod: dict[str, int]) -> None:
    with pytest.raises(InputError, match="at most 131,072 nodes") as err:
        parse_cluster(_doc(**pod), "big.yaml")
    assert "\n" not in str(err.value)


def test_gpus_per_node_is_bounded() -> None:
    doc = _doc()
    doc["node_types"]["a100"]["gpus_per_node"] = 10**12
    doc["node_types"]["a100"]["nvlink_domain"] = 8
    with pytest.raises(InputError, match=f"at most {MAX_GPUS_PER_NODE}"):
        parse_cluster(doc, "wide.yaml")


@pytest.mark.timeout(30)
def test_many_pods_are_indexed_in_one_pass() -> None:
    # The pod index was max() over every node so far, per pod: 30,000 pods took 22 s.
    spec = parse_cluster(_doc(count=20_000), "pods.yaml")
    assert spec.node_pod.tolist() == list(range(20_000))
    assert spec.leaf_pod.tolist() == list(range(20_000))


@pytest.mark.timeout(30)
def test_a_large_load_draws_only_the_jobs_asked_for() -> None:
    # At --load-gpus 1e9 every arrival of the hours drawn was materialised (33 GiB); the cap is
    # the most GPUs a cluster file holds, and the arrivals are not materialised past ``jobs``.
    t = synthetic_philly(10, seed=1, load_gpus=MAX_LOAD_GPUS)
    assert len(t) == 10 and np.all(np.diff(t.submit_s) >= 0)
    with pytest.raises(InputError, match="--load-gpus must be > 0 and at most"):
        synthetic_philly(10, load_gpus=1e9)
    # The same arrivals as before the change at an ordinary load (seeded).
    assert synthetic_philly(200, seed=3).submit_s[:3] == pytest.approx(
        [0.0, 3.65500176, 58.60017549]
    )


def test_a_csv_field_over_the_csv_modules_limit_is_one_line(tmp_path: Path) -> None:
    p = tmp_path / "long.csv"
    p.write_text("submit_time,gpus,duration\n" + "9" * 140_000 + ",1,60\n")
    with pytest.raises(InputError, match="is not a job CSV") as err:
        read_trace(p)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"node_mtbf_s": 3.6e-3}, "--node-mtbf-h"),
        ({"node_mtbf_s": 3600.0, "repair_s": 1e9 * 3600}, "--repair-h"),
        ({"node_mtbf_s": 3600.0, "max_restarts": MAX_RESTARTS + 1}, "--max-restarts"),
        ({"node_mtbf_s": 3600.0, "checkpoint_every_s": float("inf")}, "--checkpoint-min"),
    ],
)
def test_failure_settings_are_bounded(kwargs: dict[str, float], flag: str) -> None:
    with pytest.raises(InputError, match=flag):
        Failures(**kwargs)  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_a_cluster_that_is_all_down_for_a_year_ends_quickly() -> None:
    # Every node fails within hours and stays down a year: the failure draws skip to the first
    # repair instead of stepping through a year of failures of nodes already down (553 s on the
    # 512-node example before).
    model = SlowdownModel(load_cluster(EXAMPLES / "rail-4096.yaml"))
    trace = synthetic_philly(50, seed=2)
    res = simulate(
        trace,
        model,
        policy="first-fit",
        failures=Failures(node_mtbf_s=3600.0, repair_s=365 * 24 * 3600.0, max_restarts=1000),
    )
    assert res.node_failures >= model.spec.num_nodes  # every node went down at least once


def test_a_node_larger_than_its_fabric_is_refused_in_the_files_terms() -> None:
    doc = _doc()
    doc["node_types"]["a100"]["gpus_per_node"] = 16
    doc["node_types"]["a100"]["nvlink_domain"] = 8
    with pytest.raises(InputError) as err:
        parse_cluster(doc, "wide.yaml")
    assert "gpus_per_node 16: one a100-sxm-80gb node holds at most 8 GPUs" in str(err.value)
    assert "--gpus-per-node" not in str(err.value)


def test_an_infinite_oversubscription_is_refused() -> None:
    doc = _doc()
    doc["network"]["leaf"]["oversubscription"] = float("inf")
    with pytest.raises(InputError, match="finite number >= 1"):
        parse_cluster(doc, "inf.yaml")


def test_a_trace_spanning_past_float_precision_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "far.csv"
    p.write_text("submit_time,gpus,duration\n0,1,60\n1e300,1,60\n")
    with pytest.raises(InputError, match="submit times span 1e\\+300 s"):
        read_trace(p)
    # relative times are what the simulator reads: a negative start is fine
    p.write_text("submit_time,gpus,duration\n-100,1,60\n0,1,60\n")
    assert read_trace(p).submit_s.tolist() == [0.0, 100.0]


def test_static_table_keeps_the_engines_vendor_rule() -> None:
    from gpuscale.api.serving_static import infer_static

    with pytest.raises(InputError, match="atom runs on AMD GPUs"):
        infer_static("llama3.1-8b", gpu="h100-sxm", engine="atom")
