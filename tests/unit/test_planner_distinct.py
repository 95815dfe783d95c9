"""The planner's shortcuts give exactly the answer of pricing every candidate in full.

``search_count`` prices memory for every plan, the step only for the plans that fit (and for
the others only as far as the nearest faster one needs), and the layer math once per distinct
sub-configuration (costmodel/distinct.py). The reference here prices every plan on its own,
with no grouping, and ranks them as the definition says; the two must agree bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel import compute, distinct, step
from gpuscale.costmodel.memory import memory_budget_bytes
from gpuscale.costmodel.profile import Profile, load_profile
from gpuscale.costmodel.step import estimate_batch, step_time_floor_s
from gpuscale.planner import defaults, search
from gpuscale.planner.enumerate import enumerate_plans
from gpuscale.planner.search import CountResult, Hardware, Workload, search_count
from gpuscale.specs import Training

CASES = [
    ("llama3.1-8b", "h100-sxm", 64, {}, "generic"),
    ("llama3.1-8b", "h100-sxm", 16, {"precision": "fp8"}, "generic"),
    ("mixtral-8x7b", "h100-sxm", 64, {}, "generic"),
    ("llama3.1-70b", "a100-sxm-80gb", 128, {"selective_policy": "layer"}, "generic"),
    ("llama3.1-70b", "h100-sxm", 32, {"finetune": "lora"}, "generic"),
    ("llama3.1-8b", "h100-sxm", 64, {"seq_len": 32768}, "torchtitan"),
    ("llama3.1-70b", "h100-sxm", 128, {}, "megatron"),
    ("llama3.1-8b", "a100-sxm-80gb", 32, {"offload_optimizer": True}, "deepspeed"),
]


def _workload(model_id: str, training: dict[str, object]) -> Workload:
    model = catalog.model(model_id)
    options = dict(training)
    seq = int(options.pop("seq_len", defaults.seq_len(model).value))  # type: ignore[call-overload]
    return Workload(
        model=model,
        training=Training(seq_len=seq, **options),  # type: ignore[arg-type]
        global_batch=int(defaults.global_batch(model, seq).value),
        tokens=float(defaults.tokens_to_train(model).value),
    )


def _reference(
    workload: Workload, hardware: Hardware, profile: Profile, num_gpus: int, top_k: int
) -> CountResult:
    """Every plan priced in full, one by one as far as numpy is concerned (no grouping), then
    ranked by the definition: fastest fitting plan of each layout, best first; of the unfit
    plans faster than the winner by 1%, the one needing the least memory."""
    cluster = hardware.cluster(num_gpus)
    model, training = workload.model, workload.training
    plans = enumerate_plans(
        model, num_gpus, global_batch=workload.global_batch, seq_len=training.seq_len
    )
    with distinct.exhaustive():
        est = estimate_batch(model, cluster, training, plans, profile)
    tps, memory = est.tokens_per_s, est.memory_per_gpu_bytes
    capacity = min(cluster.device.memory_bytes, cluster.pace_device.memory_bytes)
    budget = memory_budget_bytes(capacity, profile)
    fits = est.fits & (memory <= budget)
    key = search._preference(plans, tps, fits)
    fit = np.flatnonzero(fits)
    ordered = fit[np.argsort(key[fit], kind="stable")]
    seen: set[tuple[int, ...]] = set()
    best = []
    for i in ordered:
        layout = (int(plans.tp[i]), int(plans.pp[i]), int(plans.cp[i]), int(plans.ep[i]))
        if layout not in seen:
            seen.add(layout)
            best.append(int(i))
        if len(best) == top_k:
            break
    target = tps[best[0]] * 1.01 if best else 0.0
    faster = np.flatnonzero(~fits & (tps > target))
    unfit = None
    if faster.size:
        i = int(faster[np.argmin(memory[faster])])
        unfit = search._priced(plans, est, i, cluster, model, profile, False)
    return CountResult(
        num_gpus=num_gpus,
        evaluated=len(plans),
        fitting=int(fits.sum()),
        top=tuple(search._priced(plans, est, i, cluster, model, profile, True) for i in best),
        nearest_faster_unfit=unfit,
        min_memory_gib=float(memory.min()) / 2**30,
        memory_budget_gib=budget / 2**30,
    )


@pytest.mark.parametrize(("model", "gpu", "n", "training", "profile"), CASES)
@pytest.mark.parametrize(
    ("unfit_batch", "chunk", "first_round"),
    [(search.UNFIT_BATCH, search.CHUNK, search.FIRST_ROUND), (7, 1000, 3)],
)
def test_search_count_is_the_answer_of_pricing_every_plan(
    model: str,
    gpu: str,
    n: int,
    training: dict[str, object],
    profile: str,
    unfit_batch: int,
    chunk: int,
    first_round: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 7 plans per round forces the nearest-unfit search through many rounds of growing memory;
    # 1000 plans per cost-model call, through many chunks; 3 top-ceiling plans first, through
    # more rounds of the top-layout search.
    monkeypatch.setattr(search, "UNFIT_BATCH", unfit_batch)
    monkeypatch.setattr(search, "CHUNK", chunk)
    monkeypatch.setattr(search, "FIRST_ROUND", first_round)
    workload, hardware, prof = _workload(model, training), Hardware(gpu=gpu), load_profile(profile)
    fast = search_count(workload, hardware, prof, n, top_k=5)
    slow = _reference(workload, hardware, prof, n, 5)
    assert fast.top, "every case has a fitting plan"
    # repr spells every float exactly: the same plans with the same bits
    assert repr(fast) == repr(slow)


def test_the_cases_exercise_the_unfit_search() -> None:
    found = [
        search_count(_workload(m, t), Hardware(gpu=g), load_profile(p), n)
        for m, g, n, t, p in CASES
    ]
    assert any(r.nearest_faster_unfit is not None for r in found)
    assert any(r.fitting < r.evaluated for r in found)


@pytest.mark.parametrize(("model", "gpu", "n", "training", "profile_name"), CASES)
def test_grouped_layer_math_is_bitwise_the_per_plan_math(
    model: str, gpu: str, n: int, training: dict[str, object], profile_name: str
) -> None:
    workload = _workload(model, training)
    cluster = Hardware(gpu=gpu).cluster(n)
    plans = enumerate_plans(
        workload.model, n, global_batch=workload.global_batch, seq_len=workload.training.seq_len
    )
    profile = load_profile(profile_name)
    assert distinct.grouping(plans, distinct.COMPUTE_COLUMNS) is not None, "grouping is used"
    grouped = estimate_batch(workload.model, cluster, workload.training, plans, profile)
    with distinct.exhaustive():
        each = estimate_batch(workload.model, cluster, workload.training, plans, profile)
    for field in dataclasses.fields(grouped):
        a, b = getattr(grouped, field.name), getattr(each, field.name)
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), field.name


TRAININGS = [
    {},
    {"precision": "fp8"},
    {"selective_policy": "op"},
    {"finetune": "qlora"},
    {"offload_optimizer": True},
    {"cuda_graphs": True},
    {"reshard_after_forward": False},
]


@pytest.mark.parametrize("profile_name", ["generic", "torchtitan", "megatron", "deepspeed"])
@pytest.mark.parametrize("training", TRAININGS)
def test_the_step_never_falls_below_its_floor(
    profile_name: str, training: dict[str, object]
) -> None:
    """The planner skips plans by their ceiling: the floor must hold for every plan."""
    profile = load_profile(profile_name)
    for model_id, gpu, n in (("mixtral-8x7b", "h100-sxm", 32), ("llama3.1-70b", "h100-sxm", 64)):
        workload = _workload(model_id, training)
        cluster = Hardware(gpu=gpu).cluster(n)
        plans = enumerate_plans(
            workload.model, n, global_batch=workload.global_batch, seq_len=workload.training.seq_len
        )
        est = estimate_batch(workload.model, cluster, workload.training, plans, profile)
        floor = step_time_floor_s(workload.model, cluster, workload.training, plans, profile)
        assert np.all(floor > 0)
        assert np.all(est.step_time_s >= floor)
        # the floor is a real bound, not a zero: the math is most of a good plan's step
        assert float(np.max(floor / est.step_time_s)) > 0.5


def test_per_distinct_broadcasts_each_group_to_its_plans() -> None:
    from gpuscale.specs import PlanBatch

    plans = PlanBatch.from_arrays(
        tp=np.array([1, 2, 1, 2, 1, 4, 1, 2]), pp=np.array([1, 1, 2, 2, 4, 1, 1, 8])
    )
    calls: list[int] = []

    def price(batch: PlanBatch) -> tuple[np.ndarray, float]:
        calls.append(len(batch))
        return batch.tp * 10 + batch.micro_batch, 3.0

    values, scalar = distinct.per_distinct(plans, ("tp", "micro_batch"), price)
    assert calls == [3], "one representative per distinct tp"
    assert values.tolist() == [11, 21, 11, 21, 11, 41, 11, 21]
    assert scalar == 3.0
    with distinct.exhaustive():
        again, _ = distinct.per_distinct(plans, ("tp", "micro_batch"), price)
    assert calls == [3, 8] and again.tolist() == values.tolist()


GUARD_MODELS = [
    ("llama3.1-8b", "h100-sxm", 32),
    ("mixtral-8x7b", "h100-sxm", 32),
    ("deepseek-v3", "h100-sxm", 256),
    ("gpt-oss-20b", "b200", 16),
]


@pytest.mark.parametrize("profile_name", ["generic", "torchtitan", "megatron", "deepspeed"])
@pytest.mark.parametrize("training", [*TRAININGS, {"seq_len": 32768}])
def test_grouped_terms_read_only_their_columns(
    profile_name: str, training: dict[str, object]
) -> None:
    """The layer math and the step's floor see only their columns (a field outside them raises
    AttributeError), and give the same bits as on the full batch."""
    profile = load_profile(profile_name)
    for model_id, gpu, n in GUARD_MODELS:
        workload = _workload(model_id, training)
        model = workload.model
        cluster = Hardware(gpu=gpu).cluster(n)
        plans = enumerate_plans(
            model, n, global_batch=workload.global_batch, seq_len=workload.training.seq_len
        )
        plans = plans.take(slice(0, 4000))
        layer = compute.layer_compute(
            model,
            cluster.device,
            workload.training,
            distinct.restricted(plans, distinct.COMPUTE_COLUMNS),
            profile,
        )
        floor = step_time_floor_s(
            model,
            cluster,
            workload.training,
            distinct.restricted(plans, step.STEP_FLOOR_COLUMNS),
            profile,
        )
        with distinct.exhaustive():
            full_floor = step_time_floor_s(model, cluster, workload.training, plans, profile)
        full_layer = compute.layer_compute(model, cluster.device, workload.training, plans, profile)
        assert repr(layer) == repr(full_layer)
        assert floor.tobytes() == full_floor.tobytes()


def test_a_term_reading_a_field_outside_its_columns_fails() -> None:
    from gpuscale.specs import PlanBatch

    plans = PlanBatch.from_arrays(
        tp=np.array([1, 2, 1, 2, 1, 2]), pp=np.array([1, 1, 2, 2, 4, 4]), dp=np.array([2])
    )
    for mode in (contextlib.nullcontext, distinct.exhaustive):
        with mode(), pytest.raises(AttributeError, match="plan field pp read"):
            distinct.per_distinct(plans, ("tp",), lambda p: p.tp * p.pp)
        with mode(), pytest.raises(AttributeError, match=r"num_gpus \(from tp, pp, dp, cp\)"):
            distinct.per_distinct(plans, ("tp", "pp"), lambda p: p.num_gpus)
        # a batch taken from the restricted one stays restricted
        with mode(), pytest.raises(AttributeError, match="plan field zero read"):
            distinct.per_distinct(plans, ("tp",), lambda p: p.take(slice(0, 2)).zero)
    whole = ("tp", "pp", "dp", "cp")
    assert distinct.per_distinct(plans, whole, lambda p: p.num_gpus).tolist() == (
        plans.num_gpus.tolist()
    )
    with pytest.raises(ValueError, match="not plan fields"):
        distinct.restricted(plans, ("tp", "stage"))


def test_the_cost_model_and_the_planner_use_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dropping a column the terms read makes the real paths fail, not answer differently."""
    workload = _workload("mixtral-8x7b", {})
    hardware, profile = Hardware(gpu="h100-sxm"), load_profile("generic")
    cluster = hardware.cluster(32)
    plans = enumerate_plans(
        workload.model, 32, global_batch=workload.global_batch, seq_len=workload.training.seq_len
    )
    no_ep = tuple(c for c in distinct.COMPUTE_COLUMNS if c != "ep")
    with monkeypatch.context() as patch:
        patch.setattr(step, "COMPUTE_COLUMNS", no_ep)
        with pytest.raises(AttributeError, match="plan field ep read"):
            estimate_batch(workload.model, cluster, workload.training, plans, profile)
    no_vp = tuple(c for c in step.STEP_FLOOR_COLUMNS if c != "vp")
    with monkeypatch.context() as patch:
        patch.setattr(search, "STEP_FLOOR_COLUMNS", no_vp)
        with pytest.raises(AttributeError, match="plan field vp read"):
            search_count(workload, hardware, profile, 32)


def test_per_distinct_gathers_arrays_of_any_dimension() -> None:
    from gpuscale.specs import PlanBatch

    plans = PlanBatch.from_arrays(
        tp=np.array([1, 2, 1, 2, 1, 4, 1, 2]), pp=np.array([1, 1, 2, 2, 4, 1, 1, 8])
    )

    def price(batch: PlanBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        tp = batch.tp.astype(float)
        per_plan_2d = np.stack([tp, tp * 10], axis=1)
        per_plan_3d = tp[:, None, None] * np.arange(6.0).reshape(2, 3)
        return per_plan_2d, per_plan_3d, np.arange(5.0), np.float64(7.0) * np.ones(())

    grouped = distinct.per_distinct(plans, ("tp",), price)
    with distinct.exhaustive():
        each = distinct.per_distinct(plans, ("tp",), price)
    assert distinct.grouping(plans, ("tp",)) is not None, "grouping is used"
    assert grouped[0].shape == (8, 2) and grouped[1].shape == (8, 2, 3)
    for a, b in zip(grouped, each, strict=True):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()
