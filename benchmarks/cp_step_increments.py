"""What each added ring step costs in torchtitan's context-parallel rows, measured and modelled.

    python benchmarks/cp_step_increments.py [--json]

Every row of the torchtitan paper's Table 5 (Llama 3.1 8B on 8 GPUs, 32k tokens per rank, CP 1,
2, 4, 8; torchtitan benchmarks/llama3_h100_202412_torchtitan.md Table 2) runs the same kernels:
each rank holds 32k tokens in two 16k chunks and PyTorch's ring runs one causal 32k x 32k step
and ``cp - 1`` non-causal steps of equal work (32k x 16k or 16k x 32k,
torch/distributed/tensor/experimental/_attention.py ``_templated_ring_attention``). What grows
with ``cp`` is the number of steps, so the step time should be a straight line in ``cp - 1``.

For each row this prints the measured step (local tokens / measured tokens/s per GPU) and the
modelled one split into the attention kernels (forward, full-recompute forward, backward, over
the layers), the ring's own element-wise passes, the ring's exposed collectives and the rest;
then the cost of each added ring step, measured and modelled, and the straight line through
the CP 1, 4 and 8 rows with each row's distance from it. The 405B rows of Table 6 (TP 8, PP 8,
the ring across nodes) are listed for comparison as measured/modelled throughput. A
diagnostic: nothing here feeds the cost model.
"""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np

from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.ring_attention import merge_bytes, ring_shapes
from gpuscale.costmodel.step import estimate_plan
from gpuscale.specs import PlanBatch
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, load_all, to_case, with_overrides

ROWS_8B = tuple(f"torchtitan-paper-t5-{i}" for i in range(1, 5))
ROWS_405B = tuple(f"torchtitan-paper-t6-{i}" for i in range(1, 5))
# The rows the straight line is drawn through (CP 1, 4, 8); CP 2 is read against it.
LINE_CPS = (1, 4, 8)


def _parts(case: Case) -> dict[str, float]:
    """Measured and modelled step of one pipeline-free row, the model split in four."""
    profile = with_overrides(load_profile(case.framework), case.overrides)
    plan = case.plan
    est = estimate_plan(case.model, case.cluster, case.training, plan, profile)
    batch = PlanBatch.from_plans([plan])
    lc = layer_compute(case.model, case.cluster.device, case.training, batch, profile)
    layers = float(case.model.num_layers)
    # Full recompute: every attention call runs forward twice and backward once.
    kernels = layers * float(2.0 * lc.attention_forward_s[0] + lc.attention_backward_s[0])
    tokens = np.array([plan.micro_batch * case.training.seq_len / plan.cp], dtype=float)
    merges = 0.0
    if profile.const("cp_ring_unfused_passes") > 0 and plan.cp > 1:
        shapes = ring_shapes(
            case.model, tokens, np.array([plan.tp]), profile.const("cp_kv_heads_repeated") > 0
        )
        fwd, bwd = merge_bytes(shapes, np.array([plan.cp]))
        hbm = case.cluster.device.hbm_bandwidth_gb_per_s * 1e9 * profile.hbm_efficiency
        merges = layers * float(2.0 * fwd[0] + bwd[0]) / hbm
    step = float(est.step_time_s[0])
    comm = float(est.comm_cp_s[0])
    measured = float(tokens[0]) / case.measured_tokens_per_s_per_gpu
    return {
        "cp": float(plan.cp),
        "measured_step_s": measured,
        "model_step_s": step,
        "attention_kernels_s": kernels,
        "ring_passes_s": merges,
        "ring_comm_s": comm,
        "rest_s": step - kernels - merges - comm,
    }


def analyse() -> dict[str, object]:
    rows = {r["id"]: r for r in load_all(DATA_DIR)}
    small = {rid: _parts(to_case(rows[rid])) for rid in ROWS_8B}
    ordered = sorted(small.values(), key=lambda p: p["cp"])
    increments = []
    for lo, hi in itertools.pairwise(ordered):
        steps = hi["cp"] - lo["cp"]
        increments.append(
            {
                "from_cp": lo["cp"],
                "to_cp": hi["cp"],
                "measured_per_step_s": (hi["measured_step_s"] - lo["measured_step_s"]) / steps,
                "model_per_step_s": (hi["model_step_s"] - lo["model_step_s"]) / steps,
            }
        )
    # Least-squares line T = a + b (cp - 1) through the measured CP 1, 4, 8 steps.
    xs = np.array([p["cp"] - 1.0 for p in ordered if p["cp"] in LINE_CPS])
    ys = np.array([p["measured_step_s"] for p in ordered if p["cp"] in LINE_CPS])
    slope, intercept = np.polyfit(xs, ys, 1)
    line = {
        "intercept_s": float(intercept),
        "per_step_s": float(slope),
        "residuals": {
            str(int(p["cp"])): p["measured_step_s"] / (intercept + slope * (p["cp"] - 1.0)) - 1.0
            for p in ordered
        },
    }
    large = {}
    for rid in ROWS_405B:
        case = to_case(rows[rid])
        profile = with_overrides(load_profile(case.framework), case.overrides)
        est = estimate_plan(case.model, case.cluster, case.training, case.plan, profile)
        predicted = float(est.tokens_per_s[0]) / case.plan.num_gpus
        large[rid] = {
            "cp": float(case.plan.cp),
            "measured_tokens_per_s_per_gpu": case.measured_tokens_per_s_per_gpu,
            "model_tokens_per_s_per_gpu": predicted,
            "error": predicted / case.measured_tokens_per_s_per_gpu - 1.0,
        }
    return {"rows_8b": small, "increments_8b": increments, "line_8b": line, "rows_405b": large}


def _print(result: dict[str, object]) -> None:
    rows = result["rows_8b"]
    assert isinstance(rows, dict)
    print("Llama 3.1 8B, 8 GPUs, 32k tokens per rank (paper Table 5): seconds per step")
    print(
        f"{'row':24s} {'cp':>3s} {'measured':>9s} {'model':>7s} {'attn kern':>10s} "
        f"{'ring pass':>10s} {'ring comm':>10s} {'rest':>6s} {'error':>7s}"
    )
    for rid, p in rows.items():
        err = p["model_step_s"] / p["measured_step_s"] - 1.0
        print(
            f"{rid:24s} {int(p['cp']):3d} {p['measured_step_s']:9.2f} {p['model_step_s']:7.2f} "
            f"{p['attention_kernels_s']:10.2f} {p['ring_passes_s']:10.2f} "
            f"{p['ring_comm_s']:10.2f} {p['rest_s']:6.2f} {-err / (1.0 + err):+7.1%}"
        )
    print("\ncost of one added ring step (all layers, forward + recompute + backward):")
    increments = result["increments_8b"]
    assert isinstance(increments, list)
    for inc in increments:
        print(
            f"  CP {int(inc['from_cp'])} -> {int(inc['to_cp'])}: measured "
            f"{inc['measured_per_step_s']:.2f} s, model {inc['model_per_step_s']:.2f} s "
            f"({inc['measured_per_step_s'] / inc['model_per_step_s']:.2f}x)"
        )
    line = result["line_8b"]
    assert isinstance(line, dict)
    print(
        f"\nline through measured CP {', '.join(map(str, LINE_CPS))}: "
        f"{line['intercept_s']:.2f} s + {line['per_step_s']:.2f} s x (cp - 1); each row against it:"
    )
    print("  " + ", ".join(f"CP {cp} {r:+.1%}" for cp, r in line["residuals"].items()))
    large = result["rows_405b"]
    assert isinstance(large, dict)
    print(
        "\nLlama 3.1 405B, 512 GPUs, TP 8 x PP 8, ring across nodes (paper Table 6): tokens/s/GPU"
    )
    for rid, p in large.items():
        print(
            f"  {rid:24s} CP {int(p['cp'])}: measured {p['measured_tokens_per_s_per_gpu']:.0f}, "
            f"model {p['model_tokens_per_s_per_gpu']:.1f} ({p['error']:+.1%})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = analyse()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)


if __name__ == "__main__":
    main()
