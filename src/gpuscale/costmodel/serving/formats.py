"""Weight formats of serving engines: bytes per weight and the precision the GEMMs run at.

A format the GPU has a tensor-core rate for runs natively (W8A8 FP8 on Hopper, NVFP4 on
Blackwell). Otherwise the weights are dequantized inside a 16-bit GEMM ("weight-only"): vLLM's
``--quantization fp8`` on Ampere runs FP8 Marlin kernels (vLLM docs, "FP8 W8A8": "on GPUs without
FP8 support ... weight-only FP8 via Marlin"), MXFP4/NVFP4 on Hopper runs W4A16 kernels (vLLM
gpt-oss recipe, Marlin/Triton MoE), INT4 AWQ/GPTQ runs W4A16 (Lin et al. 2024, arXiv:2306.00978).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscale.errors import InputError
from gpuscale.specs import Device

FP4_KEYS = ("nvfp4", "fp4")
"""Names a catalog GPU may carry for its FP4 tensor-core rate."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    name: str
    weight_bytes: float
    """Bytes per linear-layer weight, scales included."""
    native: str
    """Tensor-core precision when the GPU has it (``bf16`` = no native low-precision path)."""


# Scale overheads: FP8 block scaling 1 fp32 per 128x128 block (DeepSeek-V3, arXiv:2412.19437
# Sec. 3.3.2); NVFP4 one FP8 scale per 16 values (NVIDIA Blackwell NVFP4 blog, 2025); MXFP4 one
# E8M0 per 32 (OCP MX spec v1.0); INT4 AWQ/GPTQ fp16 scale + zero per 128 (arXiv:2306.00978).
FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat(name="bf16", weight_bytes=2.0, native="bf16"),
        WeightFormat(name="fp16", weight_bytes=2.0, native="bf16"),
        WeightFormat(name="fp8", weight_bytes=1.0, native="fp8"),
        WeightFormat(name="fp8_block", weight_bytes=1.0 + 4.0 / (128 * 128), native="fp8"),
        WeightFormat(name="nvfp4", weight_bytes=0.5 + 1.0 / 16, native="fp4"),
        WeightFormat(name="mxfp4", weight_bytes=0.5 + 1.0 / 32, native="fp4"),
        WeightFormat(name="int8_wo", weight_bytes=1.0 + 2.0 / 128, native="bf16"),
        WeightFormat(name="int8", weight_bytes=1.0 + 2.0 / 128, native="bf16"),
        WeightFormat(name="fp8_wo", weight_bytes=1.0, native="bf16"),
        WeightFormat(name="int4_wo", weight_bytes=0.5 + 4.0 / 128, native="bf16"),
        WeightFormat(name="int4", weight_bytes=0.5 + 4.0 / 128, native="bf16"),
    )
}
"""Every ``--weights`` name accepted by ``gpuscale infer`` (the serving data's quantization
names: ``fp8``, ``fp8_block``, ``nvfp4``, ``int4_wo``; ``bf16`` when unquantized)."""


def weight_format(name: str) -> WeightFormat:
    # No fallback for an empty name: ``--weights ''`` was served as bf16 without a word.
    key = str(name).lower()
    if key not in FORMATS:
        raise InputError(
            f"--weights {name!r} is not a known format; accepted: {', '.join(FORMATS)}",
            field="weights",
        )
    return FORMATS[key]


def gemm_precision(fmt: WeightFormat, device: Device) -> str:
    """The precision the linear layers' math runs at on ``device``: the native low-precision
    rate where the GPU has it, else 16-bit with dequantized weights (weight-only)."""
    if fmt.native == "fp8" and "fp8" in device.peak_tflops:
        return "fp8"
    if fmt.native == "fp4":
        for key in FP4_KEYS:
            if key in device.peak_tflops:
                return key
    return device.half_precision


def is_weight_only(fmt: WeightFormat, device: Device) -> bool:
    return fmt.native != "bf16" and gemm_precision(fmt, device) == device.half_precision


LOW_PRECISION_MIN_COMPUTE_CAPABILITY = 7.5
"""Least NVIDIA compute capability whose GPUs run a checkpoint below 16 bits other than INT4:
vLLM's quantization support table (docs "Quantization: Supported Hardware", the same from v0.8
to v0.15) gives Volta (SM 7.0) none of AWQ, Marlin (GPTQ/AWQ/FP8), INT8 W8A8 or FP8 W8A8, and
its FP8 page: "FP8 models will run on compute capability >= 7.5 (Turing) as weight-only W8A16,
utilizing FP8 Marlin". INT4 stays (GPTQ runs on Volta in the same table)."""
INT4_KEYS = ("int4_wo", "int4")


def check_runs_on(fmt: WeightFormat, device: Device) -> None:
    """Refuse a format no serving kernel runs on ``device`` (an FP8, FP4 or INT8 checkpoint on
    a Volta GPU: :data:`LOW_PRECISION_MIN_COMPUTE_CAPABILITY`); it was priced as a weight-only
    GEMM there."""
    cc = device.compute_capability
    low = fmt.weight_bytes < 2.0 and fmt.name not in INT4_KEYS
    if low and cc is not None and cc < LOW_PRECISION_MIN_COMPUTE_CAPABILITY:
        # bf16 only where the GPU has it (sixteen_bit_on refuses it on a V100 or T4).
        sixteen = ("bf16", "fp16") if "bf16" in device.peak_tflops else ("fp16",)
        raise InputError(
            f"--weights {fmt.name}: no serving kernel runs it on {device.id} (compute "
            f"capability {cc:.1f}; FP8, FP4 and INT8 need {LOW_PRECISION_MIN_COMPUTE_CAPABILITY}"
            f" or later); accepted there: {', '.join(sixteen)}, {', '.join(INT4_KEYS)}",
            field="weights",
        )


def sixteen_bit_on(name: str, device: Device, *, stated: bool, flag: str) -> str:
    """``name`` (a weight format or a KV-cache dtype) as ``device`` holds it: bf16 on a GPU
    without bf16 (the catalog gives it no bf16 rate: V100 and T4, compute capability below 8.0)
    is refused when ``stated`` (vLLM: "Bfloat16 is only supported on GPUs with compute
    capability of at least 8.0", ``_check_if_gpu_supports_dtype``) and is fp16 when ``auto``
    chose it (the engines load a bf16 checkpoint in float16 there: vLLM ``_resolve_auto_dtype``
    "Your device ... doesn't support torch.bfloat16. Falling back to torch.float16 for
    compatibility"); it was priced as fp16 math under the name bf16. Any other name unchanged.
    ``flag``: the option that named it (``--weights``, ``--kv-dtype``)."""
    if name != "bf16" or "bf16" in device.peak_tflops:
        return name
    if stated:
        cc = device.compute_capability
        where = f" (compute capability {cc:.1f})" if cc is not None else ""
        raise InputError(
            f"{flag} bf16: {device.id}{where} has no bf16, and the engines refuse an explicit "
            f"bfloat16 there; accepted: {flag} fp16 (the same bytes), or auto",
            field=flag.lstrip("-").replace("-", "_"),
        )
    return "fp16"
