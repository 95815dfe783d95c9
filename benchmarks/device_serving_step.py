"""A whole prefill or decode step's kernels back to back for seconds on one real GPU: does a
sustained step run its kernels at the rate they reach one at a time on a cool GPU?

The serving model prices an iteration as the sum of its kernels' times, each read off isolated
kernels (``benchmarks/device_serving_kernels.py``: at most a few hundred milliseconds of work per
reading). An engine under load runs such steps back to back for minutes, where the GPU's power
limit can lower its clock (H200: 700 W). This script builds one GPU's share of a Llama-3.1-70B
TP-8 forward (80 layers of the shard's projections, FlashAttention through SDPA, the MLP's
activation; no all-reduce: one GPU) as a CUDA graph, replays it back to back for ``--seconds``,
and records every replay's time with the SM clock and the board power sampled through NVML, for:

- ``prefill``: one 8,192-token prompt (FP8 GEMMs with per-tensor scales, as the FP8 Llama
  launches run; BF16 attention), and
- ``decode``: 64 sequences of 2,048 cached tokens (the same GEMMs at M = 64; attention with the
  GQA group folded into the query length).

It also times each kind of kernel of the step alone (the same shapes, the first seconds of a cool
GPU) so the sum of the isolated kernels can be set against the replayed step, early and late.

    python benchmarks/device_serving_step.py --out $OUT/step.json [--seconds 15]   # ~1 min, H200
    python benchmarks/device_serving_step.py --smoke                               # CPU syntax run
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

# The kernel script beside this one (``python benchmarks/device_serving_step.py`` puts its
# folder first on sys.path): its CUDA-graph capture and event timer.
from device_serving_kernels import Timer, pick_device, replayable

HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, FFN = 8192, 64, 8, 128, 28672
"""Llama-3.1-70B (meta-llama/Llama-3.1-70B config.json)."""
TP = 8
LAYERS = 80


def shard() -> dict[str, tuple[int, int]]:
    """(N, K) of each projection on one of the TP ranks (Megatron column/row split)."""
    q, kv = Q_HEADS // TP * HEAD_DIM, KV_HEADS // TP * HEAD_DIM
    return {
        "qkv": (q + 2 * kv, HIDDEN),
        "o": (HIDDEN, q),
        "gate_up": (2 * FFN // TP, HIDDEN),
        "down": (HIDDEN, FFN // TP),
    }


class Layer:
    """One decoder layer's weights on one rank, stored FP8 (per-tensor scales) or BF16."""

    def __init__(self, device: str, fp8: bool, scale: int) -> None:
        self.fp8 = fp8
        self.w: dict[str, torch.Tensor] = {}
        for name, (n, k) in shard().items():
            w = torch.randn(n // scale, k // scale, device=device, dtype=torch.bfloat16) * 0.02
            self.w[name] = w.to(torch.float8_e4m3fn) if fp8 else w
        self.one = torch.ones((), device=device, dtype=torch.float32)

    def linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        w = self.w[name]
        if not self.fp8:
            return F.linear(x, w)
        # Static per-tensor activation scale (ModelOpt FP8 checkpoints): one cast kernel.
        x8 = x.to(torch.float8_e4m3fn)
        return torch._scaled_mm(
            x8, w.t(), scale_a=self.one, scale_b=self.one, out_dtype=torch.bfloat16
        )


def forward(
    layers: list[Layer],
    x: torch.Tensor,
    kv: tuple[torch.Tensor, torch.Tensor] | None,
    batch: int,
    scale: int,
) -> torch.Tensor:
    """The shard's layers on ``x`` (tokens x hidden): a prefill of ``batch`` prompts when
    ``kv`` is None (causal attention over the prompt), else one decode token for each of
    ``batch`` sequences over the cached ``kv``."""
    q_w, kv_w = Q_HEADS // TP * HEAD_DIM // scale, KV_HEADS // TP * HEAD_DIM // scale
    hq, hkv = Q_HEADS // TP, KV_HEADS // TP
    d = HEAD_DIM // scale
    tokens = x.shape[0]
    for layer in layers:
        h = F.rms_norm(x, (x.shape[-1],))
        qkv = layer.linear(h, "qkv")
        q, k, v = qkv.split((q_w, kv_w, kv_w), dim=-1)
        if kv is None:
            length = tokens // batch
            q = q.reshape(batch, length, hq, d).transpose(1, 2)
            k = k.reshape(batch, length, hkv, d).transpose(1, 2)
            v = v.reshape(batch, length, hkv, d).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            a = a.transpose(1, 2).reshape(tokens, q_w)
        else:
            k_cache, v_cache = kv
            q = q.reshape(batch, hkv, hq // hkv, d)
            a = F.scaled_dot_product_attention(q, k_cache, v_cache).reshape(tokens, q_w)
        x = x + layer.linear(a, "o")
        h = F.rms_norm(x, (x.shape[-1],))
        gate, up = layer.linear(h, "gate_up").chunk(2, dim=-1)
        x = x + layer.linear(F.silu(gate) * up, "down")
    return x


class Sampler:
    """SM clock (MHz) and board power (W) every 50 ms through NVML, while a run lasts."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml: Any = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no NVML (CPU smoke run, or no driver library): no samples
            self._nvml = None

    def _run(self, t0: float) -> None:
        nv = self._nvml
        while not self._stop.is_set():
            clock = nv.nvmlDeviceGetClockInfo(self._handle, nv.NVML_CLOCK_SM)
            power = nv.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
            self.samples.append((time.perf_counter() - t0, float(clock), power))
            time.sleep(0.05)

    def start(self, t0: float) -> None:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._run, args=(t0,), daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def sustained(run: Callable[[], Any], device: str, seconds: float) -> dict[str, Any]:
    """Replay ``run`` back to back for ``seconds``; each replay timed with CUDA events."""
    sampler = Sampler()
    t0 = time.perf_counter()
    sampler.start(t0)
    timer = Timer(device, budget_s=0.0)
    times: list[tuple[float, float]] = []
    while time.perf_counter() - t0 < seconds:
        times.append((time.perf_counter() - t0, timer.once(run)))
    sampler.stop()
    n = len(times)
    first = [t for _, t in times[: max(n // 10, 1)]]
    last = [t for _, t in times[-max(n // 10, 1) :]]
    clocks = [c for _, c, _ in sampler.samples]
    return {
        "replays": n,
        "first_tenth_s": statistics.median(first),
        "last_tenth_s": statistics.median(last),
        "times": times,
        "clock_power": sampler.samples,
        "clock_first_mhz": clocks[0] if clocks else None,
        "clock_min_mhz": min(clocks) if clocks else None,
        "clock_last_mhz": clocks[-1] if clocks else None,
    }


def isolated(device: str, body: Callable[[], Any]) -> float:
    """Median seconds of ``body`` replayed in a graph on its own, right after a pause."""
    run, _ = replayable(device, body)
    if device == "cuda":
        torch.cuda.synchronize()
        time.sleep(0.5)  # let the clock recover from the previous run
    return Timer(device, budget_s=0.05).median(run)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="serving_step.json")
    ap.add_argument("--seconds", type=float, default=15.0, help="sustained run per step kind")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (syntax check)")
    args = ap.parse_args()
    device = pick_device(args.smoke)
    if device is None:
        return 2
    scale = 16 if args.smoke else 1
    n_layers = 2 if args.smoke else LAYERS
    seconds = 0.2 if args.smoke else args.seconds
    torch.manual_seed(0)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": "llama3.1-70b, one TP-8 rank",
        "layers": n_layers,
    }
    fp8 = device == "cuda"  # torch's CPU build has no FP8 GEMM
    layers = [Layer(device, fp8, scale) for _ in range(n_layers)]
    hidden = HIDDEN // scale
    cases = {
        "prefill": {"tokens": 8192 // scale, "batch": 1, "context": 0},
        "decode": {"tokens": 64, "batch": 64, "context": 2048 // scale},
    }
    for kind, case in cases.items():
        x = torch.randn(case["tokens"], hidden, device=device, dtype=torch.bfloat16)
        kv = None
        if case["context"]:
            shape = (case["batch"], KV_HEADS // TP, case["context"], HEAD_DIM // scale)
            kv = (
                torch.randn(shape, device=device, dtype=torch.bfloat16),
                torch.randn(shape, device=device, dtype=torch.bfloat16),
            )

        def step(x: torch.Tensor = x, kv: Any = kv, case: dict[str, int] = case) -> None:
            forward(layers, x, kv, case["batch"], scale)

        # One layer's kernels alone (the first layer's weights), on a rested GPU.
        one_layer = isolated(
            device, lambda x=x, kv=kv, case=case: forward(layers[:1], x, kv, case["batch"], scale)
        )
        run, _ = replayable(device, step)
        if device == "cuda":
            torch.cuda.synchronize()
            time.sleep(1.0)
        row = sustained(run, device, seconds)
        row.update(case)
        row["one_layer_isolated_s"] = one_layer
        row["layers_isolated_sum_s"] = one_layer * n_layers
        result[kind] = row
        print(
            f"{kind}: {row['replays']} replays; step {row['first_tenth_s'] * 1e3:.2f} ms in the "
            f"first tenth, {row['last_tenth_s'] * 1e3:.2f} ms in the last; one layer alone "
            f"{one_layer * 1e6:.1f} us (x{n_layers} = {row['layers_isolated_sum_s'] * 1e3:.2f} ms);"
            f" SM clock {row['clock_first_mhz']} -> min {row['clock_min_mhz']} MHz",
            flush=True,
        )
        with open(args.out, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
