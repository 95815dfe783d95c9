"""Search and ranking with the real cost model: only plans that fit, best first, explained."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.planner import defaults
from gpuscale.planner.search import (
    MAX_TRAIN_TOKENS,
    Hardware,
    Workload,
    gpu_counts,
    search,
    search_count,
)
from gpuscale.planner.words import bottleneck
from gpuscale.specs import Training

PROFILE = load_profile("generic")


def _workload(
    model: str, *, seq: int = 4096, gbs: int | None = None, **training: object
) -> Workload:
    spec = catalog.model(model)
    return Workload(
        model=spec,
        training=Training(seq_len=seq, **training),  # type: ignore[arg-type]
        global_batch=gbs or int(defaults.global_batch(spec, seq).value),
        tokens=1e11,
    )


@pytest.mark.parametrize(
    ("model", "gpu", "n", "objective"),
    [
        ("llama3.1-8b", "h100-sxm", 8, "throughput"),
        ("llama3.1-70b", "h100-sxm", 64, "throughput"),
        ("llama3.1-70b", "a100-sxm-40gb", 128, "cost"),
        ("mixtral-8x7b", "h100-sxm", 32, "time"),
    ],
)
def test_planner_never_returns_a_plan_that_does_not_fit(
    model: str, gpu: str, n: int, objective: str
) -> None:
    result = search(_workload(model), Hardware(gpu=gpu), PROFILE, n, objective=objective, top_k=5)
    card = catalog.gpu(gpu).memory_gib
    assert result.ranked
    for p in result.ranked:
        assert p.fits and p.estimate["fits"]
        assert p.memory_per_gpu_gib <= card
        assert p.num_gpus <= n
    for count in result.counts:
        assert all(p.fits for p in count.top)


def test_throughput_ranking_is_best_first_with_distinct_layouts() -> None:
    result = search(_workload("llama3.1-70b"), Hardware(gpu="h100-sxm"), PROFILE, 64, top_k=6)
    speeds = [p.tokens_per_s for p in result.ranked]
    assert speeds == sorted(speeds, reverse=True)
    layouts = [(p.plan.tp, p.plan.pp, p.plan.cp, p.plan.ep) for p in result.ranked]
    assert len(set(layouts)) == len(layouts)
    assert all(p.num_gpus == 64 for p in result.ranked)
    # no fitting plan at 64 GPUs beats the winner
    assert result.at_full.best is not None
    assert result.winner.tokens_per_s == pytest.approx(result.at_full.best.tokens_per_s)


def test_cost_objective_picks_the_fewest_gpu_hours_per_token() -> None:
    workload = _workload("gpt3-1.3b", seq=2048)
    result = search(
        workload, Hardware(gpu="h100-sxm", inter="roce-100"), PROFILE, 512, objective="cost"
    )
    per_count = [c.best.gpu_seconds_per_token for c in result.counts if c.best is not None]
    assert result.winner.gpu_seconds_per_token == pytest.approx(min(per_count))
    assert result.winner.num_gpus < 512, "a small model on 100 GbE is cheapest on fewer GPUs"
    assert "more per token" in result.why


def test_the_winner_is_explained_by_its_bottleneck() -> None:
    result = search(_workload("llama3.1-70b"), Hardware(gpu="h100-sxm"), PROFILE, 64)
    assert result.winner.describe() in result.why
    assert "bound" in result.why
    assert sum(result.winner.parts_s.values()) == pytest.approx(result.winner.step_time_s, rel=1e-6)


def test_no_plan_fits_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"no plan fits llama3\.1-405b on 8 x rtx-4090"):
        search(_workload("llama3.1-405b"), Hardware(gpu="rtx-4090"), PROFILE, 8)


def test_a_batch_too_small_for_the_gpus_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no valid plan"):
        search(_workload("gpt3-125m", seq=16, gbs=1), Hardware(gpu="h100-sxm"), PROFILE, 1024)


def test_model_that_fits_one_card_is_more_cost_efficient_there_than_on_four_smaller_cards() -> None:
    """A 7B LoRA fine-tune: one 80 GB A100 against four 40 GB A100s (same chip, same price per
    GPU-hour): the single card delivers more tokens per GPU-hour."""
    workload = _workload("llama2-7b", seq=2048, gbs=64, finetune="lora")
    one = search_count(workload, Hardware(gpu="a100-sxm-80gb"), PROFILE, 1).best
    four = search_count(workload, Hardware(gpu="a100-sxm-40gb"), PROFILE, 4).best
    assert one is not None and four is not None
    assert one.gpu_seconds_per_token < four.gpu_seconds_per_token


def test_gpu_counts_double_inside_a_node_then_by_whole_nodes() -> None:
    assert gpu_counts(64, 8) == [1, 2, 4, 8, 16, 32, 64]
    assert gpu_counts(48, 8) == [1, 2, 4, 8, 16, 32, 48]
    assert gpu_counts(4, 8) == [1, 2, 4]
    assert gpu_counts(24, 6) == [1, 2, 4, 6, 12, 24]
    with pytest.raises(InputError, match="multiple of --gpus-per-node"):
        gpu_counts(12, 8)


def test_defaults_follow_the_recipes() -> None:
    small, large = catalog.model("gpt3-125m"), catalog.model("llama3.1-405b")
    assert defaults.global_batch(small, 2048).value == 256  # 0.5M tokens
    assert defaults.global_batch(large, 4096).value == 1024  # 4M tokens
    assert defaults.seq_len(small).value == 2048  # the model's maximum
    assert defaults.seq_len(large).value == 4096
    assert defaults.tokens_to_train(large).value == pytest.approx(20 * 405.9e9, rel=0.01)


@pytest.mark.parametrize(
    ("parts", "start"),
    [
        ({"compute": 0.9, "comm_tp": 0.1}, "compute-bound: compute is 90%"),
        ({"compute": 0.5, "comm_tp": 0.42, "bubble": 0.08}, "bound by compute and tensor-parallel"),
        ({"compute": 0.3, "comm_dp": 0.6, "other": 0.1}, "bound by data-parallel gradient"),
    ],
)
def test_compute_bound_is_said_only_when_compute_is_most_of_the_step(
    parts: dict[str, float], start: str
) -> None:
    words = bottleneck(parts, mfu=0.4)
    assert words.startswith(start), words
    if parts["compute"] < 2 / 3:
        assert "compute-bound" not in words


def test_workload_rejects_non_finite_and_sub_batch_budgets() -> None:
    spec = catalog.model("llama3.1-8b")
    training = Training(seq_len=4096)
    with pytest.raises(InputError, match="--tokens must be a finite count"):
        Workload(model=spec, training=training, global_batch=512, tokens=float("inf"))
    with pytest.raises(InputError, match="less than one global batch"):
        Workload(model=spec, training=training, global_batch=512, tokens=512 * 4096 - 1)
    Workload(model=spec, training=training, global_batch=512, tokens=512 * 4096)
    Workload(model=spec, training=training, global_batch=512, tokens=MAX_TRAIN_TOKENS)
    with pytest.raises(InputError, match="more than any training run; accepted: at most") as info:
        Workload(model=spec, training=training, global_batch=512, tokens=1e40)
    assert info.value.field == "tokens"
    with pytest.raises(InputError, match="--price must be a finite number"):
        Workload(model=spec, training=training, global_batch=1, tokens=1e9, price_per_gpu_hour=-1)
