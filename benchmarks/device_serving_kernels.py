"""Kernel-level readings of the serving model's terms on one real GPU (run on the device machine).

The serving model (``costmodel/serving/iteration.py``) prices an iteration from a handful of
terms: the HBM bandwidth a weight-streaming GEMM reaches (``hbm_efficiency``), the GEMM
efficiency curve by FLOPs (``gemm``, ``gemm-fp8``), the serial cost of each kernel in a
CUDA-graph-replayed step (``graph_kernel_gap_us``), the decode attention's KV read and the
prefill attention's rate (``attention_efficiency``, ``attention_length``). Most were read off
other people's H100 measurements. This script measures each one on the GPU it runs on, in the
shapes a decode or prefill iteration of Llama-3.1-8B (TP1) and Llama-3.1-70B (TP8 shard) runs:

- ``bandwidth``: a large device-to-device copy (bytes read + written) and a large read (a sum).
- ``gaps``: a CUDA graph of many one-element kernels (the per-kernel cost inside a replayed
  step) and the same kernels launched eagerly (the host's launch rate).
- ``gemms``: ``F.linear`` in BF16 and ``torch._scaled_mm`` in FP8 (per-tensor and row-wise
  scales) at M = 1 .. 16,384 tokens, each inside a CUDA graph over enough weight copies that the
  weights never sit in L2 (as in a real step, where every layer's weights are distinct).
- ``decode_attention``: FlashAttention through SDPA with the GQA group folded into the query
  length (what FlashInfer's and FlashAttention's decode kernels do), B sequences x L context.
- ``prefill_attention``: causal SDPA (FlashAttention-2 in PyTorch) over one prompt of L tokens.

Each reading is a median over repeated graph replays timed with CUDA events. Output: one JSON
(``--out``) and a table. The readings are isolated kernels on a cool GPU, an upper bound on what
an engine's kernels reach inside a step. Compare them with the model on this machine:
``python benchmarks/device_kernels_vs_model.py``.

    python benchmarks/device_serving_kernels.py --out $OUT/serving_kernels.json   # ~2 min, H200
    python benchmarks/device_serving_kernels.py --smoke                           # CPU syntax run
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

# Projections of one layer on one GPU: (name, N outputs, K inputs). Llama-3.1-8B: hidden 4096,
# 32 query / 8 KV heads of 128, FFN 14336; Llama-3.1-70B: hidden 8192, 64 / 8 heads of 128, FFN
# 28672, split 8-way (Megatron column/row parallel). Source: the models' config.json on the Hub
# (meta-llama/Llama-3.1-8B, meta-llama/Llama-3.1-70B), as in src/gpuscale/catalog/data/models.yaml.
GEMM_SHAPES = {
    "llama3.1-8b tp1": [
        ("qkv", 6144, 4096),
        ("o", 4096, 4096),
        ("gate_up", 28672, 4096),
        ("down", 4096, 14336),
    ],
    "llama3.1-70b tp8": [
        ("qkv", 1280, 8192),
        ("o", 8192, 1024),
        ("gate_up", 7168, 8192),
        ("down", 8192, 3584),
    ],
}
TOKENS = (1, 4, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# (query heads, KV heads) per GPU for the two models above; head dim 128.
ATTENTION_HEADS = {"llama3.1-8b tp1": (32, 8), "llama3.1-70b tp8": (8, 1)}
DECODE_BATCH = (1, 8, 32, 128)
DECODE_CONTEXT = (1024, 4096, 16384)
PREFILL_LENGTH = (1024, 2048, 4096, 8192, 16384)
HEAD_DIM = 128
# ``--sweep``: weight shapes (N, K) from 1 MB to 470 MB of BF16 weights, and the token counts that
# separate the weight-bound from the math-bound regime, to fit the latency and bandwidth of a
# weight-bound GEMM and the shape dependence of the regime between.
SWEEP_N = (512, 1024, 2048, 4096, 8192, 16384, 28672)
SWEEP_K = (1024, 2048, 4096, 7168, 8192, 14336)
SWEEP_TOKENS = (1, 8, 32, 64, 128, 256, 512, 1024, 2048)
ELEMENTWISE_BYTES = tuple(2**p for p in range(14, 29, 2))
# ``--moe``: grouped expert GEMMs (torch._grouped_mm: CUTLASS's grouped GEMM on Hopper) of one
# MoE layer on one GPU, every expert given the same rows: (experts, [(name, N, K)]).
# DeepSeek-R1 (hidden 7168, 256 experts of intermediate 2048; config.json on the Hub) with its
# experts split 8-way by TP (each GPU: 256 experts of 256) or by EP (32 experts of 2048);
# gpt-oss-120b (hidden 2880, 128 experts of intermediate 2880) on one GPU.
MOE_SHAPES = {
    "deepseek-r1 tp8": (256, [("up", 512, 7168), ("down", 7168, 256)]),
    "deepseek-r1 ep8": (32, [("up", 4096, 7168), ("down", 7168, 2048)]),
    "gpt-oss-120b tp1": (128, [("up", 5760, 2880), ("down", 2880, 2880)]),
}
MOE_ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
COLD_BYTES = 256 * 2**20
"""Bytes of distinct operands a timed graph cycles through: several times the H200's 60 MB L2
(H200.md), so each kernel reads its weights (or KV) from HBM as a real step does."""


def pick_device(smoke: bool) -> str | None:
    """``cuda``, or ``cpu`` for a ``--smoke`` syntax check; None (after one line on stderr)
    when there is no CUDA device and no ``--smoke``: the device scripts' shared refusal."""
    device = "cpu" if smoke or not torch.cuda.is_available() else "cuda"
    if device == "cpu" and not smoke:
        print("no CUDA device: run with --smoke for a CPU syntax check", file=sys.stderr)
        return None
    return device


class Timer:
    """Median seconds of ``fn`` over repeated calls, timed with CUDA events (wall clock on a CPU
    smoke run). The number of calls is sized to about ``budget_s`` after one timed call."""

    def __init__(self, device: str, budget_s: float) -> None:
        self.device = device
        self.budget_s = budget_s

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def once(self, fn: Callable[[], Any]) -> float:
        if self.device != "cuda":
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e-3

    def median(self, fn: Callable[[], Any], warmup: int = 3) -> float:
        for _ in range(warmup):
            fn()
        self.sync()
        first = self.once(fn)
        reps = int(min(max(self.budget_s / max(first, 1e-7), 5), 200))
        return statistics.median(self.once(fn) for _ in range(reps))


def replayable(device: str, body: Callable[[], Any]) -> tuple[Callable[[], Any], str]:
    """``body`` captured in a CUDA graph (as engines replay decode steps), or run eagerly where a
    graph cannot hold it (and on a CPU smoke run); returns the callable and how it runs."""
    if device != "cuda":
        return body, "eager"
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            body()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
    except RuntimeError as exc:  # a kernel that cannot be captured: time it eagerly
        print(f"    graph capture failed ({str(exc).splitlines()[0][:80]}); eager", flush=True)
        torch.cuda.synchronize()
        return body, "eager"
    return graph.replay, "graph"


def copies_for(one_bytes: float, cap: int = 256) -> int:
    return int(min(max(math.ceil(COLD_BYTES / max(one_bytes, 1.0)), 2), cap))


def bandwidth(device: str, timer: Timer, gib: float) -> dict[str, float]:
    n = int(gib * 2**30) // 2
    src = torch.randn(n, device=device, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    copy_s = timer.median(lambda: dst.copy_(src))
    read_s = timer.median(lambda: src.sum(dtype=torch.float32))
    return {
        "bytes": 2.0 * n,
        "copy_s": copy_s,
        "copy_gb_per_s": 2 * 2.0 * n / copy_s / 1e9,
        "read_s": read_s,
        "read_gb_per_s": 2.0 * n / read_s / 1e9,
    }


def gaps(device: str, timer: Timer, kernels: int) -> dict[str, Any]:
    x = torch.zeros(1, device=device)

    def chain() -> None:
        for _ in range(kernels):
            x.add_(1.0)

    run, how = replayable(device, chain)
    replay_s = timer.median(run)
    eager_s = timer.median(chain)
    return {
        "kernels": kernels,
        "how": how,
        "graph_us_per_kernel": replay_s / kernels * 1e6,
        "eager_us_per_kernel": eager_s / kernels * 1e6,
    }


def fp8_operands(
    a: torch.Tensor, w: torch.Tensor, rowwise: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    fp8 = torch.float8_e4m3fn
    if rowwise:
        sa = torch.ones(a.shape[0], 1, device=a.device, dtype=torch.float32)
        sw = torch.ones(1, w.shape[0], device=a.device, dtype=torch.float32)
    else:
        sa = torch.ones((), device=a.device, dtype=torch.float32)
        sw = torch.ones((), device=a.device, dtype=torch.float32)
    return (a * 0.1).to(fp8), (w * 0.1).to(fp8), sa, sw


def gemm_reading(
    device: str, timer: Timer, m: int, n: int, k: int, kind: str, smoke: bool
) -> dict[str, Any]:
    """Seconds of one ``m x k`` by ``k x n`` product (weights stored ``n x k`` as nn.Linear's)."""
    w_bytes = n * k * (2 if kind == "bf16" else 1)
    copies = 2 if smoke else copies_for(w_bytes)
    a = torch.randn(m, k, device=device, dtype=torch.bfloat16)
    weights = [torch.randn(n, k, device=device, dtype=torch.bfloat16) for _ in range(copies)]
    row: dict[str, Any] = {"m": m, "n": n, "k": k, "kind": kind, "copies": copies}
    if kind == "bf16":

        def body() -> None:
            for w in weights:
                F.linear(a, w)

    else:
        rowwise = kind == "fp8_rowwise"
        ops = [fp8_operands(a, w, rowwise) for w in weights]
        del weights
        # cuBLASLt's FP8 GEMM wants M padded to 16 on some versions; engines pad it too
        # (vLLM's per-tensor FP8 path pads the batch to 17 rows for torch._scaled_mm).
        try:
            a8, w8, sa, sw = ops[0]
            torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)
        except RuntimeError as exc:
            row["error"] = str(exc).splitlines()[0][:160]
            return row

        def body() -> None:
            for a8, w8, sa, sw in ops:
                torch._scaled_mm(a8, w8.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16)

    run, how = replayable(device, body)
    seconds = timer.median(run) / copies
    row.update(
        how=how,
        seconds=seconds,
        tflops=2.0 * m * n * k / seconds / 1e12,
        weight_gb_per_s=w_bytes / seconds / 1e9,
    )
    return row


def elementwise(device: str, timer: Timer, nbytes: int) -> dict[str, Any]:
    """``out = a + b`` over ``nbytes`` of BF16 each (bytes moved: 3x), inside a graph over
    enough buffers to stay out of L2: the fixed time and bandwidth of a memory-bound kernel."""
    n = max(nbytes // 2, 1)
    copies = copies_for(3.0 * nbytes, cap=64)
    bufs = [
        tuple(torch.randn(n, device=device, dtype=torch.bfloat16) for _ in range(3))
        for _ in range(copies)
    ]

    def body() -> None:
        for a, b, out in bufs:
            torch.add(a, b, out=out)

    run, how = replayable(device, body)
    seconds = timer.median(run) / copies
    return {"bytes": 3.0 * 2 * n, "copies": copies, "how": how, "seconds": seconds}


def sweep(device: str, timer: Timer, result: dict[str, Any], save: Callable[[], None]) -> None:
    result["sweep_gemms"] = []
    for kind in ("bf16", "fp8_tensor"):
        for n in SWEEP_N:
            for k in SWEEP_K:
                for m in SWEEP_TOKENS:
                    row = gemm_reading(device, timer, m, n, k, kind, smoke=False)
                    result["sweep_gemms"].append(row)
                torch.cuda.empty_cache()
            print(f"sweep {kind} N={n} done", flush=True)
            save()
    result["elementwise"] = [elementwise(device, timer, b) for b in ELEMENTWISE_BYTES]
    for row in result["elementwise"]:
        print(f"add {row['bytes'] / 1e6:9.3f} MB moved: {row['seconds'] * 1e6:8.2f} us", flush=True)
    save()


def grouped_reading(
    device: str, timer: Timer, experts: int, rows: int, n: int, k: int, kind: str, touched: int
) -> dict[str, Any]:
    """One grouped GEMM over ``experts`` experts of ``k x n`` weights, ``rows`` tokens on each
    of the first ``touched`` of them (none on the rest), BF16 or FP8 with row-wise scales."""
    w_bytes = experts * n * k * (2 if kind == "bf16" else 1)
    copies = copies_for(w_bytes, cap=16)
    tokens = rows * touched
    counts = [rows if e < touched else 0 for e in range(experts)]
    offs = torch.tensor(counts, device=device, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    a = torch.randn(tokens, k, device=device, dtype=torch.bfloat16)
    row: dict[str, Any] = {
        "experts": experts,
        "touched": touched,
        "rows": rows,
        "n": n,
        "k": k,
        "kind": kind,
        "copies": copies,
        "weight_bytes": float(w_bytes),
    }
    # Weights [E, K, N] column-major per expert (the layout torch._grouped_mm takes).
    weights = [
        torch.randn(experts, n, k, device=device, dtype=torch.bfloat16).transpose(-2, -1)
        for _ in range(copies)
    ]
    try:
        if kind == "bf16":
            ops = [(a, w) for w in weights]

            def body() -> None:
                for x, w in ops:
                    torch._grouped_mm(x, w, offs=offs, out_dtype=torch.bfloat16)

        else:
            fp8 = torch.float8_e4m3fn
            a8 = (a * 0.1).to(fp8)
            sa = torch.ones(tokens, device=device, dtype=torch.float32)
            sw = torch.ones(experts, n, device=device, dtype=torch.float32)
            w8 = [(w.transpose(-2, -1) * 0.1).to(fp8).transpose(-2, -1) for w in weights]
            del weights

            def body() -> None:
                for w in w8:
                    torch._scaled_grouped_mm(a8, w, sa, sw, offs=offs, out_dtype=torch.bfloat16)

        body()
        run, how = replayable(device, body)
        seconds = timer.median(run) / copies
    except (RuntimeError, TypeError, NotImplementedError) as exc:
        row["error"] = str(exc).splitlines()[0][:160]
        return row
    touched_bytes = w_bytes * touched / experts
    row.update(
        how=how,
        seconds=seconds,
        tflops=2.0 * tokens * n * k / seconds / 1e12,
        weight_gb_per_s=touched_bytes / seconds / 1e9,
    )
    return row


def moe(device: str, timer: Timer, result: dict[str, Any], save: Callable[[], None]) -> None:
    result["grouped_gemms"] = []
    for model, (experts, shapes) in MOE_SHAPES.items():
        for name, n, k in shapes:
            for kind in ("bf16", "fp8_rowwise"):
                line = []
                for rows in MOE_ROWS:
                    for touched in (experts, experts // 4) if rows <= 16 else (experts,):
                        r = grouped_reading(device, timer, experts, rows, n, k, kind, touched)
                        r.update(model=model, gemm=name)
                        result["grouped_gemms"].append(r)
                        torch.cuda.empty_cache()
                        if touched == experts:
                            line.append(
                                f"{rows}:{r['weight_gb_per_s']:.0f}GB/s,{r['seconds'] * 1e6:.0f}us"
                                if "seconds" in r
                                else f"{rows}:{r['error'][:60]}"
                            )
                print(f"{model} {name} {kind}: " + " ".join(line), flush=True)
                save()


def decode_attention(
    device: str, timer: Timer, b: int, ctx: int, hq: int, hkv: int, smoke: bool
) -> dict[str, Any]:
    """One decode step's attention over ``ctx`` cached tokens for ``b`` sequences: the ``hq /
    hkv`` query heads that share a KV head are its queries (non-causal), so each KV head is read
    once, as FlashInfer's and FlashAttention's GQA decode kernels read it."""
    group = hq // hkv
    kv_bytes = 2 * b * hkv * ctx * HEAD_DIM * 2
    copies = 2 if smoke else copies_for(kv_bytes, cap=32)
    q = torch.randn(b, hkv, group, HEAD_DIM, device=device, dtype=torch.bfloat16)
    caches = [
        (
            torch.randn(b, hkv, ctx, HEAD_DIM, device=device, dtype=torch.bfloat16),
            torch.randn(b, hkv, ctx, HEAD_DIM, device=device, dtype=torch.bfloat16),
        )
        for _ in range(copies)
    ]

    def body() -> None:
        for k, v in caches:
            F.scaled_dot_product_attention(q, k, v)

    run, how = replayable(device, body)
    seconds = timer.median(run) / copies
    return {
        "batch": b,
        "context": ctx,
        "q_heads": hq,
        "kv_heads": hkv,
        "copies": copies,
        "how": how,
        "seconds": seconds,
        "kv_gb_per_s": kv_bytes / seconds / 1e9,
    }


def prefill_attention(device: str, timer: Timer, length: int, hq: int, hkv: int) -> dict[str, Any]:
    """Causal attention of one ``length``-token prompt (FLOPs: 4 x length^2 / 2 x head_dim x
    query heads, the causal half of QK^T and PV)."""
    q = torch.randn(1, hq, length, HEAD_DIM, device=device, dtype=torch.bfloat16)
    k = torch.randn(1, hkv, length, HEAD_DIM, device=device, dtype=torch.bfloat16)
    v = torch.randn_like(k)
    backend = "flash"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

        def body() -> None:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    except RuntimeError:
        backend = "default, KV heads repeated"
        kr = k.repeat_interleave(hq // hkv, dim=1)
        vr = v.repeat_interleave(hq // hkv, dim=1)

        def body() -> None:
            F.scaled_dot_product_attention(q, kr, vr, is_causal=True)

    seconds = timer.median(body)
    flops = 4.0 * length * length / 2.0 * HEAD_DIM * hq
    return {
        "length": length,
        "q_heads": hq,
        "kv_heads": hkv,
        "backend": backend,
        "seconds": seconds,
        "tflops": flops / seconds / 1e12,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="serving_kernels.json", help="JSON file to write")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (syntax check)")
    ap.add_argument(
        "--sweep", action="store_true", help="only the GEMM shape sweep and elementwise kernels"
    )
    ap.add_argument("--moe", action="store_true", help="only the grouped expert GEMMs")
    args = ap.parse_args()
    device = pick_device(args.smoke)
    if device is None:
        return 2
    timer = Timer(device, budget_s=0.002 if args.smoke else 0.05)
    tokens = (1, 16, 64) if args.smoke else TOKENS
    shrink = 16 if args.smoke else 1
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        result["sm_count"] = props.multi_processor_count
        result["memory_bytes"] = props.total_memory

    def save() -> None:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)

    t0 = time.perf_counter()
    if args.sweep or args.moe:
        (moe if args.moe else sweep)(device, Timer(device, budget_s=0.02), result, save)
        result["elapsed_s"] = time.perf_counter() - t0
        save()
        print(f"wrote {args.out} in {result['elapsed_s']:.0f} s")
        return 0
    result["bandwidth"] = bandwidth(device, timer, 0.01 if args.smoke else 4.0)
    bw = result["bandwidth"]
    print(f"copy {bw['copy_gb_per_s']:.0f} GB/s (read+write), read {bw['read_gb_per_s']:.0f} GB/s")
    result["gaps"] = gaps(device, timer, 50 if args.smoke else 500)
    g = result["gaps"]
    print(
        f"per kernel: graph {g['graph_us_per_kernel']:.2f} us ({g['how']}), "
        f"eager {g['eager_us_per_kernel']:.2f} us"
    )
    save()
    result["gemms"] = []
    for model, shapes in GEMM_SHAPES.items():
        for name, n, k in shapes:
            for kind in ("bf16", "fp8_tensor", "fp8_rowwise"):
                for m in tokens:
                    row = gemm_reading(device, timer, m, n // shrink, k // shrink, kind, args.smoke)
                    row.update(model=model, gemm=name)
                    result["gemms"].append(row)
                    if device == "cuda":
                        torch.cuda.empty_cache()
                done = [r for r in result["gemms"] if r["model"] == model and r["gemm"] == name]
                line = " ".join(
                    f"{r['m']}:{r['weight_gb_per_s']:.0f}GB/s,{r['tflops']:.0f}TF"
                    if "seconds" in r
                    else f"{r['m']}:err"
                    for r in done
                    if r["kind"] == kind
                )
                print(f"{model} {name} {kind}: {line}", flush=True)
            save()
    result["decode_attention"] = []
    for model, (hq, hkv) in ATTENTION_HEADS.items():
        for b in DECODE_BATCH[:2] if args.smoke else DECODE_BATCH:
            for ctx in (64,) if args.smoke else DECODE_CONTEXT:
                row = decode_attention(device, timer, b, ctx, hq, hkv, args.smoke)
                row["model"] = model
                result["decode_attention"].append(row)
                print(
                    f"decode attention {model} B={b} L={ctx}: {row['seconds'] * 1e6:.1f} us, "
                    f"KV {row['kv_gb_per_s']:.0f} GB/s",
                    flush=True,
                )
        save()
    result["prefill_attention"] = []
    for model, (hq, hkv) in ATTENTION_HEADS.items():
        for length in (128,) if args.smoke else PREFILL_LENGTH:
            row = prefill_attention(device, timer, length, hq, hkv)
            row["model"] = model
            result["prefill_attention"].append(row)
            print(
                f"prefill attention {model} L={length}: {row['seconds'] * 1e3:.3f} ms, "
                f"{row['tflops']:.0f} TFLOP/s ({row['backend']})",
                flush=True,
            )
    result["elapsed_s"] = time.perf_counter() - t0
    save()
    print(f"wrote {args.out} in {result['elapsed_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
