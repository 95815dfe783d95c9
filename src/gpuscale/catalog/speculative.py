"""Draft modules for speculative decoding a checkpoint ships (``speculative.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

from gpuscale import shipped_yaml


@dataclass(frozen=True, slots=True, kw_only=True)
class DraftModule:
    """A model's multi-token-prediction module: ``draft_layers`` transformer blocks (each of
    the main model's own layer type) and the published mean tokens per iteration by draft
    count (``acceptance_length``; empty when none is published)."""

    name: str
    method: str
    draft_layers: int
    acceptance_length: dict[int, float]
    source: str


@cache
def _table() -> dict[str, DraftModule]:
    text = resources.files("gpuscale.catalog").joinpath("data/speculative.yaml").read_text()
    out: dict[str, DraftModule] = {}
    for method, entries in shipped_yaml.load(text).items():
        for name, e in entries.items():
            module = DraftModule(
                name=name,
                method=method,
                draft_layers=int(e["draft_layers"]),
                acceptance_length={
                    int(k): float(v) for k, v in (e.get("acceptance_length") or {}).items()
                },
                source=str(e["source"]),
            )
            for model in e["models"]:
                out[f"{method}:{model}"] = module
    return out


def draft_module(method: str, model: str) -> DraftModule | None:
    """The ``method`` draft module catalog model ``model`` (its catalog id) ships, or None."""
    return _table().get(f"{method}:{model}")


def methods() -> tuple[str, ...]:
    """The speculative-decoding methods the catalog knows."""
    return tuple(sorted({m.method for m in _table().values()}))
