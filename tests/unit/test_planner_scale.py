"""The scaling curve, break-even, K runs, and the verdict: arithmetic on constructed curves,
directional claims on the real cost model."""

from __future__ import annotations

import itertools

import pytest

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner import defaults
from gpuscale.planner.scale import compare_runs, curve_from_counts, scale, scale_fabrics
from gpuscale.planner.search import CountResult, Hardware, PricedPlan, Workload
from gpuscale.planner.verdict import superlinear_reason, verdict
from gpuscale.specs import Plan, Training

PROFILE = load_profile("generic")


def _priced(
    n: int, tokens_per_s: float, plan: Plan | None = None, memory_gib: float = 30.0
) -> PricedPlan:
    plan = plan or Plan(dp=n, global_batch=1024, zero=1 if n > 1 else 0)
    return PricedPlan(
        plan=plan,
        num_gpus=n,
        gpus_per_node=8,
        step_time_s=1.0,
        tokens_per_s=tokens_per_s,
        mfu=0.4,
        memory_per_gpu_gib=memory_gib,
        fits=True,
        parts_s={"compute": 1.0},
        estimate={},
    )


def _count(
    n: int, tokens_per_s: float | None, plan: Plan | None = None, min_memory_gib: float = 30.0
) -> CountResult:
    top = () if tokens_per_s is None else (_priced(n, tokens_per_s, plan),)
    return CountResult(
        num_gpus=n,
        evaluated=10,
        fitting=len(top),
        top=top,
        nearest_faster_unfit=None,
        min_memory_gib=min_memory_gib,
    )


def test_speedup_efficiency_and_break_even_arithmetic() -> None:
    # marginal per added GPU, in units of one GPU's 100 tokens/s:
    # 1->2: 0.95, 2->4: 0.925, 4->8: 0.8, 8->16: 0.375 (below 0.5: break-even at 8)
    counts = [_count(1, 100), _count(2, 195), _count(4, 380), _count(8, 700), _count(16, 1000)]
    curve = curve_from_counts("ib-ndr400", counts)
    assert curve is not None
    assert curve.baseline_gpus == 1
    assert curve.break_even_gpus == 8
    eff = [p.efficiency for p in curve.points]
    assert eff == pytest.approx([1.0, 0.975, 0.95, 0.875, 0.625])
    assert curve.point(16).speedup == pytest.approx(10.0)
    assert curve.point(8).marginal_efficiency == pytest.approx(0.8)
    # a stricter threshold moves break-even down
    strict = curve_from_counts("ib-ndr400", counts, marginal_threshold=0.93)
    assert strict is not None and strict.break_even_gpus == 2


def test_efficiency_is_relative_to_the_smallest_count_that_fits() -> None:
    counts = [_count(1, None, min_memory_gib=140), _count(2, None), _count(4, 400), _count(8, 760)]
    curve = curve_from_counts("ib-ndr400", counts)
    assert curve is not None
    assert curve.baseline_gpus == 4
    assert curve.point(4).efficiency == pytest.approx(1.0)
    assert curve.point(8).efficiency == pytest.approx(0.95)
    assert curve.point(1).best is None and curve.point(1).efficiency is None
    assert curve_from_counts("ib-ndr400", [_count(1, None)]) is None


def test_a_memory_starved_baseline_does_not_flatter_later_gpus() -> None:
    # 2 GPUs fit only with heavy recompute (50 tokens/s each); 4 GPUs run at 100 each. The step
    # 4 -> 8 adds 160 tokens/s over 4 GPUs: 0.4 of the best per-GPU rate (100), not 0.8 of 50.
    counts = [_count(1, None), _count(2, 100), _count(4, 400), _count(8, 560)]
    curve = curve_from_counts("ib-ndr400", counts)
    assert curve is not None
    assert curve.baseline_gpus == 2
    assert curve.point(4).efficiency == pytest.approx(2.0)
    assert curve.point(8).marginal_efficiency == pytest.approx(0.4)
    assert curve.break_even_gpus == 4


def test_k_runs_side_by_side_against_one_after_another() -> None:
    curve = curve_from_counts(
        "ib-ndr400", [_count(1, 100), _count(2, 190), _count(4, 300), _count(8, 400)]
    )
    assert curve is not None
    cmp = compare_runs(curve, runs=4, tokens=3.6e6)
    assert cmp is not None
    assert cmp.gpus_per_run == 2
    assert cmp.parallel_wall_s == pytest.approx(3.6e6 / 190)
    assert cmp.sequential_wall_s == pytest.approx(4 * 3.6e6 / 400)
    assert cmp.parallel_gpu_hours == pytest.approx(4 * 2 * 3.6e6 / 190 / 3600)
    assert cmp.parallel_wins  # scaling is sub-linear, so independent runs finish sooner
    assert compare_runs(curve, runs=16, tokens=1.0) is None


def test_verdict_one_gpu_when_more_cards_do_not_pay() -> None:
    curve = curve_from_counts(
        "ib-ndr400", [_count(1, 100), _count(2, 140), _count(4, 200), _count(8, 330)]
    )
    assert curve is not None
    v = verdict(curve, "h100-sxm", 8)
    assert v.choice == "one GPU" and v.num_gpus == 1
    assert "fits one card" in v.reason
    # 8 GPUs deliver 330/8 = 41.25 tokens/s each against 100 on one card
    assert "8 GPUs would be 59% slower per GPU-hour" in v.reason


def test_verdict_one_node_names_what_crossing_nodes_costs() -> None:
    curve = curve_from_counts(
        "roce-100",
        [_count(1, 100), _count(2, 198), _count(4, 390), _count(8, 770), _count(16, 900)],
    )
    assert curve is not None
    v = verdict(curve, "h100-sxm", 8)
    assert v.choice == "one node" and v.num_gpus == 8
    assert "16 GPUs" in v.reason and "RoCE" in v.reason


def test_verdict_when_the_model_needs_tensor_parallelism_inside_a_node() -> None:
    tp8 = Plan(tp=8, dp=1, global_batch=64, recompute="selective")
    curve = curve_from_counts(
        "ib-ndr400",
        [
            _count(1, None, min_memory_gib=900),
            _count(2, None),
            _count(4, None),
            _count(8, 800, plan=tp8),
            _count(16, 1500, plan=Plan(tp=8, dp=2, global_batch=64)),
        ],
    )
    assert curve is not None
    v = verdict(curve, "h100-sxm", 8)
    assert v.reason.startswith("does not fit one card (the leanest plan needs 900 GiB")
    assert (
        "the smallest set-up that fits is 8 GPUs with TP=8 inside an NVLink node and "
        "selective recompute;" in v.reason
    )
    assert v.choice == "a cluster" and v.num_gpus == 16


def test_the_smallest_fit_is_one_set_up_not_a_list_of_requirements() -> None:
    zero3 = Plan(dp=2, global_batch=64, zero=3, recompute="full")
    curve = curve_from_counts(
        "ib-ndr400", [_count(1, None, min_memory_gib=142), _count(2, 100, plan=zero3)]
    )
    assert curve is not None
    reason = verdict(curve, "h100-sxm", 8).reason
    assert "the smallest set-up that fits is 2 GPUs with ZeRO-3 and full recompute" in reason
    assert "over 2 GPUs" not in reason and "on 2 GPUs" not in reason


def test_efficiency_above_100_percent_is_explained_by_the_starved_baseline() -> None:
    starved = Plan(dp=2, global_batch=64, zero=3, recompute="full", micro_batch=1)
    roomy = Plan(dp=8, global_batch=64, zero=1, micro_batch=2)
    curve = curve_from_counts(
        "ib-ndr400",
        [_count(1, None), _count(2, 100, plan=starved), _count(8, 540, plan=roomy)],
    )
    assert curve is not None
    assert curve.point(8).efficiency == pytest.approx(1.35)
    reason = superlinear_reason(curve)
    assert reason is not None
    assert "the 2-GPU plan needs full recompute, ZeRO-3 weight gathers and micro-batch 1" in reason
    v = verdict(curve, "h100-sxm", 8)
    assert "135% per-GPU efficiency against 2 GPUs; above 100% because to fit" in v.reason
    # linear or sub-linear curves need no explanation
    plain = curve_from_counts("ib-ndr400", [_count(1, 100), _count(2, 190)])
    assert plain is not None and superlinear_reason(plain) is None


def test_break_even_is_reached_only_when_a_later_count_stops_paying() -> None:
    linear = curve_from_counts("ib-ndr400", [_count(1, 100), _count(2, 200), _count(4, 400)])
    assert linear is not None
    assert linear.break_even_gpus == 4 and not linear.break_even_reached
    bent = curve_from_counts("ib-ndr400", [_count(1, 100), _count(2, 200), _count(4, 250)])
    assert bent is not None
    assert bent.break_even_gpus == 2 and bent.break_even_reached


def _dp_workload() -> Workload:
    model = catalog.model("gpt3-1.3b")
    return Workload(
        model=model,
        training=Training(seq_len=2048),
        global_batch=int(defaults.global_batch(model, 2048).value),
        tokens=1e10,
    )


def test_per_gpu_efficiency_of_data_parallelism_falls_with_gpu_count() -> None:
    """The article's curve: past one node, every doubling of a data-parallel job loses per-GPU
    efficiency (a little slack for plans that change shape between counts)."""
    curve = scale(_dp_workload(), Hardware(gpu="h100-sxm", inter="roce-100"), PROFILE, 512)
    assert curve.baseline_gpus == 1
    beyond = [p.efficiency for p in curve.points if p.num_gpus >= 8]
    assert all(e is not None for e in beyond)
    for a, b in itertools.pairwise(beyond):
        assert b is not None and a is not None and b <= a * 1.02
    assert beyond[-1] is not None and beyond[-1] < 0.8 * (beyond[0] or 0)
    assert curve.break_even_gpus < 512


def test_a_faster_fabric_never_trains_slower() -> None:
    slow, fast = scale_fabrics(
        _dp_workload(), Hardware(gpu="h100-sxm"), PROFILE, 256, ["roce-100", "ib-ndr400"]
    )
    for a, b in zip(slow.points, fast.points, strict=True):
        assert a.best is not None and b.best is not None
        assert b.best.tokens_per_s >= a.best.tokens_per_s * (1 - 1e-9)
    assert fast.point(256).efficiency > slow.point(256).efficiency  # type: ignore[operator]


def test_405b_needs_a_cluster() -> None:
    model = catalog.model("llama3.1-405b")
    workload = Workload(
        model=model, training=Training(seq_len=4096), global_batch=1024, tokens=1e12
    )
    curve = scale(workload, Hardware(gpu="h100-sxm"), PROFILE, 1024)
    assert curve.baseline_gpus > 8
    v = verdict(curve, "h100-sxm", 8)
    assert v.choice == "a cluster"
    assert "does not fit one card" in v.reason
