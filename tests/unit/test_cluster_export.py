"""Topology exports, checked structurally: every node under exactly one leaf, every leaf under
one spine/pod, the levels in order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from gpuscale.cluster.export import FORMATS, export, node_names
from gpuscale.cluster.spec import ClusterSpec, load_cluster
from gpuscale.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _expand(expr: str) -> list[str]:
    """A Slurm hostlist expression (``node[00-07,09]``) as names."""
    m = re.fullmatch(r"([A-Za-z-]+)\[([0-9,-]+)\]", expr)
    assert m, expr
    out = []
    for part in m.group(2).split(","):
        lo, _, hi = part.partition("-")
        width = len(lo)
        for i in range(int(lo), int(hi or lo) + 1):
            out.append(f"{m.group(1)}{i:0{width}d}")
    return out


@pytest.fixture(scope="module", params=["lab-64", "fat-tree-512", "rail-4096"])
def spec(request: pytest.FixtureRequest) -> ClusterSpec:
    return load_cluster(EXAMPLES / f"{request.param}.yaml")


def _check_tree(
    spec: ClusterSpec, leaf_nodes: dict[str, list[str]], parent: dict[str, list[str]]
) -> None:
    names = node_names(spec)
    seen = [n for nodes in leaf_nodes.values() for n in nodes]
    assert sorted(seen) == sorted(names)  # each node once
    assert len(leaf_nodes) == spec.num_leaves
    children = [c for kids in parent.values() for c in kids if c.startswith("leaf")]
    assert sorted(children) == sorted(leaf_nodes)  # each leaf under exactly one spine
    for i, name in enumerate(names):
        leaf = next(k for k, v in leaf_nodes.items() if name in v)
        assert int(leaf.removeprefix("leaf")) == int(spec.node_leaf[i])


def test_slurm_conf(spec: ClusterSpec) -> None:
    leaf_nodes: dict[str, list[str]] = {}
    parent: dict[str, list[str]] = {}
    for line in export(spec, "slurm-conf").splitlines():
        if line.startswith("#"):
            continue
        fields = dict(f.split("=", 1) for f in line.split())
        assert set(fields) <= {"SwitchName", "Nodes", "Switches", "LinkSpeed"}
        if "Nodes" in fields:
            leaf_nodes[fields["SwitchName"]] = _expand(fields["Nodes"])
        else:
            parent[fields["SwitchName"]] = _expand(fields["Switches"])
    _check_tree(spec, leaf_nodes, parent)


def test_slurm_yaml(spec: ClusterSpec) -> None:
    doc = yaml.safe_load(export(spec, "slurm-yaml"))
    assert next(iter(doc[0])) == "topology"  # Slurm: must be the first attribute
    switches = doc[0]["tree"]["switches"]
    leaf_nodes = {s["switch"]: _expand(s["nodes"]) for s in switches if "nodes" in s}
    parent = {s["switch"]: _expand(s["children"]) for s in switches if "children" in s}
    _check_tree(spec, leaf_nodes, parent)


def test_kueue(spec: ClusterSpec) -> None:
    docs = list(yaml.safe_load_all(export(spec, "kueue")))
    topo, nodes = docs[0], docs[1:]
    assert topo["kind"] == "Topology" and topo["apiVersion"].startswith("kueue.x-k8s.io/")
    levels = [lv["nodeLabel"] for lv in topo["spec"]["levels"]]
    assert levels[-1] == "kubernetes.io/hostname" and len(levels) == 3
    assert len(nodes) == spec.num_nodes
    for node in nodes:
        assert set(levels) <= set(node["metadata"]["labels"])
    # a leaf label never spans two pods (levels nest)
    pod_of: dict[str, str] = {}
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert pod_of.setdefault(labels[levels[1]], labels[levels[0]]) == labels[levels[0]]


def test_volcano(spec: ClusterSpec) -> None:
    docs = list(yaml.safe_load_all(export(spec, "volcano")))
    by_tier: dict[int, list[dict]] = {}
    for d in docs:
        assert d["kind"] == "HyperNode"
        by_tier.setdefault(d["spec"]["tier"], []).append(d)
    leaf_nodes = {
        d["metadata"]["name"]: [m["selector"]["exactMatch"]["name"] for m in d["spec"]["members"]]
        for d in by_tier[1]
    }
    assert all(m["type"] == "Node" for d in by_tier[1] for m in d["spec"]["members"])
    parent = {
        d["metadata"]["name"]: [m["selector"]["exactMatch"]["name"] for m in d["spec"]["members"]]
        for d in by_tier[2]
    }
    _check_tree(spec, leaf_nodes, parent)
    if spec.num_pods > 1:
        assert len(by_tier[3]) == 1


def test_unknown_format() -> None:
    spec = load_cluster(EXAMPLES / "lab-64.yaml")
    with pytest.raises(InputError, match="accepted"):
        export(spec, "pbs")
    assert len(FORMATS) == 4
