"""``fit`` on mixture-of-experts models: the user's expert split (``ep``/``etp``), the recompute
modules and bf16 gradients as ``estimate`` takes them, and a smallest-set-up search that
spreads the experts (``ep = gcd(experts, tp x dp)``, experts whole on a rank)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuscale import api, catalog
from gpuscale.costmodel.memory import training_memory
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.planner.fit import training_candidates
from gpuscale.specs import Plan, PlanBatch

GIB = 2**30


def test_expert_parallelism_divides_the_expert_weights() -> None:
    run = dict(gpu="h100-sxm", pp=16, dp=16, zero=1)
    replicated = api.fit("deepseek-v3", **run)
    spread = api.fit("deepseek-v3", ep=8, **run)
    assert spread.memory_bytes["weights"] < replicated.memory_bytes["weights"] / 4
    assert spread.plan["ep"] == 8 and spread.plan["etp"] == 1  # etp follows tp (1)


def test_fit_and_estimate_agree_on_the_same_moe_run() -> None:
    kw = dict(pp=16, dp=16, ep=8, zero=1, recompute="selective")
    kw.update(recompute_modules="mla_up_proj,moe_act", grad_reduce_in_bf16=True)
    fitted = api.fit("deepseek-v3", gpu="h100-sxm", grad_accum=16, **kw)  # 256 sequences
    est = api.estimate("deepseek-v3", gpu="h100-sxm", gpus=256, gbs=256, mbs=1, **kw)
    assert fitted.total_gib == pytest.approx(est.memory_per_gpu_gib, rel=1e-9)


def test_the_search_spreads_experts_over_each_stages_ranks() -> None:
    model = catalog.model("qwen3-30b-a3b")
    plans = training_candidates(model, Plan(), 8, 64)
    expected = np.gcd(model.num_experts, plans.tp * plans.dp)
    assert np.array_equal(plans.ep, expected) and np.all(plans.etp == 1)
    dense = training_candidates(catalog.model("llama3.1-8b"), Plan(), 8, 64)
    assert np.all(dense.ep == 1)


def test_smallest_setups_are_priced_with_their_expert_split() -> None:
    result = api.fit("qwen3-30b-a3b", gpu="h100-sxm")
    assert result.smallest and all(o.ep > 1 for o in result.smallest)
    o = result.smallest[0]
    assert math.gcd(128, o.tp * o.dp) == o.ep
    assert f"EP={o.ep}" in o.layout()
    # the option's memory is the memory model's for that plan with that expert split
    plan = Plan(tp=o.tp, pp=o.pp, dp=o.dp, zero=o.zero, ep=o.ep, etp=1, global_batch=o.dp * o.pp)
    training = api.fitting.Training(seq_len=4096)
    model = catalog.model("qwen3-30b-a3b")
    memory = training_memory(model, training, PlanBatch.from_plans([plan]), load_profile("generic"))
    assert float(memory.total[0]) == pytest.approx(o.memory_bytes, rel=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"dp": 4, "ep": 8}, "--ep 8 must divide"),
        ({"ep": 0}, "--ep must be a positive integer"),
        ({"recompute_modules": "moe_act"}, "applies with --recompute selective"),
    ],
)
def test_bad_expert_settings_get_one_line(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(InputError, match=words) as err:
        api.fit("qwen3-30b-a3b", gpu="h100-sxm", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(err.value)


def test_fit_prices_with_the_training_stacks_profile_as_estimate_does() -> None:
    # Transformer Engine keeps an FP8 linear's input in FP8 for the weight gradient under
    # Megatron (the megatron profile), generic keeps it in 16 bits: the same run differs, and
    # fit and estimate agree within each framework.
    kw = dict(tp=8, pp=2, precision="fp8", seq=8192, recompute="selective")
    totals = {}
    for framework in ("generic", "megatron"):
        fitted = api.fit(
            "llama3.1-70b", gpu="h100-sxm", dp=4, grad_accum=16, framework=framework, **kw
        )
        est = api.estimate(
            "llama3.1-70b", gpu="h100-sxm", gpus=64, gbs=64, mbs=1, framework=framework, **kw
        )
        assert fitted.total_gib == pytest.approx(est.memory_per_gpu_gib, rel=1e-9)
        assert fitted.profile == framework and fitted.job["framework"] == framework
        totals[framework] = fitted.total_gib
    assert totals["megatron"] != pytest.approx(totals["generic"], rel=1e-3)


def test_a_training_stack_does_not_apply_to_serving_memory() -> None:
    with pytest.raises(InputError, match="--framework megatron is a training stack"):
        api.fit("llama3.1-8b", mode="infer", framework="megatron")


def test_a_serving_engines_profile_is_not_a_training_stack() -> None:
    from gpuscale.catalog.serving_engines import engines
    from gpuscale.costmodel.profile import SERVING_PROFILES, training_profile_names

    costed = {e.cost_profile for e in engines().values()}
    assert costed <= set(SERVING_PROFILES)
    assert "megatron" in training_profile_names() and "vllm" not in training_profile_names()
    for call in (
        lambda: api.fit("llama3.1-8b", framework="vllm"),
        lambda: api.estimate("llama3.1-8b", gpu="h100-sxm", gpus=8, framework="sglang"),
        lambda: api.plan("llama3.1-8b", gpu="h100-sxm", gpus=8, framework="tensorrt-llm"),
    ):
        with pytest.raises(InputError, match="is a serving engine's profile, not a training"):
            call()
