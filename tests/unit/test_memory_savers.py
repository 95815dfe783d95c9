"""`fit` suggests the cheapest ways to fit besides more GPUs: optimizer, precision, offload,
recompute, LoRA/QLoRA -- each with the memory the model predicts for it."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.costmodel.memory import memory_budget_bytes, training_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner.fit import _SAVERS, MemorySaver, _with, cheaper_ways_to_fit
from gpuscale.specs import Plan, PlanBatch
from gpuscale.specs.training import Training

PROFILE = load_profile("generic")
RANK = {key: i for i, (key, _, _) in enumerate(_SAVERS)}


def _memory(model: str, training: Training, plan: Plan) -> float:
    spec = catalog.model(model)
    return float(training_memory(spec, training, PlanBatch.from_plans([plan]), PROFILE).total[0])


def _savers(model: str, gpu: str, training: Training, plan: Plan) -> list[MemorySaver]:
    return cheaper_ways_to_fit(catalog.model(model), training, plan, catalog.gpu(gpu), PROFILE)


def test_settings_that_fit_need_no_saver() -> None:
    assert _savers("llama3.2-3b", "h100-sxm", Training(seq_len=2048, finetune="lora"), Plan()) == []


@pytest.mark.parametrize(
    ("model", "gpu"),
    [("llama3.1-8b", "h100-sxm"), ("llama3.1-8b", "a100-sxm-40gb"), ("llama3.1-70b", "h100-sxm")],
)
def test_each_saver_is_what_the_model_predicts_and_fits_the_budget(model: str, gpu: str) -> None:
    training, plan = Training(seq_len=4096), Plan()
    budget = memory_budget_bytes(catalog.gpu(gpu).memory_bytes, PROFILE)
    before = _memory(model, training, plan)
    assert before > budget
    savers = _savers(model, gpu, training, plan)
    assert savers
    for saver in savers:
        changed = _with(saver.key.split("+"), training, plan)
        assert changed is not None
        assert saver.memory_bytes == pytest.approx(_memory(model, *changed))
        assert saver.fits and saver.memory_bytes <= budget
        assert saver.saved_bytes == pytest.approx(before - saver.memory_bytes)
        assert saver.change and saver.cost
    worst = [max(RANK[k] for k in s.key.split("+")) for s in savers]
    assert worst == sorted(worst), "cheapest (least intrusive) first"


def test_8b_full_finetune_on_one_h100_first_tries_optimizer_and_precision() -> None:
    """16 bytes/parameter do not fit 80 GB; 8-bit AdamW with pure bf16 (no fp32 master) does,
    and is less intrusive than offloading or LoRA."""
    savers = _savers("llama3.1-8b", "h100-sxm", Training(seq_len=4096), Plan())
    assert set(savers[0].key.split("+")) == {"adamw-8bit", "pure-bf16"}
    keys = [s.key for s in savers]
    assert "lora" in keys and keys.index("lora") > 0


def test_a_combination_is_pruned_to_what_is_needed() -> None:
    """Every change in a suggested combination is needed: without any one it does not fit."""
    training, plan = Training(seq_len=4096), Plan()
    budget = memory_budget_bytes(catalog.gpu("h100-sxm").memory_bytes, PROFILE)
    combos = [s for s in _savers("llama3.1-70b", "h100-sxm", training, plan) if "+" in s.key]
    assert combos
    for combo in combos:
        keys = combo.key.split("+")
        for key in keys:
            rest = _with([k for k in keys if k != key], training, plan)
            assert rest is None or _memory("llama3.1-70b", *rest) > budget


def test_nothing_fits_gives_no_saver() -> None:
    tiny = dataclasses.replace(catalog.gpu("h100-sxm"), memory_gib=4.0)
    savers = cheaper_ways_to_fit(
        catalog.model("llama3.1-70b"), Training(seq_len=4096), Plan(), tiny, PROFILE
    )
    assert savers == []


def test_offload_never_fits_more_than_the_host_holds() -> None:
    """405B's weights, gradients and optimizer states (~6 TB) cannot be offloaded into the host
    memory one GPU of a DGX H100 can use (2 TB for 8 GPUs): no saver may offer that, while an
    8B model's optimizer offload (~100 GB) stays on offer."""
    big = _savers("llama3.1-405b", "h100-sxm", Training(seq_len=4096), Plan())
    assert all("offload" not in s.key for s in big)
    small = _savers("llama3.1-8b", "h100-sxm", Training(seq_len=4096), Plan())
    assert any("offload-optimizer" in s.key for s in small)
