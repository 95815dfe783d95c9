"""The ``--json`` key set of every model command, pinned (STYLE #15): a key that appears,
disappears or changes its spelling is a change to the public surface and must show up here.

Regenerate after a deliberate change with ``GPUSCALE_UPDATE_SNAPSHOTS=1 pytest`` on this file
and review the diff of ``tests/unit/snapshots/``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import gpuscale

SNAPSHOTS = Path(__file__).parent / "snapshots"

CASES: dict[str, Callable[[], Any]] = {
    "estimate": lambda: gpuscale.estimate(
        "llama3.1-70b", gpu="h100-sxm", gpus=64, tp=8, pp=2, mbs=1, gbs=256, seq=4096
    ),
    "fit-train": lambda: gpuscale.fit("llama3.1-8b", gpu="a100-sxm-80gb", seq=8192, mbs=8),
    "fit-infer": lambda: gpuscale.fit("llama3.1-8b", mode="infer", batch=8),
    "plan": lambda: gpuscale.plan("llama3.1-8b", gpu="h100-sxm", gpus=16, top=2),
    "scale": lambda: gpuscale.scale(
        "gpt3-350m", gpu="a100-sxm-80gb", max_gpus=16, inter="roce-100,ib-ndr400", runs=2
    ),
    "advise-comm": lambda: gpuscale.advise_comm("llama3.1-8b", gpus=16, inter="roce-100"),
}


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """``a``, ``a.b``, ``a[].c``: every key path of a JSON document (lists merged)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            out.add(path)
            out |= key_paths(item, path)
    elif isinstance(value, list):
        for item in value:
            out |= key_paths(item, f"{prefix}[]")
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_keys_match_the_snapshot(name: str) -> None:
    keys = sorted(key_paths(CASES[name]().to_dict()))
    path = SNAPSHOTS / f"{name}.json"
    if os.environ.get("GPUSCALE_UPDATE_SNAPSHOTS"):
        path.write_text(json.dumps(keys, indent=1) + "\n")
    expected = json.loads(path.read_text())
    assert keys == expected, (
        f"--json keys of {name} changed: added {sorted(set(keys) - set(expected))}, "
        f"removed {sorted(set(expected) - set(keys))}"
    )


def test_key_paths_merge_lists() -> None:
    assert key_paths({"a": [{"b": 1}, {"c": {"d": 2}}], "e": 3}) == {
        "a",
        "a[].b",
        "a[].c",
        "a[].c.d",
        "e",
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_answer_is_a_frozen_result(name: str) -> None:
    result = CASES[name]()
    assert isinstance(result, gpuscale.Result)
    with pytest.raises((AttributeError, TypeError)):
        result.model = "other"
    assert result.figures(), f"{name} has no figure"
