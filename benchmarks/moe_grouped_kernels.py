"""vLLM's grouped expert-GEMM kernels on Hopper: the serving model's ceiling against published
kernel benchmarks (``benchmarks/kernels/benchmark_moe.py``, the whole fused-MoE op).

For each published point: the op's useful FLOPs (2 x tokens x top-k x 3 x intermediate x hidden),
the measured time, and the model's time for the same op, the larger of the grouped-kernel
ceiling (``IterationModel.moe_grouped_rate``, the ``moe_gemm`` curve of ``vllm.yaml``) and the
read of every expert's weights at the profile's HBM efficiency. Rows marked ``curve`` are the
ones the curve was read from; the others are out of sample (memory-bound sizes, another
precision, older default configs).

    PYTHONPATH=src python benchmarks/moe_grouped_kernels.py
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism

# (label, source, gpu, weights, experts, intermediate per rank, hidden, top-k,
#  {tokens: measured us}, tokens the curve was read from)
POINTS = (
    (
        "Gemma4 BF16 tuned",
        "vLLM PR #44818",
        "h200-sxm",
        "bf16",
        128,
        704,
        2816,
        8,
        {256: 419.6, 512: 442.3, 1024: 528.4, 1536: 582.0, 2048: 728.2, 3072: 962.9, 4096: 1189.6},
        (2048, 3072, 4096),
    ),
    (
        "Mixtral TP2 BF16 tuned",
        "vLLM PR #24700",
        "h100-sxm",
        "bf16",
        8,
        7168,
        4096,
        2,
        {256: 536.77, 512: 662.33, 1024: 833.72, 1536: 1122.93},
        (1024, 1536),
    ),
    (
        "Qwen3-30B-A3B FP8 (Sep 2025 defaults)",
        "vLLM PR #24700, 'Main'",
        "h100-sxm",
        "fp8",
        128,
        768,
        2048,
        8,
        {1024: 536.33, 2048: 911.64, 3072: 1279.17, 4096: 1647.57},
        (),
    ),
)


def model_for(
    gpu: str, weights: str, experts: int, inter: int, hidden: int, topk: int
) -> IterationModel:
    base = catalog.model("qwen3-30b-a3b")
    spec = dataclasses.replace(
        base, hidden_size=hidden, ffn_hidden_size=inter, num_experts=experts, experts_per_token=topk
    )
    return IterationModel(
        model=spec,
        cluster=catalog.cluster(gpu, 1),
        par=Parallelism(),
        fmt=weight_format(weights),
        kv_dtype="bf16",
        profile=load_profile("vllm"),
        iteration_overhead_s=0.0,
        per_sequence_overhead_s=0.0,
    )


def main() -> None:
    print(
        f"{'kernel benchmark':38} {'source':22} {'tokens':>6} {'rows/exp':>8} "
        f"{'measured us':>11} {'TFLOP/s':>7} {'model us':>9} {'bound':>7} {'model/meas':>10}"
    )
    for label, source, gpu, weights, e, inter, hidden, topk, times, fitted in POINTS:
        it = model_for(gpu, weights, e, inter, hidden, topk)
        dev = it.cluster.device
        hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * it.profile.hbm_efficiency
        weight_read = e * 3.0 * inter * hidden * it.fmt.weight_bytes / hbm
        for tokens, measured_us in times.items():
            rows = tokens * topk / e
            flops = 2.0 * tokens * topk * 3.0 * inter * hidden
            math = flops / float(it.moe_grouped_rate(np.array([rows]))[0])
            model = max(math, weight_read)
            bound = "math" if math >= weight_read else "weights"
            tag = " curve" if tokens in fitted else ""
            print(
                f"{label:38} {source:22} {tokens:>6} {rows:>8.0f} {measured_us:>11.1f} "
                f"{flops / measured_us / 1e6:>7.0f} {model * 1e6:>9.1f} {bound:>7} "
                f"{model * 1e6 / measured_us:>10.2f}{tag}"
            )


if __name__ == "__main__":
    main()
