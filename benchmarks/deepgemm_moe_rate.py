"""TensorRT-LLM's block-FP8 expert GEMMs on Hopper (DeepGEMM's grouped kernel): the serving
model's grouped-kernel ceiling against DeepGEMM's published rates, and against the dense FP8
curve the model priced these experts by before.

DeepGEMM's README ("Performance", deepseek-ai/DeepGEMM @55ab91f, 2025-03-25; H800 SXM5, whose
FP8 dense peak of 1,979 TFLOP/s is the H100 SXM's) times each grouped GEMM of a DeepSeek-V3
expert alone: gate+up (N=4096, K=7168) and down (N=7168, K=2048). The expert MLP runs both, the
up projection with twice the down's FLOPs, so its rate is 3 / (2 / up + 1 / down). For each
published layout the script prints that rate, the model's ceiling for the same expert load
(``IterationModel.moe_grouped_rate`` with the ``tensorrt-llm`` profile, which reads these
points back) and the dense ``hopper-fp8`` GEMM curve at the whole group's FLOPs (what the model
used before the profile had the kernel's curve).

    PYTHONPATH=src python benchmarks/deepgemm_moe_rate.py
"""

from __future__ import annotations

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism

# (layout, groups, rows per group, gate+up TFLOP/s, down TFLOP/s), DeepGEMM README @55ab91f.
POINTS = (
    ("masked", 4, 256, 932.0, 815.0),
    ("masked", 2, 512, 1040.0, 916.0),
    ("masked", 1, 1024, 1233.0, 925.0),
    ("contiguous", 8, 4096, 1346.0, 1214.0),
    ("contiguous", 4, 8192, 1346.0, 1214.0),
)


def model() -> IterationModel:
    return IterationModel(
        model=catalog.model("deepseek-v3"),
        cluster=catalog.cluster("h100-sxm", 1),
        par=Parallelism(),
        fmt=weight_format("fp8_block"),
        kv_dtype="bf16",
        profile=load_profile("tensorrt-llm"),
        iteration_overhead_s=0.0,
        per_sequence_overhead_s=0.0,
    )


def rows() -> list[tuple[str, int, int, float, float, float]]:
    """(layout, groups, rows, published MLP TFLOP/s, model ceiling, dense FP8 curve)."""
    it = model()
    dev = it.cluster.device
    h, f = float(it.model.hidden_size), float(it.model.ffn_hidden_size)
    dense = it.profile.gemm_curve(dev.id, dev.generation, "fp8")
    out = []
    for layout, groups, m, up, down in POINTS:
        published = 3.0 / (2.0 / up + 1.0 / down)
        ceiling = float(it.moe_grouped_rate(np.array([float(m)]))[0]) / 1e12
        # Before: each grouped GEMM at the dense curve read at the whole group's FLOPs.
        up_flops = 2.0 * groups * m * 2.0 * f * h
        down_flops = 2.0 * groups * m * f * h
        peak = dev.peak("fp8") * 1e12
        t = up_flops / (float(dense(up_flops)) * peak) + down_flops / (
            float(dense(down_flops)) * peak
        )
        before = (up_flops + down_flops) / t / 1e12
        out.append((layout, groups, m, published, ceiling, before))
    return out


def main() -> None:
    print(
        f"{'layout':10} {'groups':>6} {'rows':>5} {'published':>9} {'model':>7} {'ratio':>6} "
        f"{'dense curve':>11} {'ratio':>6}   (TFLOP/s of one expert MLP, FP8)"
    )
    for layout, groups, m, published, ceiling, before in rows():
        print(
            f"{layout:10} {groups:>6} {m:>5} {published:>9.0f} {ceiling:>7.0f} "
            f"{ceiling / published:>6.3f} {before:>11.0f} {before / published:>6.3f}"
        )


if __name__ == "__main__":
    main()
