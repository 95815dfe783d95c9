"""The built-in catalog: GPUs, links and models from YAML data, each figure with its source.

Lookups by id fail with :class:`~gpuscale.errors.InputError` naming the closest ids.
"""

from __future__ import annotations

import os
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from gpuscale import files, shipped_yaml
from gpuscale.errors import InputError, is_whole, require, unknown
from gpuscale.specs import Cluster, Device, Link, ModelSpec
from gpuscale.specs.hardware import check_whole_nodes

DEFAULT_INTER = "ib-ndr400"
NETWORK_KINDS = ("infiniband", "roce", "ethernet")
"""Link kinds that join nodes (the others join GPUs inside a node)."""
DEFAULT_GPUS_PER_NODE = 8
"""GPUs of an HGX/OAM server board (8 joined by NVLink/xGMI), the GPU entry's NVLink domain when
its catalog entry names none, and the least node :func:`check_node` accepts on NVLink parts."""


def _load(name: str) -> dict[str, Any]:
    text = resources.files("gpuscale.catalog").joinpath("data").joinpath(name).read_text()
    data = shipped_yaml.load(text)
    if not isinstance(data, dict):
        raise RuntimeError(f"catalog file {name} is not a mapping")
    return data


@cache
def gpus() -> dict[str, Device]:
    """Every catalog GPU by id."""
    return {gid: Device(id=gid, **fields) for gid, fields in _load("gpus.yaml")["gpus"].items()}


@cache
def links() -> dict[str, Link]:
    """Every catalog link or fabric by id."""
    return {lid: Link(id=lid, **fields) for lid, fields in _load("links.yaml")["links"].items()}


@cache
def models() -> dict[str, ModelSpec]:
    """Every catalog model by id."""
    return {
        mid: ModelSpec(name=mid, **fields) for mid, fields in _load("models.yaml")["models"].items()
    }


@cache
def calibration_priors() -> dict[str, Any]:
    """Per quantity of ``calibrate run``, the stacks' published figures its prior spread is
    computed from (``calibration_priors.yaml``, each with its source and arithmetic)."""
    return _load("calibration_priors.yaml")


@cache
def validation_bands() -> dict[str, Any]:
    """Error bands per validation regime, written by ``benchmarks/validate.py --write-bands``."""
    return _load("validation_bands.yaml")


@cache
def serving_validation_bands() -> dict[str, Any]:
    """Serving error bands per engine and mode, written by ``benchmarks/serving_bands.py``."""
    return _load("serving_validation_bands.yaml")


def gpu(gpu_id: str | Device) -> Device:
    """A catalog GPU by id (a :class:`Device` is returned as it is)."""
    if isinstance(gpu_id, Device):
        return gpu_id
    try:
        return gpus()[gpu_id.lower()]
    except KeyError:
        raise unknown("GPU", gpu_id, gpus()) from None


def link(link_id: str | Link) -> Link:
    """A catalog link by id (a :class:`Link` is returned as it is)."""
    if isinstance(link_id, Link):
        return link_id
    try:
        return links()[link_id.lower()]
    except KeyError:
        raise unknown("fabric", link_id, links()) from None


@cache
def model_aliases() -> dict[str, str]:
    """Hugging Face repository ids (lowercased) of catalog models -> catalog id."""
    return {k.lower(): v for k, v in _load("model_aliases.yaml")["aliases"].items()}


@cache
def checkpoint_quantization() -> dict[str, dict[str, Any]]:
    """Published pre-quantized checkpoints (Hugging Face id, lowercased) -> the
    ``quantization_config`` of their config.json (``checkpoints.yaml``, each with its source)."""
    data = _load("checkpoints.yaml")["checkpoints"]
    return {k.lower(): v["quantization_config"] for k, v in data.items()}


def checkpoint_weights(hf_id: str) -> str | None:
    """The weight format the published checkpoint ``hf_id`` stores (``fp8_block``, ``fp8``,
    ``mxfp4``, ``nvfp4``, ``int4_wo``), or None when it is not a catalogued pre-quantized
    checkpoint (16-bit weights: an engine quantizes those online in the format it is asked)."""
    from gpuscale.catalog.hf_config import checkpoint_weights as from_config

    return from_config(checkpoint_quantization().get(hf_id.lower()))


def served_weights(name: str, spec: ModelSpec | None = None) -> str:
    """The weight format ``name`` is served in when none is asked for (``--weights auto``): the
    format a catalogued pre-quantized checkpoint stores (an engine loads a serialized FP8 or
    MXFP4 checkpoint as stored, it does not re-quantize it), else 16-bit (``bf16``). A catalog
    id stands for the checkpoint its entry was read from (the ``owner/name config.json`` its
    ``source`` opens with), so ``deepseek-r1`` and ``deepseek-ai/DeepSeek-R1`` agree; a
    ``config.json`` path, for the ``quantization_config`` it declares (``spec``: that file
    already read, so it is not read a second time)."""
    stored = checkpoint_weights(name)
    if stored is None and name.lower() in models():
        read_from = _CONFIG_SOURCE.match(models()[name.lower()].source)
        stored = checkpoint_weights(read_from.group(1)) if read_from else None
    elif stored is None and name.lower() not in model_aliases():
        # A config.json given by path declares its own quantization_config.
        stored = (spec if spec is not None else model(name)).stored_weights or None
    return stored or "bf16"


def served_kv_cache(name: str, spec: ModelSpec | None = None) -> str | None:
    """The KV-cache dtype the checkpoint ``name`` (looked up as :func:`served_weights` does)
    declares for its engine, ``fp8`` for a ModelOpt ``kv_cache_quant_algo: FP8``, or None when
    it declares none (the engines' ``auto`` is then the model's 16-bit dtype;
    ``serving_engines.yaml``)."""
    from gpuscale.catalog.hf_config import checkpoint_kv_cache

    declared = checkpoint_kv_cache(checkpoint_quantization().get(name.lower()))
    if declared is None and name.lower() in models():
        read_from = _CONFIG_SOURCE.match(models()[name.lower()].source)
        qc = checkpoint_quantization().get(read_from.group(1).lower()) if read_from else None
        declared = checkpoint_kv_cache(qc)
    elif declared is None and name.lower() not in model_aliases():
        # A config.json given by path declares its own quantization_config.
        declared = (spec if spec is not None else model(name)).stored_kv_cache or None
    return declared


_CONFIG_SOURCE = re.compile(r"([\w.-]+/[\w.-]+) config\.json")


def model(name_or_path: str | Path | ModelSpec) -> ModelSpec:
    """A catalog model by id or by the Hugging Face id of a catalog model, or a Hugging Face
    style ``config.json`` (file or its folder); a :class:`ModelSpec` is returned as it is."""
    if isinstance(name_or_path, ModelSpec):
        return name_or_path
    name_or_path = str(name_or_path)
    # An empty id is Path("") = the current folder, whose config.json would be read unasked.
    require(
        name_or_path.strip() != "",
        "empty model id; accepted: a catalog id (gpuscale catalog models), a Hugging Face id "
        "of one, or a config.json path",
        field="model",
    )
    key = name_or_path.lower()
    if key in models():
        return models()[key]
    if key in model_aliases() and not Path(name_or_path).exists():
        return models()[model_aliases()[key]]
    path = Path(name_or_path)
    if os.path.isdir(path):  # False, not an error, for a name too long to look up
        path = path / "config.json"
    if path.suffix == ".json" or files.exists(path):
        from gpuscale.catalog.hf_config import model_from_config_file

        return model_from_config_file(path)
    raise unknown("model", name_or_path, models())


def default_gpus_per_node(device: str | Device) -> int:
    """The node every command and API function assumes when ``gpus_per_node`` is not given: the
    GPU's NVLink domain, so every GPU pair inside it is priced at the NVLink rate (8 on an
    HGX/OAM board; 72 in a GB200/GB300 NVL72 rack, whose datasheet puts 72 GPUs in one NVLink
    domain at 1.8 TB/s each; 4 on H200 NVL, whose bridge joins 4 cards). It never exceeds the
    bound of :func:`check_node`."""
    return gpu(device).nvlink_domain_gpus


def node_size(device: str | Device, gpus_per_node: int | None) -> int:
    """``gpus_per_node`` as given, or :func:`default_gpus_per_node` when it is None. The one
    check of a node size every command reads through here: a node holds at least one GPU (the
    serving placement and the search divide by it; 0 ended in a ZeroDivisionError)."""
    if gpus_per_node is None:
        return default_gpus_per_node(device)
    require(
        is_whole(gpus_per_node) and gpus_per_node >= 1,
        f"--gpus-per-node must be a positive integer, got {gpus_per_node!r}; accepted: the GPUs "
        "of one node",
        field="gpus_per_node",
    )
    return gpus_per_node


def check_node(device: Device, gpus_per_node: int) -> None:
    """Refuse a node larger than the fabric inside it. A node prices every GPU pair in it at the
    NVLink/xGMI rate, so it cannot hold more GPUs than that fabric joins (8 on an HGX/OAM board,
    72 in an NVL72 rack: ``nvlink_domain_gpus``, the default node), nor more than an 8-GPU
    server where the domain is smaller (H200 NVL: 4-card bridges, 8 cards a server; asked for
    explicitly, such a server is priced as one domain). PCIe cards have no such fabric: a server
    holds as many as it has slots, so their node size is not bounded."""
    intra = link(device.intra_link)
    most = max(device.nvlink_domain_gpus, DEFAULT_GPUS_PER_NODE)
    require(
        intra.kind not in ("nvlink", "xgmi") or gpus_per_node <= most,
        f"--gpus-per-node {gpus_per_node}: one {device.id} node holds at most {most} GPUs "
        f"({intra.id} joins {device.nvlink_domain_gpus}); accepted: 1 to {most} (more GPUs are "
        "more nodes, joined by --inter)",
        field="gpus_per_node",
    )


def cluster(
    gpu_id: str | Device,
    num_gpus: int,
    *,
    gpus_per_node: int | None = None,
    inter: str | Link = DEFAULT_INTER,
    nics_per_node: int | None = None,
    oversubscription: float = 1.0,
    count: str | None = None,
    count_field: str | None = "gpus",
) -> Cluster:
    """A homogeneous cluster of catalog parts. Default: the GPU's NVLink domain a node
    (:func:`default_gpus_per_node`); one NIC per GPU on RDMA
    fabrics (rail-optimized, as in DGX/HGX reference designs), one NIC per node on plain
    Ethernet (TCP sockets), where servers carry a single data port. ``count`` names
    ``num_gpus`` as the user gave it (default ``--gpus (N)``), ``count_field`` its argument,
    for the refusal of a count that leaves a node part-filled
    (:func:`gpuscale.specs.hardware.check_whole_nodes`): the product of a plan's degrees where
    no GPU count was typed."""
    device = gpu(gpu_id)
    fabric = link(inter)
    require(
        fabric.kind in NETWORK_KINDS,
        f"--inter {fabric.id} is a {fabric.kind} link inside a node, not a fabric between nodes; "
        f"accepted: {', '.join(k for k, v in links().items() if v.kind in NETWORK_KINDS)}",
    )
    per_node = node_size(device, gpus_per_node)
    check_node(device, per_node)
    intra = link(device.intra_link)
    require(
        nics_per_node is None or nics_per_node >= 1,
        f"--nics-per-node must be >= 1, got {nics_per_node}",
    )
    require(num_gpus >= 1, f"--gpus must be >= 1, got {num_gpus}", field="gpus")
    check_whole_nodes(num_gpus, per_node, count, count_field)
    return Cluster(
        device=device,
        num_gpus=num_gpus,
        gpus_per_node=per_node,
        intra=intra,
        inter=fabric,
        nics_per_node=nics_per_node
        if nics_per_node is not None
        else (per_node if fabric.rdma else 1),
        oversubscription=oversubscription,
    )


__all__ = [
    "DEFAULT_INTER",
    "InputError",
    "calibration_priors",
    "check_node",
    "cluster",
    "default_gpus_per_node",
    "gpu",
    "gpus",
    "link",
    "links",
    "model",
    "models",
    "node_size",
    "validation_bands",
]
