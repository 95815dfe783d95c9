"""Calibration profiles: every efficiency factor of the cost model, named, shaped and sourced.

A profile is YAML (``catalog/data/profiles/NAME.yaml`` or any file given with ``--profile``). A
profile may name a ``base`` profile and override only some keys (framework profiles sit on top of
``generic``; a measured profile from ``gpuscale calibrate`` sits on top of a framework profile).

Schema (``schema_version: 1``)::

    name: generic
    base: null                    # or another profile name
    description: ...
    source: ...                   # where the numbers come from
    gemm:                         # achieved/peak matmul efficiency over GEMM size (2*m*n*k FLOPs),
      hopper:                     # keyed by device generation or catalog GPU id (id wins);
        flops:      [1e8, ...]    # interpolated linearly in log10(FLOPs), clamped at the ends
        efficiency: [0.05, ...]
    attention_efficiency: {hopper: 0.55, ...}   # fused (flash) attention, fraction of 16-bit peak
    attention_length:             # multiplies it by the query/key block length each kernel sees
      tokens: [512, ...]          # (shorter sequences and ring-attention chunks run slower)
      factor: [0.7, ...]
    moe_gemm:                     # optional: the engine's grouped expert-GEMM kernel, measured,
      hopper:                     # as a share of the 16-bit peak over one expert's MLP FLOPs
        flops: [1.5e9, ...]       # in a layer (serving model; keyed by device)
        efficiency: [0.27, ...]
      hopper-fp8: {...}           # measured in one precision: a share of that precision's peak,
                                  # used for experts computed in it (``moe_gemm_precise``)
    hbm_efficiency: 0.8           # achieved/peak device-memory bandwidth for streaming kernels
    graph_kernels:                # optional: kernel times inside a CUDA-graph-replayed step,
      h200-sxm:                   # measured on the device (serving model; keyed by id, then
        gemm_latency_us: 4.0      # generation): a GEMM's fixed time beyond the graph gap,
        elementwise_latency_us: 0.5     # an elementwise kernel's, and the weight-streaming share of
        gemm_stream_efficiency: 0.906   # the datasheet bandwidth (optional: hbm_efficiency)
    links:                        # achieved collective bandwidth and latency per level or kind
      nvlink: {bandwidth_efficiency: 0.8, latency_us: null}
      intra:  {bandwidth_gb_per_s: 360, latency_us: 8}   # absolute, from measurement
      opa-100: {bandwidth_efficiency: 0.92, collective_bandwidth_gb_per_s: 2.53}  # by link id;
                                  # ring collectives measured apart from point-to-point
    overlap: {dp: 0.9, ...}       # fraction of each communication kind hidden behind compute
    constants: {...}              # other named factors (see generic.yaml for their meaning)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gpuscale import files, shipped_yaml
from gpuscale.costmodel.profile_schema import validate_profile
from gpuscale.errors import InputError, require, unknown

PROFILE_SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class GemmCurve:
    """Matmul efficiency (achieved / dense peak) as a function of the GEMM's FLOPs."""

    flops: tuple[float, ...]
    efficiency: tuple[float, ...]

    def __post_init__(self) -> None:
        require(
            len(self.flops) == len(self.efficiency) and len(self.flops) >= 1,
            "gemm curve: 'flops' and 'efficiency' need the same, non-zero length",
        )
        require(
            all(a < b for a, b in zip(self.flops, self.flops[1:], strict=False)),
            "gemm curve: 'flops' must be strictly increasing",
        )
        require(
            all(0 < e <= 1 for e in self.efficiency),
            "gemm curve: every efficiency must be in (0, 1]",
        )

    def __call__(self, gemm_flops: np.ndarray | float) -> np.ndarray:
        x = np.log10(np.maximum(np.asarray(gemm_flops, dtype=float), 1.0))
        return np.interp(x, np.log10(self.flops), self.efficiency)


@dataclass(frozen=True, kw_only=True, slots=True)
class LinkCalibration:
    """How a level of the network really performs. Absolute values (from measurement) win over
    the efficiency factor applied to the catalog's rated bandwidth."""

    bandwidth_efficiency: float = 1.0
    bandwidth_gb_per_s: float | None = None
    latency_us: float | None = None
    collective_bandwidth_gb_per_s: float | None = None
    """Measured rate per NIC of NCCL's ring collectives (all-reduce, all-gather,
    reduce-scatter, broadcast) where it differs from point-to-point traffic; None: the same
    as :meth:`bandwidth`."""

    def bandwidth(self, rated_gb_per_s: float) -> float:
        if self.bandwidth_gb_per_s is not None:
            return self.bandwidth_gb_per_s
        return rated_gb_per_s * self.bandwidth_efficiency

    def collective_bandwidth(self, rated_gb_per_s: float) -> float:
        if self.collective_bandwidth_gb_per_s is not None:
            return self.collective_bandwidth_gb_per_s
        return self.bandwidth(rated_gb_per_s)

    def latency(self, rated_us: float) -> float:
        return rated_us if self.latency_us is None else self.latency_us


@dataclass(frozen=True, kw_only=True, slots=True)
class GraphKernels:
    """Kernel times inside a CUDA-graph-replayed serving step, measured on a device
    (``benchmarks/device_serving_kernels.py``). Each is on top of ``graph_kernel_gap_us``, the
    serial cost every kernel of a replayed graph pays."""

    gemm_latency_us: float
    """Fixed time of one GEMM besides its roofline: its prologue (first tiles in flight) and
    tail (the last wave draining), so a weight-bound GEMM takes latency + bytes / bandwidth."""
    elementwise_latency_us: float
    """Fixed time of one memory-bound elementwise kernel besides its bytes."""
    gemm_stream_efficiency: float | None = None
    """Share of the datasheet HBM bandwidth a weight-bound GEMM streams its weights at; None:
    the profile's ``hbm_efficiency``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Profile:
    name: str
    description: str = ""
    source: str = ""
    gemm: Mapping[str, GemmCurve] = field(default_factory=dict)
    attention_efficiency: Mapping[str, float] = field(default_factory=dict)
    attention_length: GemmCurve | None = None
    """Factor on attention efficiency over the sequence chunk one kernel processes."""
    moe_gemm: Mapping[str, GemmCurve] = field(default_factory=dict)
    """Measured rate of the engine's grouped expert-GEMM kernel, as a share of the 16-bit peak
    (keys ``<device>``) or of one precision's peak (keys ``<device>-<precision>``), over the
    FLOPs one expert's MLP does in a layer (read by the serving model; empty: none)."""
    hbm_efficiency: float = 0.8
    graph_kernels: Mapping[str, GraphKernels] = field(default_factory=dict)
    """Kernel times measured inside replayed CUDA graphs, by device id or generation (read by
    the serving model; empty: none measured, the roofline with ``kernel_launch_us`` floors)."""
    links: Mapping[str, LinkCalibration] = field(default_factory=dict)
    overlap: Mapping[str, float] = field(default_factory=dict)
    constants: Mapping[str, float] = field(default_factory=dict)
    framework: str = ""
    """The built-in framework profile this one is, or is laid over (validation regimes are
    keyed by it)."""
    measured_on: Mapping[str, Any] = field(default_factory=dict)
    """What a calibrated profile was measured on (``device``, ``backend``, ...); empty for
    built-in profiles."""

    def mismatch(self, device_id: str, generation: str) -> str | None:
        """Why this profile may not describe ``device_id``, or None."""
        measured = str(self.measured_on.get("device", "") or "")
        if measured and measured not in (device_id, generation):
            return (
                f"profile '{self.name}' was measured on {measured}, not {device_id}: its "
                "curves and link figures describe that machine"
            )
        return None

    def gemm_curve(self, device_id: str, generation: str, precision: str = "bf16") -> GemmCurve:
        """The curve for this device and precision: ``<id>-<precision>``, ``<id>``,
        ``<generation>-<precision>``, ``<generation>``, then ``default``."""
        for key in (
            f"{device_id}-{precision}",
            device_id,
            f"{generation}-{precision}",
            generation,
            "default",
        ):
            if key in self.gemm:
                return self.gemm[key]
        raise InputError(
            f"profile '{self.name}' has no GEMM curve for '{device_id}' "
            f"({generation}); add one under gemm: or calibrate"
        )

    def moe_gemm_curve(self, device_id: str, generation: str) -> GemmCurve | None:
        """The grouped expert-GEMM curve for ``<id>``, then ``<generation>``; None where the
        profile measured none (the serving model then prices experts by ``gemm_curve``)."""
        for key in (device_id, generation):
            if key in self.moe_gemm:
                return self.moe_gemm[key]
        return None

    def moe_gemm_precise(self, device_id: str, generation: str, weights: str) -> GemmCurve | None:
        """The grouped expert-GEMM curve of the kernel the engine runs for experts stored in the
        weight format ``weights`` (``<id>-<weights>``, then ``<generation>-<weights>``), as a
        share of that format's math peak; None where the profile has no such kernel's curve."""
        for key in (f"{device_id}-{weights}", f"{generation}-{weights}"):
            if key in self.moe_gemm:
                return self.moe_gemm[key]
        return None

    def graph_kernels_for(self, device_id: str, generation: str) -> GraphKernels | None:
        """The kernel times measured for ``device_id``, then its ``generation``; None where
        none was measured."""
        for key in (device_id, generation):
            if key in self.graph_kernels:
                return self.graph_kernels[key]
        return None

    def attention(self, device_id: str, generation: str) -> float:
        """Fused attention efficiency on long sequences (see :meth:`attention_at`)."""
        for key in (device_id, generation, "default"):
            if key in self.attention_efficiency:
                return self.attention_efficiency[key]
        raise InputError(f"profile '{self.name}' has no attention efficiency for '{generation}'")

    def attention_at(
        self, device_id: str, generation: str, chunk_tokens: np.ndarray | float
    ) -> np.ndarray:
        """Attention efficiency when each kernel works on ``chunk_tokens`` queries and keys."""
        base = self.attention(device_id, generation)
        if self.attention_length is None:
            return np.full_like(np.asarray(chunk_tokens, dtype=float), base)
        return base * self.attention_length(chunk_tokens)

    def link(self, level: str, kind: str, link_id: str) -> LinkCalibration:
        """Calibration of ``level`` (``intra``/``inter``) for a link of ``kind`` and ``link_id``:
        a measured level entry wins, then the link id, then its kind."""
        for key in (level, link_id, kind):
            if key in self.links:
                return self.links[key]
        return LinkCalibration()

    def overlap_of(self, kind: str) -> float:
        return float(self.overlap.get(kind, 0.0))

    def const(self, name: str) -> float:
        try:
            return float(self.constants[name])
        except KeyError:
            raise InputError(f"profile '{self.name}' lacks constant '{name}'") from None


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping) and key != "gemm":
            out[key] = _merge(dict(out[key]), value)
        elif key == "gemm" and isinstance(value, Mapping):
            out[key] = {**dict(out.get(key) or {}), **value}
        else:
            out[key] = value
    return out


def _builtin_names() -> list[str]:
    folder = resources.files("gpuscale.catalog").joinpath("data").joinpath("profiles")
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def _read_raw(name_or_path: str) -> tuple[dict[str, Any], str]:
    path = Path(name_or_path)
    if name_or_path in _builtin_names():
        text = (
            resources.files("gpuscale.catalog")
            .joinpath("data")
            .joinpath("profiles")
            .joinpath(f"{name_or_path}.yaml")
            .read_text()
        )
        where = f"profile '{name_or_path}'"
        parse: Callable[[str], Any] = shipped_yaml.load
    elif name_or_path.strip() and (
        path.suffix in (".yaml", ".yml") or files.exists(path) or "/" in name_or_path
    ):  # "" is Path("") = the current folder: an empty name is unknown, not a folder to read
        text = files.read_text(
            path,
            label="profile",
            field="profile",
            expected="a YAML profile (write one with gpuscale calibrate)",
            missing=f"cannot read profile '{files.shown(path)}': no such file; give a YAML "
            f"file or a built-in profile ({', '.join(_builtin_names())})",
        )
        where = str(path)
        parse = yaml.safe_load  # a user's file: PyYAML's own errors (gpuscale.shipped_yaml)
    else:
        raise unknown("profile", name_or_path, _builtin_names())
    try:
        data = parse(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise InputError(f"{where}: not valid YAML{line}") from None
    if not isinstance(data, dict):
        raise InputError(f"{where}: a profile must be a YAML mapping")
    version = data.get("schema_version", PROFILE_SCHEMA_VERSION)
    require(
        version == PROFILE_SCHEMA_VERSION,
        f"{where}: schema_version {version} is not supported (this gpuscale reads {PROFILE_SCHEMA_VERSION})",
    )
    from gpuscale import catalog

    devices = sorted({*catalog.gpus(), *(d.generation for d in catalog.gpus().values())})
    validate_profile(data, where, devices, sorted(catalog.links()))
    return data, where


def _resolve(name_or_path: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
    require(name_or_path not in seen, f"profile base cycle: {' -> '.join((*seen, name_or_path))}")
    data, _ = _read_raw(name_or_path)
    base = data.get("base")
    if base:
        return _merge(_resolve(str(base), (*seen, name_or_path)), data)
    return data


def _length_curve(raw: Any) -> GemmCurve | None:
    if raw is None:
        return None
    return GemmCurve(
        flops=tuple(float(x) for x in raw["tokens"]),
        efficiency=tuple(float(x) for x in raw["factor"]),
    )


def _graph_kernels(path: str, raw: Mapping[str, Any]) -> GraphKernels:
    for name in ("gemm_latency_us", "elementwise_latency_us"):
        require(name in raw, f"{path}.{name} is missing (both latencies are needed)")
    stream = raw.get("gemm_stream_efficiency")
    return GraphKernels(
        gemm_latency_us=float(raw["gemm_latency_us"]),
        elementwise_latency_us=float(raw["elementwise_latency_us"]),
        gemm_stream_efficiency=None if stream is None else float(stream),
    )


def profile_from_dict(
    data: Mapping[str, Any], where: str = "profile", framework: str = ""
) -> Profile:
    """Build a :class:`Profile` from an already merged mapping, with one-line errors."""
    try:
        gemm = {
            str(k): GemmCurve(
                flops=tuple(float(x) for x in v["flops"]),
                efficiency=tuple(float(x) for x in v["efficiency"]),
            )
            for k, v in (data.get("gemm") or {}).items()
        }
        moe_gemm = {
            str(k): GemmCurve(
                flops=tuple(float(x) for x in v["flops"]),
                efficiency=tuple(float(x) for x in v["efficiency"]),
            )
            for k, v in (data.get("moe_gemm") or {}).items()
        }
        links = {str(k): LinkCalibration(**v) for k, v in (data.get("links") or {}).items()}
        return Profile(
            name=str(data.get("name", where)),
            description=str(data.get("description", "")),
            source=str(data.get("source", "")),
            gemm=gemm,
            attention_efficiency={
                str(k): float(v) for k, v in (data.get("attention_efficiency") or {}).items()
            },
            attention_length=_length_curve(data.get("attention_length")),
            moe_gemm=moe_gemm,
            hbm_efficiency=float(data.get("hbm_efficiency", 0.8)),
            graph_kernels={
                str(k): _graph_kernels(f"graph_kernels.{k}", v)
                for k, v in (data.get("graph_kernels") or {}).items()
            },
            links=links,
            overlap={str(k): float(v) for k, v in (data.get("overlap") or {}).items()},
            constants={str(k): float(v) for k, v in (data.get("constants") or {}).items()},
            measured_on=dict(data.get("measured_on") or {}),
            framework=framework,
        )
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}: malformed profile ({type(exc).__name__}: {exc})") from None


@cache
def load_profile(name_or_path: str = "generic") -> Profile:
    """A built-in profile by name (``generic``, ``megatron``...) or a YAML file path."""
    builtin = name_or_path if name_or_path in _builtin_names() else ""
    return profile_from_dict(_resolve(name_or_path), name_or_path, framework=builtin)


def load_profile_for(framework: str = "generic", overlay: str | None = None) -> Profile:
    """The framework's profile with a measured/custom profile file laid on top (its own
    ``base`` is ignored: the framework chosen on the command line is the base)."""
    if overlay is None:
        return load_profile(framework)
    data, where = _read_raw(overlay)
    merged = _merge(_resolve(framework), {k: v for k, v in data.items() if k != "base"})
    merged["name"] = str(data.get("name") or where)
    return profile_from_dict(merged, where, framework=framework)


def profile_names() -> list[str]:
    return _builtin_names()


SERVING_PROFILES: tuple[str, ...] = ("gpt-fast", "lmdeploy", "sglang", "tensorrt-llm", "vllm")
"""Built-in profiles of serving engines: their kernels, CUDA graphs and host costs are
inference's (``infer``'s engines, ``serving_engines.yaml`` ``cost_profile``). A training run is
priced with one of the others (:func:`training_profile_names`)."""


def training_profile_names() -> list[str]:
    """Built-in profiles of training stacks (every one but :data:`SERVING_PROFILES`)."""
    return [name for name in _builtin_names() if name not in SERVING_PROFILES]


def load_training_profile(framework: str = "generic", overlay: str | None = None) -> Profile:
    """:func:`load_profile_for` of a training stack; a serving engine's profile is refused in one
    line naming the training stacks."""
    require(
        framework not in SERVING_PROFILES,
        f"--framework {framework} is a serving engine's profile, not a training stack; "
        f"accepted: {', '.join(training_profile_names())}",
        field="framework",
    )
    return load_profile_for(framework, overlay)
