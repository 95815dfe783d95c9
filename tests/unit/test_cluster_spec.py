"""The cluster file: the shipped examples parse; bad files fail with one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscale.cluster.spec import load_cluster, parse_cluster
from gpuscale.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _doc() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "lab-64.yaml").read_text())


@pytest.mark.parametrize(
    ("name", "gpus", "nodes"),
    [("lab-64", 64, 8), ("fat-tree-512", 512, 64), ("rail-4096", 4096, 512)],
)
def test_examples_load(name: str, gpus: int, nodes: int) -> None:
    spec = load_cluster(EXAMPLES / f"{name}.yaml")
    assert spec.num_gpus == gpus
    assert spec.num_nodes == nodes
    assert spec.node_leaf.max() + 1 == spec.num_leaves


def test_mixed_generations_and_oversubscription() -> None:
    lab = load_cluster(EXAMPLES / "lab-64.yaml")
    assert {t.gpu.id for t in lab.node_types} == {"a100-sxm-80gb", "h100-sxm"}
    rail = load_cluster(EXAMPLES / "rail-4096.yaml")
    nic = rail.node_types[0].nic
    # above the pod a flow gets 1/7 of the port rate; inside it the full rate
    assert rail.level_bandwidth_gb_per_s(2, nic) == pytest.approx(nic.bandwidth_gb_per_s)
    assert rail.level_bandwidth_gb_per_s(3, nic) == pytest.approx(nic.bandwidth_gb_per_s / 7)


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["node_types"]["a100"].update(gpu="a100"), "unknown GPU"),
        (lambda d: d["node_types"]["a100"].update(nvlink_domain=3), "must divide"),
        (lambda d: d["network"].pop("core"), "missing core"),
        (lambda d: d["network"]["core"].update(oversubscription=0.5), "oversubscription"),
        (lambda d: d["pods"][0].update(node_type="b200"), "unknown node_type"),
        (lambda d: d["pods"][0].update(leaves=0), "leaves must be an integer"),
        (lambda d: d.update(extra=1), "unknown key extra"),
        (lambda d: d["node_types"]["a100"].update(nic="nvlink4"), "not a network port"),
    ],
)
def test_bad_files_one_line(edit: Any, words: str) -> None:
    doc = _doc()
    edit(doc)
    with pytest.raises(InputError) as info:
        parse_cluster(doc)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_cluster(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("node_types: [unclosed\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_cluster(bad)


_scalar = st.one_of(st.none(), st.integers(-3, 20), st.floats(allow_nan=True), st.text(max_size=8))


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["node_types", "network", "pods", "name", "schema_version", "x"]),
        st.one_of(
            _scalar,
            st.lists(_scalar, max_size=3),
            st.dictionaries(st.text(max_size=5), _scalar, max_size=3),
        ),
        max_size=6,
    )
)
def test_parser_only_raises_input_error(doc: dict[str, Any]) -> None:
    try:
        parse_cluster(doc)
    except InputError as exc:
        assert "\n" not in str(exc)
