"""``gpuscale.api.catalog_listing``: the built-in GPUs, fabrics or models, each row with its
source; what ``gpuscale catalog KIND --json`` prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuscale import catalog
from gpuscale.api._arguments import checks_arguments
from gpuscale.api._json import document
from gpuscale.costmodel.params import total_params
from gpuscale.errors import InputError

KINDS = ("gpus", "links", "models")


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuRow:
    id: str
    name: str
    memory_gib: float
    hbm_gb_per_s: float
    tflops_16bit: float
    fp8_tflops: float | None
    intra_link: str
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRow:
    id: str
    name: str
    kind: str
    gb_per_s_per_port: float
    latency_us: float
    rdma: bool
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRow:
    id: str
    params_b: float
    """Total parameters in billions (every expert counted), to three decimals."""
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    experts: int
    source: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CatalogListing:
    """The entries of one catalog ``kind``, in catalog order."""

    kind: str
    rows: tuple[GpuRow, ...] | tuple[LinkRow, ...] | tuple[ModelRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return document({self.kind: list(self.rows)})

    def figures(self) -> list[Any]:
        return []


@checks_arguments
def catalog_listing(kind: str = "gpus") -> CatalogListing:
    """List the catalog's ``gpus`` (default), ``links`` (fabrics) or ``models``."""
    if kind == "gpus":
        return CatalogListing(
            kind=kind,
            rows=tuple(
                GpuRow(
                    id=d.id,
                    name=d.name,
                    memory_gib=d.memory_gib,
                    hbm_gb_per_s=d.hbm_bandwidth_gb_per_s,
                    tflops_16bit=d.peak(d.half_precision),
                    fp8_tflops=d.peak_tflops.get("fp8"),
                    intra_link=d.intra_link,
                    source=d.source,
                )
                for d in catalog.gpus().values()
            ),
        )
    if kind == "links":
        return CatalogListing(
            kind=kind,
            rows=tuple(
                LinkRow(
                    id=link.id,
                    name=link.name,
                    kind=link.kind,
                    gb_per_s_per_port=link.bandwidth_gb_per_s,
                    latency_us=link.latency_us,
                    rdma=link.rdma,
                    source=link.source,
                )
                for link in catalog.links().values()
            ),
        )
    if kind == "models":
        return CatalogListing(
            kind=kind,
            rows=tuple(
                ModelRow(
                    id=m.name,
                    params_b=round(total_params(m) / 1e9, 3),
                    layers=m.num_layers,
                    hidden=m.hidden_size,
                    heads=m.num_heads,
                    kv_heads=m.num_kv_heads,
                    experts=m.num_experts,
                    source=m.source,
                )
                for m in catalog.models().values()
            ),
        )
    raise InputError(f"unknown catalog kind {kind!r}; accepted: {', '.join(KINDS)}", field="kind")
