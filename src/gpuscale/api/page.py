"""What the web page (``gpuscale serve``) needs from the layers below and no command does: a
pasted ``config.json`` read in memory, and the fabrics that join nodes."""

from __future__ import annotations

import json
from typing import Any

from gpuscale import catalog, files
from gpuscale.catalog.hf_config import model_from_config
from gpuscale.errors import InputError, require
from gpuscale.specs import ModelSpec

PASTED_MODEL = "pasted-config"
"""The name a pasted model goes by: fixed, so nothing the user types is ever taken for a
catalog id or a path further down (``catalog.model`` reads a name ending in ``.json`` as a file)."""


def model_from_config_text(text: str) -> ModelSpec:
    """A Hugging Face ``config.json`` given as text (pasted into a form), parsed in memory: the
    same mapping as ``gpuscale fit path/config.json``, without a file."""
    require(
        len(text.encode()) <= files.MiB,
        "the pasted config.json is over 1 MiB; a config.json is a few KiB",
        field="config",
    )
    try:
        cfg: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"the pasted config.json is not valid JSON (line {exc.lineno}: {exc.msg})",
            field="config",
        ) from None
    except RecursionError:
        raise InputError("the pasted config.json is nested too deeply", field="config") from None
    require(
        isinstance(cfg, dict),
        "the pasted config.json must hold one JSON object (a Hugging Face model config)",
        field="config",
    )
    try:
        return model_from_config(cfg, PASTED_MODEL)
    except InputError as exc:
        raise InputError(str(exc), field="config") from None


def network_fabrics() -> tuple[str, ...]:
    """Catalog ids of the links that join nodes (what ``--inter`` accepts), catalog order."""
    return tuple(k for k, v in catalog.links().items() if v.kind in catalog.NETWORK_KINDS)


DEFAULT_FABRIC = catalog.DEFAULT_INTER
