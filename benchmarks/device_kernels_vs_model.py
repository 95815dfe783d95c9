"""The serving model's kernel terms against kernels measured on a real GPU.

Reads a file written by ``benchmarks/device_serving_kernels.py`` on the device machine (the one
shipped: ``data/validation/device/h200_serving_kernels_2026-12-04.json``) and prints, for each
reading, the model's time for the same kernel on the same GPU through the functions the
serving model calls, and measured / model by regime. GEMMs are priced two ways: ``graph``, the
serving model's form where the profile holds the device's measured kernel times
(``graph_gemm_time``: latency + roofline at the streaming rate and the curve's top), and
``curve``, its form elsewhere (``gemm_time``: the FLOP-indexed curve, ``hbm_efficiency`` and
the ``kernel_launch_us`` floor); each plus ``graph_kernel_gap_us``. Attention: the
``attention`` term of ``IterationModel.parts_s``, per layer.

    python benchmarks/device_kernels_vs_model.py [--file F ...] [--profile vllm] [--gpu h200-sxm]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.compute import gemm_time
from gpuscale.costmodel.flops import Gemm
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.gemm import graph_gemm_time
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import _iteration_model

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (
    ROOT / "data/validation/device/h200_serving_kernels_2026-12-04.json",
    ROOT / "data/validation/device/h200_gemm_sweep_2026-12-04.json",
)
HEAD_DIM = 128
ATTENTION_MODELS = {"llama3.1-8b tp1": ("llama3.1-8b", 1), "llama3.1-70b tp8": ("llama3.1-70b", 8)}
"""The catalog model and TP degree of each attention reading's ``model`` label."""


def regime(m: int) -> str:
    if m <= 64:
        return "M <= 64 (decode, weight-bound)"
    if m <= 1024:
        return "64 < M <= 1024 (between)"
    return "M > 1024 (prefill, math-bound)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", nargs="+", default=[str(p) for p in SHIPPED])
    ap.add_argument(
        "--profile",
        default="vllm",
        choices=("vllm", "sglang", "tensorrt-llm"),
        help="engine whose profile's terms are compared",
    )
    ap.add_argument("--gpu", default="h200-sxm")
    ap.add_argument("--rows", action="store_true", help="print every GEMM reading")
    args = ap.parse_args()
    readings = [json.loads(Path(f).read_text()) for f in args.file]
    data = readings[0]
    gemms = [r for d in readings for r in d.get("gemms", []) + d.get("sweep_gemms", [])]
    dev = catalog.gpu(args.gpu)
    prof = load_profile(args.profile)
    launch = prof.const("kernel_launch_us") * 1e-6
    gap = prof.const("graph_kernel_gap_us") * 1e-6
    hbm = dev.hbm_bandwidth_gb_per_s * 1e9 * prof.hbm_efficiency
    print(f"{data['device']}, torch {data['torch']}, CUDA {data['cuda']}; profile {prof.name}")

    bw = data["bandwidth"]
    datasheet = dev.hbm_bandwidth_gb_per_s
    print(
        f"HBM: copy {bw['copy_gb_per_s']:.0f} GB/s ({bw['copy_gb_per_s'] / datasheet:.2f} of "
        f"{datasheet:.0f}), read {bw['read_gb_per_s']:.0f} ({bw['read_gb_per_s'] / datasheet:.2f})"
        f"; model hbm_efficiency {prof.hbm_efficiency:.2f}"
    )
    g = data["gaps"]
    print(
        f"per kernel in a replayed graph: {g['graph_us_per_kernel']:.2f} us; model "
        f"graph_kernel_gap_us {gap * 1e6:.2f}; eager launch {g['eager_us_per_kernel']:.2f} us"
    )

    # GEMMs: measured per-kernel time inside a graph (its dispatch gap included) against each
    # form plus graph_kernel_gap_us, as an iteration adds them (``serial_kernels``).
    kernels = prof.graph_kernels_for(dev.id, dev.generation)
    ratios: dict[tuple[str, str, str], list[float]] = {}
    intercept: dict[str, list[tuple[float, float]]] = {}
    for row in gemms:
        if "seconds" not in row:
            continue
        kind = row["kind"]
        prec = "bf16" if kind == "bf16" else "fp8"
        w_bytes = 2.0 if prec == "bf16" else 1.0
        one = np.ones(1)
        gm = Gemm("g", row["m"] * one, row["n"] * one, row["k"] * one, one)
        forms = {"curve": float(gemm_time(gm, prec, dev, prof, launch, w_bytes)[0]) + gap}
        if kernels is not None:
            graph = graph_gemm_time(gm, prec, dev, prof, kernels, w_bytes)
            forms["graph"] = float(graph[0]) + gap
        for form, model in forms.items():
            ratios.setdefault((form, kind, regime(row["m"])), []).append(row["seconds"] / model)
        if row["m"] <= 16:
            intercept.setdefault(kind, []).append((row["n"] * row["k"] * w_bytes, row["seconds"]))
        if args.rows:
            print(
                f"  {row.get('gemm', '')} {row['n']}x{row['k']} {kind:11} M={row['m']:>5} "
                f"{row['seconds'] * 1e6:8.1f} us  "
                + "  ".join(f"{f} {t * 1e6:8.1f}" for f, t in forms.items())
            )
    print("\nGEMMs, measured / model (median, min-max, count; mean |error|):")
    for (form, kind, reg), values in sorted(ratios.items()):
        err = statistics.mean(abs(v - 1.0) for v in values)
        print(
            f"  {form:5} {kind:11} {reg:32} {statistics.median(values):5.2f} "
            f"({min(values):.2f}-{max(values):.2f}, {len(values):>3}; {err:4.0%})"
        )
    print("\nWeight-bound GEMMs (M <= 16): time = a + weight bytes / B, least squares:")
    for kind, points in intercept.items():
        b = np.array([p[0] for p in points])
        t = np.array([p[1] for p in points])
        (a, inv), *_ = np.linalg.lstsq(np.c_[np.ones_like(b), b], t, rcond=None)
        worst = float(np.max(np.abs(a + b * inv - t) / t))
        print(
            f"  {kind:11} a = {a * 1e6:.2f} us (graph gap included), B = {1 / inv / 1e9:.0f} GB/s "
            f"({1 / inv / 1e9 / datasheet:.2f} of datasheet); worst residual {worst:.0%}"
        )

    adds = [r for d in readings for r in d.get("elementwise", [])]
    if adds:
        print("\nElementwise add (out = a + b), measured / model (gap + bytes at hbm_efficiency +")
        print("  kernel_launch_us as elsewhere, or + the measured elementwise latency):")
        for row in adds:
            base = gap + row["bytes"] / hbm
            forms = {"curve": base + launch}
            if kernels is not None:
                forms["graph"] = base + kernels.elementwise_latency_us * 1e-6
            print(
                f"  {row['bytes'] / 1e6:9.3f} MB moved {row['seconds'] * 1e6:8.2f} us  "
                + "  ".join(f"{f} x{row['seconds'] / t:.2f}" for f, t in forms.items())
            )

    # Attention: the model's own term (``IterationModel.parts_s``'s ``attention``, all layers)
    # per layer, for the model and TP degree each reading was taken in. torch's FlashAttention-2
    # has no split-KV path, so below about 32 sequences its decode runs one block per (sequence,
    # KV head) and is no reading of the engines' FlashDecoding / FlashInfer kernels.
    def attention_s(row_model: str, n_decode: float, context: float, prompt: float) -> float:
        name, tp = ATTENTION_MODELS[row_model]
        eng = engine(args.profile)
        it = _iteration_model(
            catalog.model(name), catalog.cluster(args.gpu, tp), Parallelism(tp=tp),
            weight_format("bf16"), "bf16", prof, eng,
        )  # fmt: skip
        one = np.ones(1)
        parts = it.parts_s(n_decode * one, context * one, prompt * one, prompt / 2 * one)
        return float(parts["attention"][0]) / it.model.num_layers

    print("\nDecode attention (SDPA FlashAttention, GQA folded), measured / model:")
    for row in data["decode_attention"]:
        model = attention_s(row["model"], row["batch"], row["context"], 0.0)
        print(
            f"  {row['model']:17} B={row['batch']:>4} L={row['context']:>6} "
            f"{row['seconds'] * 1e6:8.1f} us  model {model * 1e6:7.1f}  x{row['seconds'] / model:.2f}"
            f"  ({row['kv_gb_per_s']:.0f} GB/s)"
        )
    print("\nPrefill attention (causal SDPA), measured / model:")
    for row in data["prefill_attention"]:
        length = row["length"]
        flops = 4.0 * length * length / 2.0 * HEAD_DIM * row["q_heads"]
        model = attention_s(row["model"], 0.0, 0.0, float(length))
        print(
            f"  {row['model']:17} L={length:>6} {row['seconds'] * 1e3:7.3f} ms  "
            f"model {model * 1e3:7.3f}  x{row['seconds'] / model:.2f}  ({row['tflops']:.0f} TFLOP/s,"
            f" model {flops / model / 1e12:.0f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
