"""The cluster file: node types, leaves, pods and the links between them, as frozen data.

A cluster is a three-level tree, the shape of the fat-tree and rail-optimized fabrics that large
GPU clusters are built as (Leiserson 1985, fat-trees; NVIDIA DGX SuperPOD reference architecture:
scalable units of 32 nodes under leaf switches, leaves under spine switches, spine groups joined
by a core layer): nodes hang off leaf switches, leaves off the spine of their pod, pods off the
core. Each level has a link and the oversubscription of the uplinks into it (downlink : uplink
capacity of the switch below); traffic that climbs to a level gets the slowest link on the way
divided by every oversubscription it crossed.

The file (YAML)::

    schema_version: 1
    name: lab-64
    node_types:
      a100: {gpu: a100-sxm-80gb, gpus_per_node: 8, nvlink_domain: 8, nic: ib-hdr200, nics_per_node: 8}
    network:
        leaf: {link: ib-hdr200, oversubscription: 1}    # node NIC -> leaf switch
      spine: {link: ib-hdr200, oversubscription: 1}   # leaf uplinks -> spine, inside a pod
      core: {link: ib-hdr200, oversubscription: 1}    # spine uplinks -> core, between pods
    pods:
      - {count: 1, leaves: 2, nodes_per_leaf: 4, node_type: a100}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpuscale import catalog, files
from gpuscale.errors import InputError, require
from gpuscale.specs import Device, Link

SCHEMA_VERSION = 1
LEVELS: tuple[str, ...] = ("node", "leaf", "spine", "core")
"""Span levels of an allocation: one node, one leaf switch, one pod's spine, the core."""
NETWORK_LEVELS: tuple[str, ...] = ("leaf", "spine", "core")


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeType:
    """One kind of server."""

    name: str
    gpu: Device
    gpus_per_node: int
    nvlink_domain: int
    """GPUs joined by NVLink/xGMI inside the node (8 on HGX boards, 2 on NVLink-bridged PCIe
    cards, 1 without); a tensor-parallel group wider than this crosses PCIe."""
    intra: Link
    """The GPU-to-GPU link inside the NVLink domain (the GPU's catalog ``intra_link``)."""
    nic: Link
    nics_per_node: int


@dataclass(frozen=True, kw_only=True, slots=True)
class NetworkLevel:
    name: str
    link: Link
    oversubscription: float
    """Downlink : uplink capacity of the switches below, into this level (1 = non-blocking)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterSpec:
    """A whole cluster: per-node arrays give each node's type, leaf and pod."""

    name: str
    node_types: tuple[NodeType, ...]
    levels: tuple[NetworkLevel, ...]
    """leaf, spine, core: in that order."""
    node_type: np.ndarray
    """Index into ``node_types`` per node."""
    node_leaf: np.ndarray
    node_pod: np.ndarray
    leaf_pod: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.node_type.shape[0])

    @property
    def num_leaves(self) -> int:
        return int(self.leaf_pod.shape[0])

    @property
    def num_pods(self) -> int:
        return int(self.leaf_pod.max()) + 1 if self.num_leaves else 0

    @property
    def gpus_per_node(self) -> np.ndarray:
        return np.array([self.node_types[t].gpus_per_node for t in self.node_type], dtype=np.int64)

    @property
    def num_gpus(self) -> int:
        return int(self.gpus_per_node.sum())

    def level_bandwidth_gb_per_s(self, level: int, nic: Link) -> float:
        """Per-NIC rate (GB/s) of traffic whose ring spans ``level`` (1 leaf, 2 spine, 3 core):
        the slowest link on the way up, divided by the oversubscription of every layer of uplinks
        it climbs (a 1:k layer gives each flow 1/k of its port rate when all ports send, the
        worst case a ring meets on a busy cluster)."""
        require(1 <= level <= 3, f"network level must be 1..3, got {level}")
        rate = nic.bandwidth_gb_per_s
        oversub = 1.0
        for lv in self.levels[:level]:
            rate = min(rate, lv.link.bandwidth_gb_per_s)
            oversub *= lv.oversubscription
        return rate / oversub

    def describe(self) -> dict[str, Any]:
        counts: dict[str, int] = {}
        for t in self.node_type:
            name = self.node_types[int(t)].name
            counts[name] = counts.get(name, 0) + 1
        return {
            "name": self.name,
            "gpus": self.num_gpus,
            "nodes": self.num_nodes,
            "leaves": self.num_leaves,
            "pods": self.num_pods,
            "node_types": counts,
            "oversubscription": {lv.name: lv.oversubscription for lv in self.levels},
        }


def _fail(where: str, message: str) -> InputError:
    return InputError(f"cluster file {where}: {message}", field="cluster")


def _mapping(where: str, value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"{what} must be a mapping, got {type(value).__name__}")
    return value


def _keys(where: str, data: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
    missing = sorted(required - set(data))
    if missing:
        raise _fail(where, f"missing {', '.join(missing)}; required: {', '.join(sorted(required))}")
    extra = sorted(set(data) - required - optional)
    if extra:
        accepted = ", ".join(sorted(required | optional))
        raise _fail(where, f"unknown key {', '.join(extra)}; accepted: {accepted}")


def _int(where: str, value: Any, what: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _fail(where, f"{what} must be an integer >= {low}, got {value!r}")
    return value


def _float(where: str, value: Any, what: str, low: float) -> float:
    # finite too: an oversubscription of .inf was read as a link that carries nothing
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value < math.inf:
        raise _fail(where, f"{what} must be a finite number >= {low:g}, got {value!r}")
    return float(value)


def _link(where: str, value: Any, what: str) -> Link:
    """A catalog link id, or an inline ``{bandwidth_gb_per_s, latency_us, source}`` link."""
    if isinstance(value, str):
        try:
            return catalog.link(value)
        except InputError as exc:
            raise _fail(where, f"{what}: {exc}") from None
    data = _mapping(where, value, what)
    _keys(where, data, {"bandwidth_gb_per_s", "source"}, {"latency_us", "name", "kind"})
    return Link(
        id=str(data.get("name", "custom")),
        name=str(data.get("name", "custom link")),
        kind=str(data.get("kind", "ethernet")),  # type: ignore[arg-type]
        bandwidth_gb_per_s=_float(where, data["bandwidth_gb_per_s"], "bandwidth_gb_per_s", 1e-6),
        latency_us=_float(where, data.get("latency_us", 5.0), "latency_us", 0.0),
        rdma=False,
        source=str(data["source"]),
    )


def _node_type(name: str, data: Any) -> NodeType:
    where = f"node_types.{name}"
    d = _mapping(where, data, "a node type")
    _keys(where, d, {"gpu", "gpus_per_node", "nic"}, {"nvlink_domain", "nics_per_node"})
    try:
        gpu = catalog.gpu(str(d["gpu"]))
    except InputError as exc:
        raise _fail(where, str(exc)) from None
    per = _int(where, d["gpus_per_node"], "gpus_per_node")
    if per > MAX_GPUS_PER_NODE:
        raise _fail(where, f"gpus_per_node must be at most {MAX_GPUS_PER_NODE}, got {per}")
    try:
        # the catalog's one rule for a node's size (its NVLink/xGMI domain), said in the file's
        # terms: simulate refused such a file later naming a --gpus-per-node nobody typed
        catalog.check_node(gpu, per)
    except InputError as exc:
        reason = str(exc).removeprefix(f"--gpus-per-node {per}: ")
        raise _fail(where, f"gpus_per_node {per}: {reason}") from None
    domain = _int(where, d.get("nvlink_domain", per), "nvlink_domain")
    if per % domain:
        raise _fail(where, f"nvlink_domain ({domain}) must divide gpus_per_node ({per})")
    nic = _link(where, d["nic"], "nic")
    if nic.kind not in catalog.NETWORK_KINDS:
        raise _fail(where, f"nic '{nic.id}' is a {nic.kind} link, not a network port")
    default_nics = per if nic.rdma else 1
    nics = _int(where, d.get("nics_per_node", default_nics), "nics_per_node")
    return NodeType(
        name=name,
        gpu=gpu,
        gpus_per_node=per,
        nvlink_domain=domain,
        intra=catalog.link(gpu.intra_link),
        nic=nic,
        nics_per_node=nics,
    )


MAX_GPUS_PER_NODE = 1024
"""Most GPUs one node type may hold: NVL72/NVL576 racks described as one node stay well under it
(a node of 10^12 GPUs was accepted and exported)."""
MAX_NODES = 2**17
"""Most nodes a cluster file may describe (131,072: a million GPUs at eight a node, several times
the largest published clusters); each node is an array row the placement and simulator visit,
and a pod of 10^9 nodes per leaf ran the machine out of memory."""
MAX_GPUS = 2**20
"""Most GPUs in all (1,048,576), the bound the planner's searches use."""


def parse_cluster(data: Any, where: str = "<cluster>") -> ClusterSpec:
    """Validate a parsed cluster document; every error is one line naming the key at fault."""
    doc = _mapping(where, data, "the document")
    _keys(where, doc, {"node_types", "network", "pods"}, {"schema_version", "name"})
    version = doc.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise _fail(where, f"schema_version {version!r} is not supported; accepted: 1")
    types_raw = _mapping(where, doc["node_types"], "node_types")
    if not types_raw:
        raise _fail(where, "node_types is empty; define at least one node type")
    types = tuple(_node_type(str(k), v) for k, v in types_raw.items())
    index = {t.name: i for i, t in enumerate(types)}

    net = _mapping(where, doc["network"], "network")
    _keys(f"{where} network", net, set(NETWORK_LEVELS), set())
    levels = []
    for name in NETWORK_LEVELS:
        lv = _mapping(f"{where} network.{name}", net[name], f"network.{name}")
        _keys(f"{where} network.{name}", lv, {"link"}, {"oversubscription"})
        levels.append(
            NetworkLevel(
                name=name,
                link=_link(f"{where} network.{name}", lv["link"], "link"),
                oversubscription=_float(
                    f"{where} network.{name}",
                    lv.get("oversubscription", 1.0),
                    "oversubscription",
                    1.0,
                ),
            )
        )

    pods = doc["pods"]
    if not isinstance(pods, list) or not pods:
        raise _fail(
            where, "pods must be a non-empty list of {count, leaves, nodes_per_leaf, node_type}"
        )
    # Sizes first, all of them checked before any node is built (a huge count is one line, not a
    # machine out of memory).
    entries = []
    nodes = gpus = 0
    for i, entry in enumerate(pods):
        pw = f"{where} pods[{i}]"
        p = _mapping(pw, entry, "a pod entry")
        _keys(pw, p, {"leaves", "nodes_per_leaf", "node_type"}, {"count"})
        kind = str(p["node_type"])
        if kind not in index:
            raise _fail(pw, f"unknown node_type '{kind}'; defined: {', '.join(index)}")
        count = _int(pw, p.get("count", 1), "count")
        leaves = _int(pw, p["leaves"], "leaves")
        per_leaf = _int(pw, p["nodes_per_leaf"], "nodes_per_leaf")
        nodes += count * leaves * per_leaf
        gpus += count * leaves * per_leaf * types[index[kind]].gpus_per_node
        if nodes > MAX_NODES or gpus > MAX_GPUS:
            raise _fail(
                pw,
                f"the pods up to this one hold {nodes:,} nodes and {gpus:,} GPUs; a cluster file "
                f"holds at most {MAX_NODES:,} nodes and {MAX_GPUS:,} GPUs",
            )
        entries.append((index[kind], count, leaves, per_leaf))
    # Pods, then leaves, then nodes, numbered in file order: each entry adds ``count`` pods of
    # ``leaves`` leaves of ``nodes_per_leaf`` nodes.
    kinds, counts, leaves_per_pod, nodes_per_leaf = (
        np.array(column, dtype=np.int64) for column in zip(*entries, strict=True)
    )
    leaf_pod = np.repeat(np.arange(int(counts.sum())), np.repeat(leaves_per_pod, counts))
    leaf_sizes = np.repeat(nodes_per_leaf, counts * leaves_per_pod)
    node_leaf = np.repeat(np.arange(leaf_pod.size), leaf_sizes)
    return ClusterSpec(
        name=str(doc.get("name", where)),
        node_types=types,
        levels=tuple(levels),
        node_type=np.repeat(kinds, counts * leaves_per_pod * nodes_per_leaf),
        node_leaf=node_leaf,
        node_pod=leaf_pod[node_leaf],
        leaf_pod=leaf_pod,
    )


def load_cluster(path: str | Path) -> ClusterSpec:
    """Read and validate a cluster YAML file."""
    p = Path(path)
    # the one file rule: a regular file, size-capped, text (gpuscale.files)
    text = files.read_text(path, label="--cluster", field="cluster", expected="a cluster YAML file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        at = f" (line {line + 1})" if line is not None else ""
        raise InputError(f"--cluster '{path}' is not valid YAML{at}", field="cluster") from None
    return parse_cluster(data, where=p.name)
