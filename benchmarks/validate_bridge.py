"""Training throughput on a held-out source: Megatron-Bridge's published pre-training runs.

    PYTHONPATH=src python benchmarks/validate_bridge.py [--rows] [--json]

Predicts every expressible row of ``data/validation/megatron_bridge_pretraining.csv`` (DGX
H100/B200/B300/GB200/GB300, Llama 3 and MoE models, NeMo containers 25.09-26.08) with the
training model as it is (nothing fitted to these rows; the row mapping and what it leaves out are
in ``gpuscale.validation.bridge_runs``) and prints the error of tokens/s per GPU: overall, dense
against MoE, per release, GPU and model, and how many runs the memory model says would not fit
although they ran. The same recipe measured in successive releases is the source's own
software-version spread: ``--spread`` prints, per recipe (model, system, precision, GPUs and
plan) measured in more than one release, the largest over the smallest throughput.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable

from gpuscale.api import estimate
from gpuscale.api.training import TrainingRun
from gpuscale.costmodel.memory import plan_memory
from gpuscale.costmodel.profile import load_training_profile
from gpuscale.validation import bridge_runs as bridge


def price(case: bridge.BridgeCase) -> tuple[float, bool]:
    answer = estimate(case.model_arg, **case.kwargs)
    return answer.tokens_per_s_per_gpu, answer.fits


def allocated_within_card(case: bridge.BridgeCase) -> bool:
    """The run's live tensors at their peak (torch ``max_memory_allocated``, as the memory model
    prices it) fit the card: what is left over is the allocator's reserve over them and the
    CUDA context and NCCL buffers."""
    kwargs = dict(case.kwargs)
    framework = kwargs.pop("framework")
    specs = TrainingRun(model=case.model_arg, **kwargs).specs
    row = plan_memory(specs.model, specs.training, specs.plan, load_training_profile(framework))
    return row["allocated"] <= specs.cluster.device.memory_bytes


def _line(label: str, results: list[bridge.BridgeResult]) -> str:
    s = bridge.summarize(results)
    return (
        f"{label:34s} n={s.n:3d}  mean {s.mape:6.1%}  median {s.median_abs:6.1%}  "
        f"bias {s.median_bias:+6.1%}  within 20% {s.within_20:4.0%}"
    )


def _groups(
    results: list[bridge.BridgeResult], key: Callable[[bridge.BridgeResult], str]
) -> dict[str, list[bridge.BridgeResult]]:
    out: dict[str, list[bridge.BridgeResult]] = defaultdict(list)
    for r in results:
        out[key(r)].append(r)
    return dict(sorted(out.items()))


def _recipe(r: bridge.BridgeResult) -> tuple[object, ...]:
    k = r.case.kwargs
    plan = tuple(k[name] for name in ("gpus", "tp", "pp", "vp", "cp", "ep", "mbs", "gbs", "zero"))
    return (r.case.model, r.case.variant, r.case.system, k["precision"], *plan)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--spread", action="store_true", help="same recipe across releases")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    rows = bridge.load()
    settings = bridge.load_settings()
    results, skipped = bridge.evaluate(rows, price, settings)
    latest = max(r.case.release for r in results)
    checked = [r for r in results if not r.case.memory_unchecked]
    no_fit = [r for r in checked if not r.fits]
    by_allocated = sum(allocated_within_card(r.case) for r in no_fit)
    unchecked: dict[str, int] = defaultdict(int)
    for r in results:
        if r.case.memory_unchecked:
            unchecked[r.case.memory_unchecked.split(" (")[0]] += 1
    if args.json:
        summary = {
            "rows": len(rows),
            "predicted": len(results),
            "skipped": [{"id": i, "reason": why} for i, why in skipped],
            "all": bridge.summarize(results).__dict__,
            "dense": bridge.summarize(r for r in results if not r.case.moe).__dict__,
            "moe": bridge.summarize(r for r in results if r.case.moe).__dict__,
            "latest_release": latest,
            "latest": bridge.summarize(r for r in results if r.case.release == latest).__dict__,
            "memory_checked": len(checked),
            "ran_but_not_fit": len(no_fit),
            "ran_but_not_fit_allocated_within_card": by_allocated,
            "memory_not_checked": dict(unchecked),
        }
        print(json.dumps(summary, indent=2))
        return

    print(f"source: {bridge.SOURCE}")
    print(
        f"rows: {len(rows)}, predicted: {len(results)}, not expressible: {len(skipped)} "
        "(held out: no value of the model was fitted to or checked on these runs)"
    )
    print("error of tokens/s per GPU (predicted / measured - 1):")
    print(_line("all", results))
    print(_line("dense (Llama 3)", [r for r in results if not r.case.moe]))
    print(_line("MoE", [r for r in results if r.case.moe]))
    print(_line(f"latest release ({latest})", [r for r in results if r.case.release == latest]))
    for title, key in (
        ("release", lambda r: r.case.release),
        ("GPU", lambda r: r.case.system),
        ("model", lambda r: r.case.model),
    ):
        print(f"by {title}:")
        for label, group in _groups(results, key).items():
            print("  " + _line(label, group))
    print(
        f"memory: {len(checked) - len(no_fit)} of {len(checked)} runs whose recipe settings the "
        f"model expresses fit by the memory model ({len(no_fit)} would not, although they ran); "
        f"{len(results) - len(checked)} not checked:"
    )
    for why, count in sorted(unchecked.items(), key=lambda kv: -kv[1]):
        print(f"  {count:3d}  {why}")
    print(
        f"  of the {len(no_fit)} that would not, {by_allocated} hold their allocated tensors "
        "within the card: the rest of their total is the allocator's reserve over them (profile "
        "memory_allocator_fragmentation) and the CUDA context and NCCL buffers"
    )
    # settings of the checked runs the memory model does not price either
    gather = sum(settings[r.case.id]["fp8_param_gather"].endswith("True") for r in checked)
    graphs = sum(
        bridge.setting(settings[r.case.id]["cuda_graph_impl"]) not in ("none", "") for r in checked
    )
    print(
        f"  of the {len(checked)} checked, also unpriced: FP8 parameter gather in {gather} "
        f"(weights kept in FP8: less memory), CUDA graphs in {graphs} (graph pools: more)"
    )
    print("not expressible:")
    reasons: dict[str, int] = defaultdict(int)
    for _, why in skipped:
        reasons[why] += 1
    for why, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {count:3d}  {why}")
    if args.spread:
        print("same recipe in several releases (max / min measured tokens/s per GPU):")
        for group in _groups(results, lambda r: repr(_recipe(r))).values():
            if len({r.case.release for r in group}) < 2:
                continue
            measured = [r.case.measured for r in group]
            first = group[0].case
            print(
                f"  {first.model:16s} {first.system:10s} {group[0].case.kwargs['precision']:6s} "
                f"releases {len(group):2d}  x{max(measured) / min(measured):.2f}  "
                f"model {group[0].predicted:8.0f}  measured {min(measured):8.0f}-{max(measured):8.0f}"
            )
    if args.rows:
        for r in results:
            k = r.case.kwargs
            plan = f"tp{k['tp']} pp{k['pp']} vp{k['vp']} cp{k['cp']} ep{k['ep']} mbs{k['mbs']}"
            print(
                f"{r.case.id:52s} {plan:28s} {r.case.measured:8.0f} {r.predicted:8.0f} "
                f"{r.error:+7.1%}{'' if r.fits else '  (does not fit)'}"
                + (
                    f"  [memory not checked: {r.case.memory_unchecked}]"
                    if r.case.memory_unchecked
                    else ""
                )
                + "".join(f"  [{note}]" for note in r.case.notes)
            )


if __name__ == "__main__":
    main()
