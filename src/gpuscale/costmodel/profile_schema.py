"""What a calibration profile may contain: every key, its type and its range.

Each profile file is checked on its own before merging, so an error names the file and the key
path (``constants.kernel_launch_us must be a finite number >= 0; got -1``). Unknown keys are
errors with the closest known key suggested: a typo must not silently leave a default in place.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any

from gpuscale.costmodel.serving.formats import FORMATS
from gpuscale.errors import InputError, closest

Check = tuple[str, Callable[[float], bool]]

TINY = 1e-6
"""Smallest efficiency or rate a profile may state: a millionth of the datasheet rate (1 kB/s,
1 KiB) is far below any measured kernel or link (the lowest shipped curve point is 0.004), so a
smaller one is a typo; a subnormal one (hbm_efficiency 2e-313) overflowed the times to inf."""

NON_NEGATIVE: Check = ("a finite number >= 0", lambda v: v >= 0)
POSITIVE: Check = ("a finite number > 0 (at least 1e-6)", lambda v: v >= TINY)
FRACTION: Check = ("a number in (0, 1] (at least 1e-6)", lambda v: TINY <= v <= 1)
SHARE: Check = ("a number in [0, 1]", lambda v: 0 <= v <= 1)
AT_LEAST_ONE: Check = ("a finite number >= 1", lambda v: v >= 1)

CONSTANTS: dict[str, Check] = {
    "kernel_launch_us": NON_NEGATIVE,
    "low_precision_saved_inputs": SHARE,
    "graph_kernel_gap_us": NON_NEGATIVE,
    "moe_glue_kernels": NON_NEGATIVE,
    "moe_activation_quant_kernels": NON_NEGATIVE,
    "moe_block_m": AT_LEAST_ONE,
    "moe_weight_only_hopper_rate": FRACTION,
    "moe_fp8_over_bf16_rate": AT_LEAST_ONE,
    "moe_marlin_mxfp4_hidden_align": AT_LEAST_ONE,
    "moe_marlin_mxfp4_intermediate_align": AT_LEAST_ONE,
    "moe_marlin_mxfp4_hidden_out_align": AT_LEAST_ONE,
    "deepgemm_contiguous_align": AT_LEAST_ONE,
    "flashinfer_trtllm_fp8_gemm_peak_share": FRACTION,
    "fused_moe_chunk_tokens": AT_LEAST_ONE,
    "elementwise_hidden_passes": NON_NEGATIVE,
    "elementwise_ffn_passes": NON_NEGATIVE,
    "elementwise_kernels_per_layer": NON_NEGATIVE,
    "moe_dispatch_token_passes": NON_NEGATIVE,
    "moe_dispatch_slot_passes": NON_NEGATIVE,
    "moe_sort_slot_passes": NON_NEGATIVE,
    "attention_unpad_hidden_passes": NON_NEGATIVE,
    "attention_unpad_kernels": NON_NEGATIVE,
    "unfused_softmax_kernel_passes": NON_NEGATIVE,
    "loss_forward_bytes_per_logit": NON_NEGATIVE,
    "loss_backward_bytes_per_logit": NON_NEGATIVE,
    "grad_reduce_bytes": POSITIVE,
    "gradient_buffer_bytes": POSITIVE,
    "optimizer_bytes_per_param": POSITIVE,
    "zero3_gathers_per_layer": AT_LEAST_ONE,
    "zero3_reduce_scatters_per_layer": AT_LEAST_ONE,
    "zero3_host_us_per_rank": NON_NEGATIVE,
    "zero3_gather_copy_passes": NON_NEGATIVE,
    "zero3_reduce_copy_passes": NON_NEGATIVE,
    "zero3_copies_on_compute_stream": SHARE,
    "zero3_regather_on_recompute": SHARE,
    "zero3_param_persistence_threshold": NON_NEGATIVE,
    "comm_compute_interference": SHARE,
    "persistent_gemm_overlap_loss": SHARE,
    "selective_recompute_layer_fraction": SHARE,
    "host_memory_gb_per_s": POSITIVE,
    "host_memory_gib_per_gpu": POSITIVE,
    "decode_step_overhead_us": NON_NEGATIVE,
    "step_overhead_s": NON_NEGATIVE,
    "memory_cuda_context_gib": NON_NEGATIVE,
    "memory_nccl_buffers_gib": NON_NEGATIVE,
    "memory_allocator_fragmentation": AT_LEAST_ONE,
    "memory_headroom_fraction": SHARE,
    "pp_scatter_gather": SHARE,
    "attention_backward_relative_efficiency": FRACTION,
    "attention_causal_relative_efficiency": FRACTION,
    "lora_output_passes": NON_NEGATIVE,
    "fsdp_gather_once_under_pp": SHARE,
    "fsdp_pp_reduce_after_backward": SHARE,
    "fsdp_unsharded_grad_accumulation": SHARE,
    "cp_ring_unfused_passes": SHARE,
    "cp_kv_heads_repeated": SHARE,
    "cp_kv_all_gather": SHARE,
    "cp_comm_waits_for_attention_kernel": SHARE,
    "tp_fp8_all_gather": SHARE,
    "fp8_torchao_tensorwise": SHARE,
    "tp_overlap_exposed_in_forward": SHARE,
    "zero2_unit_collectives": SHARE,
    "cuda_launch_blocking": SHARE,
    "launch_blocking_host_ms_per_layer": NON_NEGATIVE,
}
"""Every named constant the cost model reads, with its accepted range."""

OVERLAP_KINDS = ("dp", "zero", "tp", "pp", "cp", "ep")
LINK_FIELDS: dict[str, Check] = {
    "bandwidth_efficiency": FRACTION,
    "bandwidth_gb_per_s": POSITIVE,
    "latency_us": NON_NEGATIVE,
    "collective_bandwidth_gb_per_s": POSITIVE,
}
GRAPH_KERNEL_FIELDS: dict[str, Check] = {
    "gemm_latency_us": NON_NEGATIVE,
    "elementwise_latency_us": NON_NEGATIVE,
    "gemm_stream_efficiency": FRACTION,
}
TOP_LEVEL = (
    "schema_version",
    "name",
    "base",
    "description",
    "source",
    "measured_on",
    "fit",
    "gemm",
    "attention_efficiency",
    "attention_length",
    "moe_gemm",
    "hbm_efficiency",
    "graph_kernels",
    "links",
    "overlap",
    "constants",
)
TEXT_KEYS = ("name", "base", "description", "source")
PRECISION_SUFFIXES = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp8", "nvfp4")
EXTRA_DEVICE_KEYS = ("default", "cpu")
LEVELS = ("intra", "inter")
LINK_KINDS = ("nvlink", "xgmi", "pcie", "infiniband", "roce", "ethernet")


def _fail(where: str, path: str, message: str) -> InputError:
    return InputError(f"{where}: {path} {message}")


def _number(where: str, path: str, value: Any, check: Check) -> float:
    described, ok = check
    if isinstance(value, str):
        # PyYAML reads 1.0e8 (no sign in the exponent) as text: accept numbers written so.
        try:
            value = float(value)
        except ValueError:
            raise _fail(where, path, f"must be {described}; got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _fail(where, path, f"must be {described}; got {value!r}")
    if not ok(float(value)):
        raise _fail(where, path, f"must be {described}; got {value!r}")
    return float(value)


def _mapping(where: str, path: str, value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, path, f"must be a mapping of {what}; got {type(value).__name__}")
    return value


def _known(where: str, path: str, key: Any, accepted: list[str] | tuple[str, ...]) -> None:
    if str(key) not in accepted:
        near = closest(str(key), accepted)
        hint = (
            f"did you mean {', '.join(near)}?"
            if near
            else f"accepted: {', '.join(sorted(accepted))}"
        )
        raise _fail(where, f"{path}.{key}" if path else str(key), f"is not a known key; {hint}")


def _curve(where: str, path: str, value: Any, x: str, y: str, y_check: Check) -> None:
    curve = _mapping(where, path, value, f"{{{x}: [...], {y}: [...]}}")
    for key in curve:
        _known(where, path, key, (x, y))
    xs, ys = curve.get(x), curve.get(y)
    if not isinstance(xs, list) or not isinstance(ys, list) or not xs or len(xs) != len(ys):
        raise _fail(where, path, f"needs '{x}' and '{y}' lists of the same, non-zero length")
    values = [_number(where, f"{path}.{x}[{i}]", v, POSITIVE) for i, v in enumerate(xs)]
    if any(b <= a for a, b in itertools.pairwise(values)):
        raise _fail(where, f"{path}.{x}", "must be strictly increasing")
    for i, v in enumerate(ys):
        _number(where, f"{path}.{y}[{i}]", v, y_check)


def validate_profile(
    data: Mapping[str, Any], where: str, device_keys: list[str], link_keys: list[str]
) -> None:
    """Raise :class:`InputError` naming the first key of ``data`` that is unknown, of the wrong
    type or out of range. ``device_keys``: GPU ids and generations a curve may be keyed by;
    ``link_keys``: catalog link ids."""
    for key in data:
        _known(where, "", key, TOP_LEVEL)
    for key in TEXT_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise _fail(where, key, f"must be text; got {type(data[key]).__name__}")
    for key in ("measured_on", "fit"):
        # Provenance written by gpuscale calibrate: what was measured, and how well it fitted.
        if key in data:
            _mapping(where, key, data[key], "notes (device, backend, residuals...)")

    devices = [*device_keys, *EXTRA_DEVICE_KEYS]
    with_precision = devices + [f"{d}-{p}" for d in devices for p in PRECISION_SUFFIXES]
    for key, curve in _mapping(where, "gemm", data.get("gemm") or {}, "device -> curve").items():
        _known(where, "gemm", key, with_precision)
        _curve(where, f"gemm.{key}", curve, "flops", "efficiency", FRACTION)
    for key, curve in _mapping(
        where, "moe_gemm", data.get("moe_gemm") or {}, "device -> curve"
    ).items():
        # ``<device>-<weight format>``: a curve of the kernel the engine runs for experts
        # stored in that format (``moe_gemm_precise``; e.g. DeepGEMM for block FP8 only).
        _known(where, "moe_gemm", key, devices + [f"{d}-{f}" for d in devices for f in FORMATS])
        _curve(where, f"moe_gemm.{key}", curve, "flops", "efficiency", FRACTION)
    for key, value in _mapping(
        where,
        "attention_efficiency",
        data.get("attention_efficiency") or {},
        "device -> efficiency",
    ).items():
        _known(where, "attention_efficiency", key, devices)
        _number(where, f"attention_efficiency.{key}", value, FRACTION)
    if data.get("attention_length") is not None:
        _curve(where, "attention_length", data["attention_length"], "tokens", "factor", FRACTION)
    if "hbm_efficiency" in data:
        _number(where, "hbm_efficiency", data["hbm_efficiency"], FRACTION)
    for key, entry in _mapping(
        where, "graph_kernels", data.get("graph_kernels") or {}, "device -> kernel times"
    ).items():
        _known(where, "graph_kernels", key, devices)
        # Checked per file: an overlay may restate one of them (the merged entry must hold
        # both latencies: ``profile_from_dict`` says which is missing). A null stream share
        # reads ``hbm_efficiency``.
        path = f"graph_kernels.{key}"
        for name, value in _mapping(where, path, entry, "kernel times").items():
            _known(where, path, name, tuple(GRAPH_KERNEL_FIELDS))
            if value is not None or name != "gemm_stream_efficiency":
                _number(where, f"{path}.{name}", value, GRAPH_KERNEL_FIELDS[name])

    for key, link in _mapping(
        where, "links", data.get("links") or {}, "level/kind/id -> link"
    ).items():
        _known(where, "links", key, [*LEVELS, *LINK_KINDS, *link_keys])
        for field, value in _mapping(where, f"links.{key}", link, "link fields").items():
            _known(where, f"links.{key}", field, tuple(LINK_FIELDS))
            if value is not None:
                _number(where, f"links.{key}.{field}", value, LINK_FIELDS[field])
    for key, value in _mapping(
        where, "overlap", data.get("overlap") or {}, "kind -> share"
    ).items():
        _known(where, "overlap", key, OVERLAP_KINDS)
        _number(where, f"overlap.{key}", value, SHARE)
    for key, value in _mapping(
        where, "constants", data.get("constants") or {}, "name -> value"
    ).items():
        _known(where, "constants", key, tuple(CONSTANTS))
        _number(where, f"constants.{key}", value, CONSTANTS[key])
