"""Where the model's step goes on Narayanan et al. 2021 Table 2's DeepSpeed ZeRO-3 rows (GPT-3
175B and the 530B model, no model parallelism, 384-2240 A100s), and what each candidate
mechanism for the 530B rows' remaining over-prediction would move.

    python benchmarks/zero3_gap.py [--json]

Prints, per row: the measured and predicted step, the gap in seconds, and the model's parts
(compute; the weight all-gathers split into ring latency, list-view host time, bandwidth and
copy passes; the gradient reduce-scatters; the post-step persistent gather; peak memory). Then
the weight bytes each GPU moves per measured second, and, per candidate mechanism, the seconds it
would add (+) or hide (-) on each row, from the model's own terms
(docs/investigations/training-throughput.md, "DeepSpeed ZeRO-3 on GPT-530B: what the remaining gap
is not"). Nothing here is fitted to the rows.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from gpuscale.costmodel.collectives import LevelBandwidth, RingGroup
from gpuscale.costmodel.communication import params_per_gpu
from gpuscale.costmodel.step import _compute_deduplicated, estimate_batch
from gpuscale.specs import PlanBatch
from gpuscale.specs.units import GIB
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, cases, load_all, load_profile, with_overrides

ROWS = [f"narayanan21-t2-0{i}" for i in range(1, 7)]
MAX_LIVE = 1e9
"""stage3_max_live_parameters default (deepspeed/runtime/zero/constants.py, v0.3.13-v0.5.x):
a prefetch is issued only while fewer elements than this are gathered."""
REDUCE_BUCKET = 5e8
"""reduce_bucket_size default (stage3.py FP16_DeepSpeedZeroOptimizer_Stage3.__init__)."""
CAPACITY_GIB = 80.0


def _weights(h: int, ffn: int) -> list[tuple[str, float]]:
    """A Megatron GPT layer's gathered weight matrices in forward order, elements."""
    return [
        ("qkv", 3.0 * h * h),
        ("dense", 1.0 * h * h),
        ("h4h", 1.0 * h * ffn),
        ("4hh", 1.0 * ffn * h),
    ]


def _row(case: Case) -> dict[str, float]:
    profile = with_overrides(load_profile(case.framework), case.overrides)
    plans = PlanBatch.from_plans([case.plan])
    est = estimate_batch(case.model, case.cluster, case.training, plans, profile)
    m, n = case.model, case.plan.num_gpus
    layers = float(m.num_layers)
    gpn = case.cluster.gpus_per_node
    ring = RingGroup.of(LevelBandwidth.of(case.cluster, profile), n, min(n, gpn))
    hbm = case.cluster.pace_device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
    weight_bytes = float(params_per_gpu(m, plans)[0]) * 2.0
    gathers = layers * profile.const("zero3_gathers_per_layer")
    passes = 2.0 + profile.const("zero3_regather_on_recompute")
    host = profile.const("zero3_host_us_per_rank") * 1e-6 * n
    alpha = float(ring.time_s("all_gather", 0.0))
    bandwidth = float(ring.time_s("all_gather", weight_bytes)) - alpha
    copies = weight_bytes * profile.const("zero3_gather_copy_passes") / hbm
    tokens = case.training.seq_len * case.plan.global_batch
    measured = tokens / (n * case.measured_tokens_per_s_per_gpu)
    step = float(est.step_time_s[0])
    lc = _compute_deduplicated(m, case.cluster.pace_device, case.training, plans, profile)
    gemm_s = float(lc.layer_gemm_s[0])  # forward + recomputed forward + backward of one layer
    micro = case.plan.micro_batch * case.training.seq_len
    gemm_flops = 4.0 * 2.0 * micro * sum(s for _, s in _weights(m.hidden_size, m.ffn_hidden_size))
    return {
        "measured_s": measured,
        "step_s": step,
        "gap_s": measured - step,
        "error": measured / step - 1.0,
        "compute_s": float(est.compute_s[0]),
        "gather_latency_s": passes * gathers * alpha,
        "gather_host_s": passes * gathers * host,
        "gather_bandwidth_s": passes * bandwidth,
        "gather_copies_s": passes * copies,
        "reduce_scatter_s": float(est.comm_zero_s[0])
        - passes * (gathers * (alpha + host) + bandwidth + copies),
        "post_step_s": float(est.comm_dp_s[0]),
        "memory_gib": float(est.memory_per_gpu_bytes[0] / GIB),
        "weight_gb_per_s": (passes + 1.0) * weight_bytes / measured / 1e9,
        "gemm_tflops": gemm_flops / gemm_s / 1e12,
        "_alpha": alpha,
        "_host": host,
        "_bandwidth_per_byte": bandwidth / weight_bytes,
        "_copy_per_byte": copies / weight_bytes,
        "_gemm_s": gemm_s,
        "_attention_s": float(lc.attention_forward_s[0]),
        "_hbm": hbm,
    }


def _prefetch_hidden_s(case: Case, r: dict[str, float]) -> float:
    """Seconds a working v0.3.13 prefetch would hide: each weight's gather runs beside the
    previous weight module's matmul when that module's own weight (the live elements then) is
    under ``MAX_LIVE`` (PartitionedParameterCoordinator.prefetch_next_sub_modules); the backward
    walks the same chain in reverse. Each overlapped pair hides min(matmul, gather)."""
    m = case.model
    weights = _weights(m.hidden_size, m.ffn_hidden_size)
    total = sum(s for _, s in weights)

    def gather(size: float) -> float:
        byte = size * 2.0
        return r["_alpha"] + r["_host"] + byte * (r["_bandwidth_per_byte"] + r["_copy_per_byte"])

    # forward and recomputed forward: 1/4 of the layer's matmul time each, split by size
    fwd = [r["_gemm_s"] / 4.0 * s / total for _, s in weights]
    hidden = 0.0
    for k in range(len(weights)):
        prev = (k - 1) % len(weights)  # the first weight follows the previous layer's last
        if weights[prev][1] < MAX_LIVE:
            hidden += 2.0 * min(fwd[prev], gather(weights[k][1]))
    # backward (2 forward-equivalents of matmul), the chain in reverse
    back = list(reversed(weights))
    for k in range(1, len(back)):
        if back[k - 1][1] < MAX_LIVE:
            hidden += min(2.0 * fwd[len(weights) - k], gather(back[k][1]))
    return -hidden * m.num_layers


def _ipg_flushes_per_layer(case: Case) -> int:
    """reduce_ipg_grads calls per layer in backward (reduce_independent_p_g_buckets_and_remove
    _grads): a flush whenever the bucket's elements plus the next gradient pass
    ``REDUCE_BUCKET``; a larger-than-bucket gradient is counted in the bucket, so the next one
    flushes too."""
    h, ffn = case.model.hidden_size, case.model.ffn_hidden_size
    grads = [ffn * h, h, h * ffn, ffn, h, h, h * h, h, 3 * h * h, 3 * h, h, h]
    flushes, elements = 0, 0.0
    for g in grads:
        if elements + g > REDUCE_BUCKET:
            flushes += 1
            elements = 0.0
        elements += g
    return flushes


def figures() -> dict[str, dict[str, float]]:
    """Every row's parts and candidate seconds (the ``--json`` output, keyed by row id)."""
    mapped, _ = cases(r for r in load_all(DATA_DIR) if r["id"] in ROWS)
    out: dict[str, dict[str, float]] = {}
    for c in mapped:
        r = _row(c)
        passes_bytes = r["gather_bandwidth_s"] / max(r["_bandwidth_per_byte"], 1e-30)
        flushes = _ipg_flushes_per_layer(c) * c.model.num_layers
        r.update(
            gpus=float(c.plan.num_gpus),
            micro_batch=float(c.plan.micro_batch),
            prefetch_s=_prefetch_hidden_s(c, r),
            ipg_div_s=flushes * 2 * REDUCE_BUCKET * 2.0 / r["_hbm"],
            debug_norm_s=passes_bytes / r["_hbm"],  # one read of every gathered weight
        )
        out[c.id] = {k: v for k, v in r.items() if not k.startswith("_")}
    return out


COLUMNS = {
    "measured_s": "meas",
    "step_s": "model",
    "gap_s": "gap",
    "compute_s": "compute",
    "gather_latency_s": "ag lat",
    "gather_host_s": "ag host",
    "gather_bandwidth_s": "ag bw",
    "gather_copies_s": "ag copy",
    "reduce_scatter_s": "rs",
    "post_step_s": "post",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    rows = figures()
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print("DeepSpeed ZeRO-3 rows of Narayanan et al. 2021 Table 2 (seconds per step, m = 1)")
    heads = " ".join(f"{h:>8s}" for h in COLUMNS.values())
    print(f"{'row':20s} {'gpus':>5s} {'mbs':>3s} {heads} {'error':>7s} {'GiB':>6s}")
    for rid, r in rows.items():
        cells = " ".join(f"{r[k]:8.1f}" for k in COLUMNS)
        print(
            f"{rid:20s} {r['gpus']:5.0f} {r['micro_batch']:3.0f} {cells} "
            f"{r['error']:+7.1%} {r['memory_gib']:6.1f}"
        )
    print("\nfp16 weight bytes each GPU gathers and reduce-scatters per measured second, and the")
    print("model's matmul rate:")
    for rid, r in rows.items():
        print(
            f"  {rid}: {r['weight_gb_per_s']:5.1f} GB/s   matmuls {r['gemm_tflops']:5.0f} TFLOP/s"
        )
    print("\ncandidate mechanisms: seconds each would add (+) or hide (-) per row")
    print(
        f"{'row':20s} {'gap':>7s} {'prefetch':>9s} {'ipg div':>8s} {'dbg norm':>9s} {'memory':>10s}"
    )
    for rid, r in rows.items():
        memory = f"{r['memory_gib']:.0f}/{CAPACITY_GIB:.0f}"
        print(
            f"{rid:20s} {r['gap_s']:+7.1f} {r['prefetch_s']:+9.1f} {r['ipg_div_s']:+8.1f} "
            f"{r['debug_norm_s']:+9.1f} {memory:>10s}"
        )
    print(
        "\nprefetch: v0.3.13's prefetch gated by stage3_max_live_parameters (off in v0.3.14-0.5.x,"
        "\n  the trace offset); ipg div: reduce_ipg_grads divides the whole 5e8-element bucket per"
        "\n  flush; dbg norm: fetch_sub_module's debug f-string evaluates param.norm() (v0.3.15-"
        "\n  v0.4.x); memory: predicted peak GiB of 80."
    )
    gaps = np.array([r["gap_s"] for r in rows.values()])
    print(f"\ngap, 175B rows: {gaps[:3].round(1).tolist()} s; 530B: {gaps[3:].round(1).tolist()} s")


if __name__ == "__main__":
    main()
