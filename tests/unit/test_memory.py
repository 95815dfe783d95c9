"""The memory model against its sources' own numbers, and its vectorized form against itself."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.costmodel.activations import layer_terms, stage_activations
from gpuscale.costmodel.inference_memory import inference_memory
from gpuscale.costmodel.memory import plan_memory, training_memory
from gpuscale.costmodel.model_states import block_linear_weights, nf4_bytes_per_param
from gpuscale.costmodel.params import total_params
from gpuscale.costmodel.profile import load_profile
from gpuscale.specs import Plan, PlanBatch
from gpuscale.specs.plan import RECOMPUTE_CODE
from gpuscale.specs.training import Inference, Training

GIB = 2**30
PROFILE = load_profile("generic")
GPT3 = catalog.model("gpt3-175b")
L8B = catalog.model("llama3.1-8b")


def _states(mem: dict[str, float]) -> float:
    return mem["weights"] + mem["gradients"] + mem["optimizer"]


# --- Korthikanti et al. 2022, Sec. 4 / Table 2: a second derivation -----------------------


def _korthikanti(s: int, b: int, h: int, a: int, t: int, mode: str) -> float:
    """Table 2 of arXiv:2205.05198, bytes per layer."""
    sbh = s * b * h
    return {
        "none-no-sp": sbh * (10 + 24 / t + 5 * a * s / (h * t)),
        "none-sp": sbh / t * (34 + 5 * a * s / h),
        "selective-sp": sbh / t * 34,
        "full": 2 * sbh,
    }[mode]


@pytest.mark.parametrize(
    ("mode", "tp", "sp", "recompute"),
    [
        ("none-no-sp", 1, False, "none"),
        ("none-no-sp", 8, False, "none"),
        ("none-sp", 8, True, "none"),
        ("selective-sp", 8, True, "selective"),
        ("full", 1, False, "full"),
    ],
)
def test_layer_activations_match_korthikanti_table_2(
    mode: str, tp: int, sp: bool, recompute: str
) -> None:
    training = Training(seq_len=2048, flash_attention=False, dropout=True)
    s, b = 2048, 1
    plans = PlanBatch.from_plans(
        [
            Plan(
                tp=tp,
                micro_batch=b,
                global_batch=b,
                recompute=recompute,  # type: ignore[arg-type]
                sequence_parallel=sp,
            )
        ]
    )
    # One layer's worth: drop the head by comparing two depths.
    one = dataclasses.replace(GPT3, num_layers=1)
    two = dataclasses.replace(GPT3, num_layers=2)
    per_layer = (
        stage_activations(two, training, plans, "first").stored
        - stage_activations(one, training, plans, "first").stored
    )[0]
    expected = _korthikanti(s, b, GPT3.hidden_size, GPT3.num_heads, tp, mode)
    # Korthikanti leaves out the norms' fp32 statistics (16 bytes a token): < 0.1%.
    assert per_layer == pytest.approx(expected, rel=2e-3)


def test_flash_attention_removes_exactly_the_s_squared_term() -> None:
    base = Training(seq_len=4096, flash_attention=False, dropout=True)
    unfused, fused = (
        layer_terms(GPT3, base),
        layer_terms(GPT3, dataclasses.replace(base, flash_attention=True)),
    )
    a = GPT3.num_heads
    assert unfused.per_seq == a * 5  # 5as/h per sbh: softmax (2), mask (1), dropout out (2)
    assert fused.per_seq == 0
    # ... and adds only the fp32 log-sum-exp: the kept output is the output-proj input.
    assert fused.split - unfused.split == 4 * a


def test_pipeline_first_stage_holds_the_whole_model_of_activations_under_1f1b() -> None:
    """Korthikanti Sec. 4.2.3: with p stages and >= p micro-batches the first stage keeps
    ``L`` layers' worth for one micro-batch, whatever ``p``; interleaving multiplies it by
    ``1 + (p-1)/(p·v)``."""
    training = Training(seq_len=2048, loss="fused")
    plans = PlanBatch.from_arrays(
        pp=np.array([1, 4, 8, 8]),
        vp=np.array([1, 1, 1, 2]),
        global_batch=np.array([16, 16, 16, 16]),
    )
    first = stage_activations(L8B, training, plans, "first").stored
    assert first[1] == pytest.approx(first[0], rel=0.01)
    assert first[2] == pytest.approx(first[0], rel=0.01)
    assert first[3] / first[2] == pytest.approx(1 + 7 / 16, rel=1e-6)


def test_context_parallel_divides_the_sequence() -> None:
    training = Training(seq_len=8192)
    plans = PlanBatch.from_arrays(cp=np.array([1, 4]), dp=np.array([4, 1]), global_batch=4)
    act = stage_activations(L8B, training, plans, "first").stored
    assert act[0] / act[1] == pytest.approx(4, rel=1e-9)


# --- model states: ZeRO paper Sec. 5 (Fig. 1) --------------------------------------------


def test_zero_stages_follow_the_zero_paper_per_parameter_bytes() -> None:
    """Rajbhandari et al. 2020, Fig. 1: 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N (K = 12)."""
    psi, n = total_params(L8B), 64
    plans = PlanBatch.from_arrays(dp=n, zero=np.array([0, 1, 2, 3]), global_batch=n)
    mem = training_memory(L8B, Training(seq_len=1024), plans, profile=PROFILE)
    states = mem.weights + mem.gradients + mem.optimizer
    gathered = (mem.weights[3] - 2 * psi / n) + (mem.gradients[3] - 2 * psi / n)
    expected = np.array([16 * psi, 4 * psi + 12 * psi / n, 2 * psi + 14 * psi / n, 16 * psi / n])
    np.testing.assert_allclose(states - np.array([0, 0, 0, gathered]), expected, rtol=1e-9)
    assert 0 < gathered < 0.05 * 16 * psi  # two units and one unit's grads, not the model


@pytest.mark.parametrize(
    ("optimizer", "master", "per_param"),
    [
        ("adamw", True, 16.0),
        ("adamw", False, 8.0),
        ("sgd-momentum", True, 12.0),
        ("sgd-momentum", False, 6.0),
        ("adamw-8bit", True, 10.0),
        ("adamw-8bit", False, 6.0),
    ],
)
def test_bytes_per_parameter(optimizer: str, master: bool, per_param: float) -> None:
    training = Training(optimizer=optimizer, master_weights=master)  # type: ignore[arg-type]
    mem = plan_memory(L8B, training, Plan(), PROFILE)
    assert _states(mem) / total_params(L8B) == pytest.approx(per_param, rel=2e-3)


def test_adafactor_state_is_a_sliver_of_adamw() -> None:
    ada = plan_memory(L8B, Training(optimizer="adafactor"), Plan(), PROFILE)["optimizer"]
    psi = total_params(L8B)
    assert 4 * psi < ada < 4.01 * psi  # fp32 master plus factored moments


def test_llama_405b_bf16_weights_are_810_gb() -> None:
    mem = plan_memory(catalog.model("llama3.1-405b"), Training(), Plan(), PROFILE)
    assert mem["weights"] / 1e9 == pytest.approx(811.7, rel=1e-3)
    assert mem["total"] > 80 * GIB


def test_qlora_stores_4_bit_blocks_and_16_bit_embeddings() -> None:
    training = Training(finetune="qlora", lora_rank=16, master_weights=False)
    mem = plan_memory(L8B, training, Plan(), PROFILE)
    linear = L8B.num_layers * block_linear_weights(L8B)
    rest = total_params(L8B) - linear
    lora_params = mem["gradients"] / 2
    expected = linear * nf4_bytes_per_param(True) + rest * 2 + lora_params * 2
    assert mem["weights"] == pytest.approx(expected, rel=1e-9)
    assert nf4_bytes_per_param(True) * 8 == pytest.approx(4.127, abs=1e-3)  # QLoRA Sec. 3
    assert nf4_bytes_per_param(False) * 8 == pytest.approx(4.5)


def test_lora_trains_a_fraction_and_saves_activation_memory() -> None:
    full = plan_memory(L8B, Training(seq_len=2048), Plan(), PROFILE)
    lora = plan_memory(L8B, Training(seq_len=2048, finetune="lora", lora_rank=16), Plan(), PROFILE)
    assert lora["gradients"] < 0.01 * full["gradients"]
    assert lora["activations"] < full["activations"]
    assert lora["weights"] == pytest.approx(full["weights"], rel=0.01)


def test_offload_and_paging_move_states_to_host() -> None:
    base = plan_memory(L8B, Training(), Plan(), PROFILE)
    off = plan_memory(L8B, Training(offload_optimizer=True), Plan(), PROFILE)
    params = plan_memory(L8B, Training(offload_params=True), Plan(), PROFILE)
    paged = plan_memory(L8B, Training(paged_optimizer=True), Plan(), PROFILE)
    assert off["optimizer"] == 0 and off["host"] == pytest.approx(
        base["optimizer"] + base["gradients"]
    )
    # One layer's gradients transit the device on their way to the host.
    assert 0 < off["gradients"] < base["gradients"] / L8B.num_layers * 1.01
    assert params["weights"] < 0.2 * base["weights"]
    assert paged["optimizer"] == 0 and paged["host"] == base["optimizer"]


def test_gradients_and_activations_overlap_only_without_persistent_buffers() -> None:
    training = Training(seq_len=2048, foreach_optimizer=False)
    single = plan_memory(L8B, training, Plan(), PROFILE)
    accum = plan_memory(L8B, training, Plan(global_batch=2), PROFILE)
    ddp = plan_memory(L8B, training, Plan(dp=2, global_batch=2), PROFILE)
    assert single["overlap"] == min(single["gradients"], single["activations"])
    assert accum["overlap"] == 0 and ddp["overlap"] == 0


def test_last_stage_can_be_the_worst_with_a_large_vocabulary() -> None:
    qwen = catalog.model("qwen2.5-7b")
    plans = PlanBatch.from_arrays(pp=4, global_batch=4, recompute=RECOMPUTE_CODE["full"])
    mem = training_memory(qwen, Training(seq_len=8192), plans, profile=PROFILE)
    assert mem.stage[0] == 1


def test_vectorized_batch_equals_plan_by_plan() -> None:
    rng = np.random.default_rng(0)
    n = 64
    tp = rng.choice([1, 2, 4, 8], n)
    pp = rng.choice([1, 2, 4], n)
    dp = rng.choice([1, 2, 8], n)
    zero = np.where(dp > 1, rng.choice([0, 1, 2, 3], n), 0)
    mbs = rng.choice([1, 2], n)
    gbs = mbs * dp * rng.choice([1, 4, 8], n)
    plans = PlanBatch.from_arrays(
        tp=tp,
        pp=pp,
        dp=dp,
        zero=zero,
        micro_batch=mbs,
        global_batch=gbs,
        recompute=rng.choice([0, 1, 2], n),
        vp=np.where(pp > 1, rng.choice([1, 2], n), 1),
    )
    training = Training(seq_len=4096, finetune="lora")
    batch = training_memory(L8B, training, plans, profile=PROFILE)
    for i in range(n):
        assert batch.row(i) == pytest.approx(plan_memory(L8B, training, plans.plan(i), PROFILE))


def test_memory_of_many_plans_is_vectorized() -> None:
    # A ratio in one run, not a wall-clock limit: a plan in a batch of 200k must cost far less
    # than a plan evaluated on its own (the planner's search depends on it).
    n = 200_000
    rng = np.random.default_rng(1)
    dp = rng.choice([1, 2, 4, 8, 16], n)
    plans = PlanBatch.from_arrays(
        tp=rng.choice([1, 2, 4, 8], n),
        pp=rng.choice([1, 2, 4], n),
        dp=dp,
        zero=rng.choice([0, 1, 3], n),
        global_batch=dp * 8,
    )
    training_memory(L8B, Training(), plans, profile=PROFILE)  # warm-up
    start = time.perf_counter()
    mem = training_memory(L8B, Training(), plans, profile=PROFILE)
    per_plan_batched = (time.perf_counter() - start) / n
    singles = 200
    start = time.perf_counter()
    for i in range(singles):
        plan_memory(L8B, Training(), plans.plan(i), PROFILE)
    per_plan_alone = (time.perf_counter() - start) / singles
    assert per_plan_batched < 0.05 * per_plan_alone
    assert mem.total.shape == (n,) and np.all(mem.total > 0)


# --- inference ----------------------------------------------------------------------------


def test_kv_cache_is_gqa_aware() -> None:
    """Llama 2 70B (8 KV heads of 128): 2 x 80 x 8 x 128 x 2 bytes = 320 KiB per token."""
    l70 = catalog.model("llama2-70b")
    mem = inference_memory(l70, Inference(batch=1, context_len=1024)).row(0)
    assert mem["kv_cache"] == 327_680 * 1024
    mha = dataclasses.replace(l70, num_kv_heads=64)
    assert (
        inference_memory(mha, Inference(batch=1, context_len=1024)).row(0)["kv_cache"]
        == 8 * mem["kv_cache"]
    )


def test_inference_weights_by_dtype_and_tensor_parallel_split() -> None:
    tp = np.array([1, 2, 4, 8])
    bf16 = inference_memory(L8B, Inference(), tp=tp).weights
    int4 = inference_memory(L8B, Inference(weight_dtype="int4"), tp=tp).weights
    np.testing.assert_allclose(bf16[0] / bf16, tp)
    assert bf16[0] == pytest.approx(2 * total_params(L8B))
    linear = L8B.num_layers * block_linear_weights(L8B)
    assert int4[0] == pytest.approx(linear * (0.5 + 4 / 128) + 2 * (total_params(L8B) - linear))


def test_megatron_keeps_fp32_gradients_other_stacks_16bit() -> None:
    from gpuscale import catalog
    from gpuscale.costmodel.memory import training_memory
    from gpuscale.costmodel.profile import load_profile
    from gpuscale.specs import PlanBatch, Training

    model, training = catalog.model("llama3.1-70b"), Training(seq_len=4096)
    plans = PlanBatch.from_arrays(tp=8, pp=4, dp=4, micro_batch=1, global_batch=64, zero=1)
    generic = training_memory(model, training, plans, load_profile("generic")).gradients[0]
    megatron = training_memory(model, training, plans, load_profile("megatron")).gradients[0]
    assert megatron == 2 * generic  # Megatron-Core: 4 bytes (main_grad) vs 2
