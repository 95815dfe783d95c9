"""`cluster export --format kueue|volcano` against the schedulers' own CRDs and Kubernetes' rules.

Each CRD (tests/data/kueue, tests/data/volcano; SOURCES.md there) gives the OpenAPI v3 schema the
API server applies (checked with jsonschema) and CEL rules (``x-kubernetes-validations``,
evaluated here by hand). Object names and labels follow k8s.io/apimachinery
pkg/util/validation (IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue), which the CRDs
leave to the API server.
"""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from gpuscale.api import cluster_export
from gpuscale.cluster.export import KUEUE_API_VERSION, export
from gpuscale.cluster.spec import load_cluster
from gpuscale.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "tests" / "data" / "kueue" / "kueue.x-k8s.io_topologies.yaml"
VOLCANO_CRD = ROOT / "tests" / "data" / "volcano" / "topology.volcano.sh_hypernodes.yaml"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if "node_types:" in p.read_text())

# k8s.io/apimachinery/pkg/util/validation/validation.go
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@cache
def _crd(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


@cache
def _validator(path: Path, api_version: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_version(api_version, path)["schema"]["openAPIV3Schema"])


def _version(api_version: str, crd_path: Path = CRD) -> dict[str, Any]:
    crd = _crd(crd_path)
    group, _, version = api_version.partition("/")
    assert group == crd["spec"]["group"]
    found = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert found, f"{api_version} is not in {crd['spec']['names']['kind']}'s CRD"
    return found[0]


def _schema_problems(doc: dict[str, Any], crd_path: Path) -> list[str]:
    """The CRD's OpenAPI schema, its kind, and Kubernetes' object-name rule."""
    validator = _validator(crd_path, doc.get("apiVersion", ""))
    out = [e.message for e in validator.iter_errors(doc)]
    kind = _crd(crd_path)["spec"]["names"]["kind"]
    if doc.get("kind") != kind:
        out.append(f"kind {doc.get('kind')!r} is not {kind}")
    name = doc.get("metadata", {}).get("name", "")
    if not (DNS_SUBDOMAIN.fullmatch(name) and len(name) <= 253):
        out.append(f"metadata.name {name!r} is not an RFC 1123 subdomain")
    return out


def problems(doc: dict[str, Any]) -> list[str]:
    """What the API server would refuse in a Topology document (empty: it is accepted)."""
    out = _schema_problems(doc, CRD)
    levels = doc.get("spec", {}).get("levels")
    if out or not isinstance(levels, list):
        return out
    # x-kubernetes-validations on spec.levels, by hand:
    # size(self.filter(i, size(self.filter(j, j == i)) > 1)) == 0
    if any(levels.count(lv) > 1 for lv in levels):
        out.append("levels must be unique")
    # size(self.filter(i, i.nodeLabel == 'kubernetes.io/hostname')) == 0
    #   || self[size(self) - 1].nodeLabel == 'kubernetes.io/hostname'
    host = [lv for lv in levels if lv["nodeLabel"] == "kubernetes.io/hostname"]
    if host and levels[-1]["nodeLabel"] != "kubernetes.io/hostname":
        out.append("kubernetes.io/hostname only at the lowest level")
    return out


def _label_key_ok(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    ok_prefix = not prefix or (DNS_SUBDOMAIN.fullmatch(prefix) and len(prefix) <= 253)
    return bool(ok_prefix and QUALIFIED_NAME.fullmatch(name) and len(name) <= 63)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_exports_a_topology_kueue_accepts(path: Path) -> None:
    docs = list(yaml.safe_load_all(export(load_cluster(path), "kueue")))
    topology, nodes = docs[0], docs[1:]
    assert topology["apiVersion"] == KUEUE_API_VERSION
    assert problems(topology) == []
    version = _version(KUEUE_API_VERSION)
    assert version["served"] and not version.get("deprecated", False)
    for node in nodes:
        meta = node["metadata"]
        assert DNS_SUBDOMAIN.fullmatch(meta["name"]) and len(meta["name"]) <= 253
        for key, value in meta["labels"].items():
            assert _label_key_ok(key), key
            assert LABEL_VALUE.fullmatch(value) and len(value) <= 63, value


def _good() -> dict[str, Any]:
    return next(yaml.safe_load_all(export(load_cluster(EXAMPLES[0]), "kueue")))


def _with(change: str) -> dict[str, Any]:
    doc = copy.deepcopy(_good())
    levels = doc["spec"]["levels"]
    if change == "no levels":
        del doc["spec"]["levels"]
    elif change == "empty levels":
        doc["spec"]["levels"] = []
    elif change == "bad label":
        levels[0]["nodeLabel"] = "gpuscale.io/my leaf"
    elif change == "label too long":
        levels[0]["nodeLabel"] = "a" * 317
    elif change == "level without label":
        levels[0] = {"label": "gpuscale.io/pod"}
    elif change == "too many levels":
        doc["spec"]["levels"] = [{"nodeLabel": f"l{i}"} for i in range(17)]
    elif change == "duplicate":
        levels.insert(0, dict(levels[0]))
    elif change == "hostname first":
        levels.reverse()
    elif change == "bad name":
        doc["metadata"]["name"] = "My_Lab"
    elif change == "kind":
        doc["kind"] = "Topologies"
    return doc


@pytest.mark.parametrize(
    "change",
    [
        "no levels",
        "empty levels",
        "bad label",
        "label too long",
        "level without label",
        "too many levels",
        "duplicate",
        "hostname first",
        "bad name",
        "kind",
    ],
)
def test_a_wrong_document_is_refused(change: str) -> None:
    assert problems(_good()) == []
    assert problems(_with(change)) != []


def test_v1alpha1_is_gone_from_current_kueue() -> None:
    # what the exporter wrote before this check: no longer in the CRD (removed in Kueue v0.14)
    with pytest.raises(AssertionError, match="not in Topology's CRD"):
        _version("kueue.x-k8s.io/v1alpha1")


def test_names_kubernetes_refuses_are_made_valid_or_refused(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "lab-64.yaml").read_text().replace("name: lab-64\n", "")
    nameless = tmp_path / "My_Lab.yaml"
    nameless.write_text(text)
    topology = next(yaml.safe_load_all(cluster_export(nameless, format="kueue").text))
    assert topology["metadata"]["name"] == "my-lab.yaml"
    assert problems(topology) == []
    with pytest.raises(InputError, match="Kubernetes node names need lowercase"):
        cluster_export(nameless, format="kueue", node_prefix="GPU")
    with pytest.raises(InputError, match="Kubernetes node names need lowercase"):
        cluster_export(nameless, format="volcano", node_prefix="-n")
    # Slurm host names may carry capitals
    assert "Nodes=GPU[" in cluster_export(nameless, format="slurm-conf", node_prefix="GPU").text


def hypernode_problems(doc: dict[str, Any]) -> list[str]:
    """What the API server would refuse in a Volcano HyperNode (empty: it is accepted)."""
    out = _schema_problems(doc, VOLCANO_CRD)
    if out:
        return out
    for member in doc["spec"].get("members", []):
        chosen = [k for k in ("exactMatch", "regexMatch", "labelMatch") if k in member["selector"]]
        # has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)
        if not chosen:
            out.append("Either ExactMatch or RegexMatch or LabelMatch must be specified")
        # (has(self.exactMatch) ? 1 : 0) + ... <= 1
        if len(chosen) > 1:
            out.append("Only one of ExactMatch, RegexMatch, or LabelMatch can be specified")
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_exports_hypernodes_volcano_accepts(path: Path) -> None:
    spec = load_cluster(path)
    docs = list(yaml.safe_load_all(export(spec, "volcano")))
    version = _version(docs[0]["apiVersion"], VOLCANO_CRD)
    assert version["served"] and not version.get("deprecated", False)
    names = {d["metadata"]["name"] for d in docs}
    assert len(names) == len(docs)  # HyperNodes are cluster-scoped: one name each
    for doc in docs:
        assert hypernode_problems(doc) == [], doc["metadata"]["name"]
        for member in doc["spec"]["members"]:
            if member["type"] == "HyperNode":  # members name HyperNodes that exist
                assert member["selector"]["exactMatch"]["name"] in names


def _hypernode_with(change: str) -> dict[str, Any]:
    doc = next(yaml.safe_load_all(export(load_cluster(EXAMPLES[0]), "volcano")))
    member = doc["spec"]["members"][0]
    if change == "no tier":
        del doc["spec"]["tier"]
    elif change == "negative tier":
        doc["spec"]["tier"] = -1
    elif change == "no members":
        doc["spec"]["members"] = []
    elif change == "member type":
        member["type"] = "Switch"
    elif change == "member name":
        member["selector"]["exactMatch"]["name"] = "Node_0"
    elif change == "empty selector":
        member["selector"] = {}
    elif change == "two selectors":
        member["selector"]["regexMatch"] = {"pattern": "node.*"}
    return doc


@pytest.mark.parametrize(
    "change",
    [
        "no tier",
        "negative tier",
        "no members",
        "member type",
        "member name",
        "empty selector",
        "two selectors",
    ],
)
def test_a_wrong_hypernode_is_refused(change: str) -> None:
    assert hypernode_problems(_hypernode_with("none")) == []
    assert hypernode_problems(_hypernode_with(change)) != []
