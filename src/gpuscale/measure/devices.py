"""Recognise the local GPU as a catalog device, so measured rates can be set against its peak."""

from __future__ import annotations

import re

from gpuscale import catalog

_FORM_WORDS = re.compile(r"^(sxm\d?|pcie|nvl|hgx|\d+gb)$")


def _tokens(text: str) -> set[str]:
    return {t for t in re.split(r"[^a-z0-9]+", text.lower()) if t}


def match_gpu(driver_name: str, memory_gib: float | None = None) -> str | None:
    """The catalog id for a device name as CUDA reports it (``NVIDIA H100 80GB HBM3`` ->
    ``h100-sxm``), or ``None`` when it is unknown or ambiguous (then ask for ``--gpu``).

    The model tokens of the id must all appear in the name; memory (within 10%; read from an
    ``80GB`` token of the name when not given) and the PCIe form factor break ties.
    """
    name = _tokens(driver_name)
    if memory_gib is None:
        # names without a memory query (nccl-tests logs) often carry it: "A100-SXM4-40GB"
        sized = [int(t[:-2]) for t in name if re.fullmatch(r"\d+gb", t)]
        memory_gib = float(sized[0]) if len(sized) == 1 else None
    hits = []
    for dev in catalog.gpus().values():
        model = {t for t in dev.id.split("-") if not _FORM_WORDS.match(t)}
        if model and model <= name:
            hits.append(dev)
    if memory_gib is not None:
        hits = [d for d in hits if abs(d.memory_gib - memory_gib) <= 0.1 * d.memory_gib] or hits
    pcie = "pcie" in name
    hits = [d for d in hits if ("pcie" in d.id) == pcie] or hits
    nvl = "nvl" in name  # "NVIDIA H200 NVL" against the SXM "NVIDIA H200"
    hits = [d for d in hits if ("nvl" in d.id.split("-")) == nvl] or hits
    return hits[0].id if len(hits) == 1 else None
