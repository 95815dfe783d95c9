"""Time the attention kernels of one PyTorch ring step on one GPU (a device check).

    python benchmarks/ring_step_kernels.py [--tokens 32768] [--heads 32] [--iters 5] [--json]

torchtitan's context-parallel rows (paper Table 5) run, per attention call on each rank, one
causal kernel over the rank's own ``tokens`` and then ``cp - 1`` non-causal kernels of the same
number of query-key pairs, in one of two shapes (torch/distributed/tensor/experimental/
_attention.py, ``_templated_ring_attention[_backward]``, round-robin load balance): the whole
local query against the first half of the received K/V (``i <= rank``) or the second half of
the query against all of it (``i > rank``), both as ``chunk`` views, called through
``aten._scaled_dot_product_flash_attention`` and its backward exactly as the ring calls them.
This script times the three kernels forward and backward on one GPU (no communication) and the
ring's fp32 merge of one step, and prints each kernel's time per query-key pair against the
causal kernel's: if a ring step's kernels cost what the causal kernel costs per pair (the cost
model's assumption, with FA2's causal penalty on the causal one only), the ratios are near or
below 1. benchmarks/cp_step_increments.py shows the measured runs at about 1.3x per pair; this
separates the kernels from everything else a ring step does. Needs CUDA; exits 2 without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any


def _time_ms(fn: Callable[[], Any], iters: int) -> float:
    import torch

    fn()  # warm-up (kernel selection, allocator)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) / iters


def _step_calls(
    q: Any, k: Any, v: Any, causal: bool, fwd: tuple[Any, ...]
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The ring's forward and backward SDPA calls of one step, as it makes them."""
    import torch

    aten = torch.ops.aten
    out, lse, cum_q, cum_k, max_q, max_k, seed, offset = fwd[:8]
    dout = torch.randn_like(out)

    def forward() -> Any:
        return aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal)

    def backward() -> Any:
        return aten._scaled_dot_product_flash_attention_backward(
            dout, q, k, v, out, lse, cum_q, cum_k, max_q, max_k, 0.0, causal, seed, offset
        )

    return forward, backward


def measure(tokens: int, heads: int, head_dim: int, iters: int) -> dict[str, Any]:
    import torch

    aten = torch.ops.aten
    dev, dt = "cuda", torch.bfloat16
    shape = (1, heads, tokens, head_dim)
    # Q, K, V as the ring sees them: BHSD views of BSHD storage for Q (the model's transpose),
    # contiguous BHSD for K/V (the ring calls key.contiguous() and reads received K/V from a
    # flat buffer reshaped to the key's shape).
    q = torch.randn(1, tokens, heads, head_dim, device=dev, dtype=dt).transpose(1, 2)
    k = torch.randn(shape, device=dev, dtype=dt)
    v = torch.randn(shape, device=dev, dtype=dt)
    half = tokens // 2
    cases = {
        "causal (step 0)": (q, k, v, True),
        "whole q x first half of k (i <= rank)": (
            q,
            k.chunk(2, dim=2)[0],
            v.chunk(2, dim=2)[0],
            False,
        ),
        "second half of q x all k (i > rank)": (q.chunk(2, dim=2)[1], k, v, False),
    }
    out: dict[str, Any] = {"tokens": tokens, "heads": heads, "head_dim": head_dim, "kernels": {}}
    for name, (qq, kk, vv, causal) in cases.items():
        fwd = aten._scaled_dot_product_flash_attention(qq, kk, vv, 0.0, causal)
        run_fwd, run_bwd = _step_calls(qq, kk, vv, causal, fwd)
        pairs = qq.shape[2] * kk.shape[2] * (0.5 if causal else 1.0)
        flops = 4.0 * pairs * heads * head_dim
        f_ms, b_ms = _time_ms(run_fwd, iters), _time_ms(run_bwd, iters)
        out["kernels"][name] = {
            "q_tokens": int(qq.shape[2]),
            "k_tokens": int(kk.shape[2]),
            "pairs": pairs,
            "forward_ms": f_ms,
            "backward_ms": b_ms,
            "forward_tflops": flops / f_ms / 1e9,
            "backward_tflops": 2.5 * flops / b_ms / 1e9,
        }
    base = out["kernels"]["causal (step 0)"]
    per_pair = (base["forward_ms"] + base["backward_ms"]) / base["pairs"]
    for entry in out["kernels"].values():
        entry["cost_per_pair_vs_causal"] = (
            (entry["forward_ms"] + entry["backward_ms"]) / entry["pairs"] / per_pair
        )
    # The fp32 merge of one step (_SDPAMerger._merge_one with convert_to_f32).
    acc = torch.randn(shape, device=dev, dtype=torch.float32)
    acc_lse = torch.randn(1, heads, tokens, 1, device=dev, dtype=torch.float32)
    blk = torch.randn(shape, device=dev, dtype=dt)
    blk_lse = torch.randn(1, heads, tokens, 1, device=dev, dtype=torch.float32)

    def merge() -> Any:
        b = blk.to(torch.float32)
        o2 = acc - torch.sigmoid(blk_lse - acc_lse) * (acc - b)
        return o2, acc_lse - torch.nn.functional.logsigmoid(acc_lse - blk_lse)

    out["merge_ms"] = _time_ms(merge, iters)
    out["half_tokens"] = half
    out["device"] = torch.cuda.get_device_name()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=32768, help="tokens per rank (default 32768)")
    parser.add_argument("--heads", type=int, default=32, help="query heads (K/V repeated to them)")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.tokens <= 0 or args.tokens % 256 or args.heads <= 0 or args.iters <= 0:
        print(
            "ring_step_kernels: --tokens must be a positive multiple of 256, --heads and --iters "
            "positive",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        import torch
    except ImportError:
        print("ring_step_kernels: needs torch with CUDA (torch is not installed)", file=sys.stderr)
        sys.exit(2)
    if not torch.cuda.is_available():
        print("ring_step_kernels: needs a CUDA GPU (none is visible)", file=sys.stderr)
        sys.exit(2)
    result = measure(args.tokens, args.heads, args.head_dim, args.iters)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"{result['device']}: {args.tokens} tokens per rank, {args.heads} heads x {args.head_dim}"
    )
    for name, k in result["kernels"].items():
        print(
            f"  {name:40s} q {k['q_tokens']:6d} k {k['k_tokens']:6d}  fwd {k['forward_ms']:7.2f} ms "
            f"({k['forward_tflops']:5.0f} TFLOP/s)  bwd {k['backward_ms']:7.2f} ms "
            f"({k['backward_tflops']:5.0f})  per pair vs causal {k['cost_per_pair_vs_causal']:.2f}"
        )
    print(f"  fp32 merge of one step: {result['merge_ms']:.2f} ms")


if __name__ == "__main__":
    main()
