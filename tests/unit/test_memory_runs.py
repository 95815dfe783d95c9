"""The planner prices memory per run of plans alike but for the recompute choice
(``memory_total(..., recompute=codes)``, ``enumerate_runs``); it must be bitwise what
``training_memory`` gives each plan of the flat batch."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.memory import memory_total, training_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.planner import defaults
from gpuscale.planner.enumerate import PlanRuns, SearchSpace, enumerate_plans, enumerate_runs
from gpuscale.specs import PlanBatch, Training

MODELS = [
    ("llama3.1-8b", 64),
    ("mixtral-8x7b", 32),
    ("deepseek-v3", 256),
    ("gpt-oss-20b", 16),
]
TRAININGS: list[dict[str, Any]] = [
    {},
    {"precision": "fp8", "fp8_weight_cache": True, "fp8_all_gather": True},
    {"finetune": "lora", "lora_dropout": 0.1},
    {"finetune": "qlora", "load_16bit_on_device": True, "paged_optimizer": True},
    {"offload_params": True, "offload_optimizer": True},
    {"selective_policy": "op", "sp_saves_gathered_input": True},
    {"selective_policy": "layer", "activation_offload": True},
    {"cuda_graphs": True, "reshard_after_forward": False},
    {"dropout": True, "flash_attention": False, "fused_elementwise": False, "seq_len": 1024},
]
PROFILES = ["generic", "torchtitan", "megatron", "deepspeed"]


def _training(model_id: str, options: dict[str, Any]) -> tuple[Training, int]:
    model = catalog.model(model_id)
    opts = dict(options)
    seq = int(opts.pop("seq_len", defaults.seq_len(model).value))
    return Training(seq_len=seq, **opts), int(defaults.global_batch(model, seq).value)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("options", TRAININGS)
@pytest.mark.parametrize(("model_id", "n"), MODELS)
def test_memory_of_runs_is_bitwise_the_flat_batch(
    model_id: str, n: int, options: dict[str, Any]
) -> None:
    model = catalog.model(model_id)
    training, gbs = _training(model_id, options)
    runs = enumerate_runs(model, n, global_batch=gbs, seq_len=training.seq_len)
    plans = runs.plans()
    assert len(runs) == len(plans) > 0
    for name in PROFILES:
        profile = load_profile(name)
        flat = training_memory(model, training, plans, profile).total
        assert _same(memory_total(model, training, plans, profile), flat), name
        each = memory_total(model, training, runs.heads, profile, recompute=runs.codes)
        assert _same(each, flat), name


def test_runs_expand_to_the_enumerated_plans() -> None:
    model = catalog.model("mixtral-8x7b")
    for space in (None, SearchSpace(recompute=("full", "none")), SearchSpace(recompute=("full",))):
        runs = enumerate_runs(model, 64, global_batch=512, seq_len=4096, space=space)
        flat = enumerate_plans(model, 64, global_batch=512, seq_len=4096, space=space)
        plans = runs.plans()
        for field in dataclasses.fields(PlanBatch):
            if field.init:
                assert _same(getattr(plans, field.name), getattr(flat, field.name)), field.name
        # each head takes every code in turn, heads outer
        codes = runs.codes.size
        assert np.array_equal(
            plans.recompute.reshape(-1, codes), np.tile(runs.codes, (len(runs.heads), 1))
        )
        assert np.array_equal(plans.tp[::codes], runs.heads.tp)
        for field in dataclasses.fields(PlanBatch):
            if field.init and field.name != "recompute":
                column = getattr(runs.heads, field.name)
                assert _same(getattr(plans, field.name), np.repeat(column, codes)), field.name
        assert _same(plans.recompute, np.tile(runs.codes, len(runs.heads)))


def test_runs_of_any_batch_uneven_splits_included() -> None:
    """Not only the enumerator's batches: any plans, each with any list of codes."""
    model = catalog.model("llama3.1-70b")
    rng = np.random.default_rng(7)
    size = 300
    pp = rng.choice([1, 2, 4, 5, 8], size)
    heads = PlanBatch.from_arrays(
        tp=rng.choice([1, 2, 4, 8], size),
        pp=pp,
        dp=rng.choice([1, 2, 4, 16], size),
        cp=rng.choice([1, 2], size),
        vp=np.where(pp > 1, rng.choice([1, 2], size), 1),
        micro_batch=rng.choice([1, 2, 4], size),
        global_batch=64,
        zero=rng.choice([0, 1, 2, 3], size),
        first_stage_layers=np.where(pp > 2, rng.choice([0, 7], size), 0),
        embedding_in_split=(pp > 1) & rng.choice([False, True], size),
        loss_in_split=(pp > 1) & rng.choice([False, True], size),
    )
    training = Training(seq_len=8192, selective_policy="layer", dropout=True)
    for codes in ([2, 0, 1], [1], [0, 2], [2, 2, 1]):
        runs = PlanRuns(heads=heads, codes=np.asarray(codes, dtype=np.int64))
        flat = training_memory(model, training, runs.plans(), load_profile("megatron")).total
        each = memory_total(model, training, heads, load_profile("megatron"), recompute=runs.codes)
        assert _same(each, flat), codes


def test_an_empty_enumeration_has_no_memory_to_price() -> None:
    model = catalog.model("llama3.1-8b")
    space = SearchSpace(micro_batches=(2,))
    runs = enumerate_runs(model, 64, global_batch=1, seq_len=4096, space=space)
    assert len(runs) == 0 and len(runs.plans()) == 0
    each = memory_total(model, Training(), runs.heads, recompute=runs.codes)
    assert each.shape == (0,)
