"""The GEMM efficiency curves of the shipped profiles against published matmul measurements.

A curve is the share of the dense peak a training step's GEMM of that many FLOPs sustains; a
microbenchmark of one GEMM in isolation is an upper bound on it (nothing else shares the SMs,
HBM or the power budget). So every curve must rise with GEMM size (bigger tiles fill the 132
SMs in fewer partial waves, NVIDIA 'Matrix Multiplication Background User's Guide', 'Wave
quantization') and the Hopper bf16 curve must stay at or below the measured cuBLAS rates.
"""

from __future__ import annotations

import itertools

import pytest

from gpuscale.costmodel.profile import load_profile

# H100 80GB HBM3 (sm_90) bf16 GEMMs as XLA's GPU cost model stores them, measured with
# xla/tools/matmul_perf_table_gen (cuBLAS) and checked in as the default table:
# openxla/xla xla/service/gpu/model/matmul_interpolator_data.h, entries key "sm_90",
# flops { key: "bf16xbf16->bf16" } in FLOP/s. (b, m, n, k) -> TFLOP/s.
XLA_SM90_BF16_TFLOPS = {
    (1, 1024, 2048, 256): 139.519,
    (1, 1024, 1024, 2048): 349.981,
    (1, 1024, 2048, 2048): 524.288,
    (1, 2048, 2048, 2048): 631.985,
    (4, 2048, 2048, 2048): 725.746,
    (1, 4096, 4096, 4096): 783.329,
    (2, 4096, 2048, 4096): 783.186,
}
# H100 80GB HBM3 FP8 cuBLASLt GEMMs with random data after 10,000 warm-up iterations (the GPU
# at its power-limited steady clock): samuel-bohman/AI-benchmarking-guide,
# Azure_Results/ND_H100_v5_results.md (CUDA 12.6, driver 560.35.03). (m, n, k) -> TFLOP/s.
AZURE_ND_H100_FP8_TFLOPS = {
    (1024, 1024, 1024): 274.1,
    (1024, 2145, 1024): 410.7,
    (2048, 2048, 2048): 1011.3,
    (4096, 4096, 4096): 1216.9,
    (8192, 8192, 8192): 1290.1,
    (6144, 12288, 12288): 1351.4,
    (16384, 16384, 16384): 1377.3,
    (32768, 32768, 32768): 1382.2,
}
H100_FP8_PEAK_TFLOPS = 1979.0
# A100-SXM4-80GB FP16 cuBLASLt, same method (Azure_Results/ND_A100_v4_results.md, CUDA 12.5):
# the Ampere curve sits below it by the same margin at the top, which is what makes the
# A100-fine / H100-off contrast of llm-foundry's tables something other than Hopper's GEMM share.
AZURE_ND_A100_FP16_TFLOPS = {
    (1024, 1024, 1024): 119.4,
    (1024, 2145, 1024): 132.8,
    (2048, 2048, 2048): 221.8,
    (4096, 4096, 4096): 228.0,
    (8192, 8192, 8192): 253.7,
    (6144, 12288, 12288): 250.8,
    (16384, 16384, 16384): 256.5,
}
A100_FP16_PEAK_TFLOPS = 312.0
# The catalog's dense bf16 peak of the H100 SXM (gpus.yaml, NVIDIA datasheet).
H100_BF16_PEAK_TFLOPS = 989.5


def _flops(b: int, m: int, n: int, k: int) -> float:
    return 2.0 * b * m * n * k


@pytest.mark.parametrize("name", ["generic", "megatron", "torchtitan", "llm-foundry", "nemo"])
def test_every_curve_rises_with_gemm_size(name: str) -> None:
    profile = load_profile(name)
    for key, curve in profile.gemm.items():
        pairs = list(itertools.pairwise(curve.efficiency))
        assert all(a <= b for a, b in pairs), f"{name}.gemm.{key} falls with size"


@pytest.mark.parametrize("shape", sorted(XLA_SM90_BF16_TFLOPS))
def test_hopper_bf16_curve_is_at_or_below_measured_cublas(shape: tuple[int, int, int, int]) -> None:
    curve = load_profile("generic").gemm_curve("h100-sxm", "hopper", "bf16")
    measured = XLA_SM90_BF16_TFLOPS[shape] / H100_BF16_PEAK_TFLOPS
    assert float(curve(_flops(*shape))) <= measured


@pytest.mark.parametrize("shape", sorted(AZURE_ND_H100_FP8_TFLOPS))
def test_hopper_fp8_curve_is_at_or_below_sustained_cublaslt(shape: tuple[int, int, int]) -> None:
    curve = load_profile("generic").gemm_curve("h100-sxm", "hopper", "fp8")
    measured = AZURE_ND_H100_FP8_TFLOPS[shape] / H100_FP8_PEAK_TFLOPS
    assert float(curve(_flops(1, *shape))) <= measured


@pytest.mark.parametrize("shape", sorted(AZURE_ND_A100_FP16_TFLOPS))
def test_ampere_curve_is_at_or_below_sustained_cublaslt(shape: tuple[int, int, int]) -> None:
    curve = load_profile("generic").gemm_curve("a100-sxm-80gb", "ampere", "fp16")
    measured = AZURE_ND_A100_FP16_TFLOPS[shape] / A100_FP16_PEAK_TFLOPS
    assert float(curve(_flops(1, *shape))) <= measured


def test_hopper_curves_never_exceed_the_best_measured_matmul() -> None:
    # The best measured shape (4096^3, 0.79 of the peak; generic.yaml's note of the device
    # tool's H200 reading, ~790 TFLOP/s, agrees).
    best = max(XLA_SM90_BF16_TFLOPS.values()) / H100_BF16_PEAK_TFLOPS
    generic = load_profile("generic")
    assert max(generic.gemm["hopper"].efficiency) <= best
    # FP8 reaches a smaller share of its (double) peak than bf16 of its own (cuBLASLt FP8 GEMMs
    # need per-tensor scaling and 16-bit outputs; the same holds on Blackwell, above).
    assert max(generic.gemm["hopper-fp8"].efficiency) <= max(generic.gemm["hopper"].efficiency)


def test_the_measured_points_rise_with_size() -> None:
    # A check on the transcription: along the measured points throughput rises with FLOPs too
    # (the property the curves copy), within the table's 0.1% repeat noise at equal FLOPs.
    ordered = sorted(XLA_SM90_BF16_TFLOPS.items(), key=lambda kv: _flops(*kv[0]))
    rates = [tflops for _, tflops in ordered]
    assert all(a <= b * 1.001 for a, b in itertools.pairwise(rates))
