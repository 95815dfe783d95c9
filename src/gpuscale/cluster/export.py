"""The cluster file's topology as the schedulers people run read it.

- Slurm ``topology.conf`` (topology/tree plugin; slurm.schedmd.com/topology.conf.html): one line
  per switch with its child nodes or switches, hostlist expressions.
- Slurm ``topology.yaml`` (Slurm 24.05+; slurm.schedmd.com/topology.yaml.html): the same tree as
  a list of topologies, ``tree: {switches: [{switch, children | nodes}]}``.
- Kueue ``Topology`` (Topology-Aware Scheduling; kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling):
  the ordered node-label levels, pod -> leaf -> hostname, plus the labels each Node needs.
  ``kueue.x-k8s.io/v1beta2``: the version Kueue stores since v0.16 (served since v0.15; v1alpha1,
  which Kueue v0.9-v0.13 served, is gone since v0.14; CRD ``kueue.x-k8s.io_topologies.yaml``,
  checked against in ``tests/unit/test_cluster_export_schemas.py``).
- Volcano ``HyperNode`` (network-topology-aware plugin; volcano.sh docs "Network Topology Aware
  Scheduling"): tier 1 per leaf with its Nodes, tier 2 per pod with its leaves, tier 3 the core.

Node names are ``<prefix><index>`` with the index zero-padded, in cluster-file order.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from gpuscale.cluster.spec import ClusterSpec
from gpuscale.errors import InputError

FORMATS: tuple[str, ...] = ("slurm-conf", "slurm-yaml", "kueue", "volcano")
KUBERNETES_FORMATS: tuple[str, ...] = ("kueue", "volcano")
"""Formats whose node names become Kubernetes object names (RFC 1123 subdomains)."""
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
LEAF_LABEL = "gpuscale.io/leaf"
POD_LABEL = "gpuscale.io/pod"
HOST_LABEL = "kubernetes.io/hostname"


def _width(count: int) -> int:
    return max(1, len(str(max(count - 1, 0))))


def node_names(spec: ClusterSpec, prefix: str = "node") -> list[str]:
    w = _width(spec.num_nodes)
    return [f"{prefix}{i:0{w}d}" for i in range(spec.num_nodes)]


def _range(prefix: str, indices: list[int], width: int) -> str:
    """A Slurm hostlist expression for ``indices`` (consecutive runs collapsed)."""
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(
            f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}"
        )
        if i is not None:
            start = prev = i
    return f"{prefix}[{','.join(runs)}]"


def _leaves(spec: ClusterSpec) -> list[list[int]]:
    return [
        [int(n) for n in (spec.node_leaf == leaf).nonzero()[0]] for leaf in range(spec.num_leaves)
    ]


def _pods(spec: ClusterSpec) -> list[list[int]]:
    return [[int(lf) for lf in (spec.leaf_pod == pod).nonzero()[0]] for pod in range(spec.num_pods)]


def _speed(spec: ClusterSpec, level: int) -> int:
    """Link speed in Gb/s for Slurm's ``LinkSpeed`` (relative weights; Slurm does not use units)."""
    return round(spec.levels[level].link.bandwidth_gb_per_s * 8)


def slurm_conf(spec: ClusterSpec, prefix: str = "node") -> str:
    nw, lw, pw = _width(spec.num_nodes), _width(spec.num_leaves), _width(spec.num_pods)
    lines = [
        f"# topology.conf for {spec.name}: {spec.num_gpus} GPUs, written by gpuscale cluster export",
        "# TopologyPlugin=topology/tree in slurm.conf. Per job: --switches=1 keeps a job under one",
        "# leaf switch (add @TIME to bound the wait), as the topology-aware policy does.",
    ]
    for leaf, nodes in enumerate(_leaves(spec)):
        lines.append(
            f"SwitchName=leaf{leaf:0{lw}d} Nodes={_range(prefix, nodes, nw)} LinkSpeed={_speed(spec, 0)}"
        )
    for pod, leaves in enumerate(_pods(spec)):
        lines.append(
            f"SwitchName=spine{pod:0{pw}d} Switches={_range('leaf', leaves, lw)} LinkSpeed={_speed(spec, 1)}"
        )
    if spec.num_pods > 1:
        pods = list(range(spec.num_pods))
        lines.append(
            f"SwitchName=core Switches={_range('spine', pods, pw)} LinkSpeed={_speed(spec, 2)}"
        )
    return "\n".join(lines) + "\n"


def slurm_yaml(spec: ClusterSpec, prefix: str = "node") -> str:
    nw, lw, pw = _width(spec.num_nodes), _width(spec.num_leaves), _width(spec.num_pods)
    switches: list[dict[str, Any]] = []
    if spec.num_pods > 1:
        switches.append(
            {"switch": "core", "children": _range("spine", list(range(spec.num_pods)), pw)}
        )
    for pod, leaves in enumerate(_pods(spec)):
        switches.append({"switch": f"spine{pod:0{pw}d}", "children": _range("leaf", leaves, lw)})
    for leaf, nodes in enumerate(_leaves(spec)):
        switches.append({"switch": f"leaf{leaf:0{lw}d}", "nodes": _range(prefix, nodes, nw)})
    doc = [{"topology": spec.name, "cluster_default": True, "tree": {"switches": switches}}]
    head = f"# topology.yaml for {spec.name}, written by gpuscale cluster export\n"
    return head + yaml.safe_dump(doc, sort_keys=False)


_NOT_DNS = re.compile(r"[^a-z0-9.-]+")


def k8s_name(text: str) -> str:
    """``text`` as a Kubernetes object name: a lowercase RFC 1123 subdomain of at most 253
    characters (k8s.io/apimachinery pkg/util/validation: IsDNS1123Subdomain). Cluster names come
    from the file (or its path when it names none: "My_Lab.yaml" becomes "my-lab.yaml")."""
    name = _NOT_DNS.sub("-", text.lower())[:253]
    name = re.sub(r"^[^a-z0-9]+|[^a-z0-9]+$", "", name)
    name = re.sub(r"[-.]*\.[-.]*", ".", name)  # no empty or dash-edged dot-separated label
    return name or "cluster"


def check_node_prefix(fmt: str, prefix: str) -> None:
    """Kubernetes Node names are RFC 1123 subdomains, and the hostname label value a node's name
    is has at most 63 characters (k8s.io/apimachinery pkg/util/validation)."""
    if fmt in KUBERNETES_FORMATS and not (
        re.fullmatch(r"[a-z0-9][-a-z0-9]*", prefix) and len(prefix) <= 56
    ):
        raise InputError(
            f"--node-prefix '{prefix}' for {fmt}: Kubernetes node names need lowercase letters, "
            "digits and dashes, starting with a letter or digit, at most 56 characters",
            field="node_prefix",
        )


def kueue(spec: ClusterSpec, prefix: str = "node") -> str:
    lw, pw = _width(spec.num_leaves), _width(spec.num_pods)
    topology = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Topology",
        "metadata": {"name": k8s_name(spec.name)},
        "spec": {
            "levels": [
                {"nodeLabel": POD_LABEL},
                {"nodeLabel": LEAF_LABEL},
                {"nodeLabel": HOST_LABEL},
            ]
        },
    }
    docs: list[dict[str, Any]] = [topology]
    # The labels the levels read; apply with `kubectl label node` or server-side apply.
    for i, name in enumerate(node_names(spec, prefix)):
        leaf = int(spec.node_leaf[i])
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        POD_LABEL: f"pod{int(spec.leaf_pod[leaf]):0{pw}d}",
                        LEAF_LABEL: f"leaf{leaf:0{lw}d}",
                        HOST_LABEL: name,
                    },
                },
            }
        )
    head = (
        f"# Kueue Topology for {spec.name}, then the labels each Node must carry (gpuscale cluster\n"
        "# export). A ResourceFlavor names it with spec.topologyName; a job asks for\n"
        f"# kueue.x-k8s.io/podset-required-topology: {LEAF_LABEL} to stay under one leaf.\n"
    )
    return head + yaml.safe_dump_all(docs, sort_keys=False)


def volcano(spec: ClusterSpec, prefix: str = "node") -> str:
    names = node_names(spec, prefix)
    lw, pw = _width(spec.num_leaves), _width(spec.num_pods)
    docs: list[dict[str, Any]] = []

    def hypernode(
        name: str, tier: int, tier_name: str, kind: str, members: list[str]
    ) -> dict[str, Any]:
        return {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "tierName": tier_name,
                "members": [
                    {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members
                ],
            },
        }

    for leaf, nodes in enumerate(_leaves(spec)):
        docs.append(hypernode(f"leaf{leaf:0{lw}d}", 1, "leaf", "Node", [names[n] for n in nodes]))
    for pod, leaves in enumerate(_pods(spec)):
        docs.append(
            hypernode(
                f"pod{pod:0{pw}d}", 2, "pod", "HyperNode", [f"leaf{lf:0{lw}d}" for lf in leaves]
            )
        )
    if spec.num_pods > 1:
        docs.append(
            hypernode(
                "core", 3, "core", "HyperNode", [f"pod{p:0{pw}d}" for p in range(spec.num_pods)]
            )
        )
    head = (
        f"# Volcano HyperNodes for {spec.name} (gpuscale cluster export). A job's\n"
        "# networkTopology {mode: hard, highestTierAllowed: 1} keeps it under one leaf.\n"
    )
    return head + yaml.safe_dump_all(docs, sort_keys=False)


def export(spec: ClusterSpec, fmt: str, prefix: str = "node") -> str:
    writers = {
        "slurm-conf": slurm_conf,
        "slurm-yaml": slurm_yaml,
        "kueue": kueue,
        "volcano": volcano,
    }
    if fmt not in writers:
        raise InputError(
            f"unknown --format '{fmt}'; accepted: {', '.join(FORMATS)}", field="format"
        )
    return writers[fmt](spec, prefix)
