"""A serving GEMM's time on a device: the one rule every serving model prices dense GEMMs by.

Where the profile holds kernel times measured on this device inside replayed CUDA graphs
(``Profile.graph_kernels``), a GEMM costs a fixed latency plus the roofline of its traffic at
the measured weight-streaming rate and of its math at the top of the FLOP curve
(:func:`graph_gemm_time`); elsewhere, the roofline over the profile's FLOP-indexed efficiency
curve with the kernel-launch floor (:func:`gpuscale.costmodel.compute.gemm_time`). The
continuous-batching iteration prices its dense GEMMs here (``IterationModel.gemm_s``); the
static-batch table (``costmodel/inference.py``), the baseline it is compared against, keeps the
FLOP curve on every GPU, as its call says.
"""

from __future__ import annotations

import numpy as np

from gpuscale.costmodel.compute import gemm_time, gemm_traffic_bytes
from gpuscale.costmodel.flops import Gemm
from gpuscale.costmodel.profile import GraphKernels, Profile
from gpuscale.specs import Device


def graph_gemm_time(
    g: Gemm,
    precision: str,
    dev: Device,
    profile: Profile,
    kernels: GraphKernels,
    weight_bytes: float | None = None,
) -> np.ndarray:
    """Time of ``g`` inside a replayed CUDA graph on a device whose kernels were measured
    (``Profile.graph_kernels``): a fixed latency plus the roofline of its traffic at the
    measured weight-streaming rate and of its math at the sustained rate of a large GEMM (the
    top of the profile's curve). On 964 GEMMs of serving shapes timed on an H200 (M = 1 to
    16,384 tokens, 0.5-822 MB of weights) it misses by 9.6% (BF16) and 12.7% (FP8 per-tensor)
    on average, the FLOP-indexed curve with the launch floor by 39% and 33% (generic.yaml
    ``graph_kernels``; ``benchmarks/device_kernels_vs_model.py``). ``weight_bytes``: bytes per
    stored weight element (None: ``precision``'s)."""
    peak = dev.peak(precision) * 1e12
    curve = profile.gemm_curve(dev.id, dev.generation, precision)
    math = g.flops / (peak * max(curve.efficiency))
    share = kernels.gemm_stream_efficiency or profile.hbm_efficiency
    stream = dev.hbm_bandwidth_gb_per_s * 1e9 * share
    memory = gemm_traffic_bytes(g, precision, weight_bytes) / stream
    return (kernels.gemm_latency_us * 1e-6 + np.maximum(math, memory)) * g.count


def serving_gemm_time(
    g: Gemm,
    precision: str,
    dev: Device,
    profile: Profile,
    weight_bytes: float | None = None,
) -> np.ndarray:
    """Seconds of the dense GEMMs ``g`` in a serving forward on ``dev``: measured graph
    kernels where the profile has them for this device (:func:`graph_gemm_time`), else the
    FLOP-curve roofline with the launch floor (``gemm_time``; stored serving weights need no
    per-GEMM cast)."""
    kernels = profile.graph_kernels_for(dev.id, dev.generation)
    if kernels is not None:
        return graph_gemm_time(g, precision, dev, profile, kernels, weight_bytes)
    launch = profile.const("kernel_launch_us") * 1e-6
    return gemm_time(g, precision, dev, profile, launch, weight_bytes, te_cast=False)
