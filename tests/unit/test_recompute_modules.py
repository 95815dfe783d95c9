"""Megatron-Core's selective recompute by module (``--recompute-modules``): what each module
frees of a layer's saved activations and what it re-runs, against the terms it is made of."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscale import catalog
from gpuscale.api import estimate
from gpuscale.costmodel.activations import layer_terms, module_savings
from gpuscale.errors import InputError
from gpuscale.specs.training import Training

DSV3 = catalog.model("deepseek-v3")
LLAMA = catalog.model("llama3.1-70b")
E = 2  # bf16 activations


def _training(*modules: str) -> Training:
    return Training(seq_len=4096, recompute_modules=tuple(modules))


def test_the_default_frees_what_selective_recompute_always_freed() -> None:
    unfused = dataclasses.replace(_training("core_attn"), flash_attention=False)
    freed = module_savings(LLAMA, unfused)
    assert freed.per_seq == layer_terms(LLAMA, unfused).per_seq > 0
    assert freed.replicated == freed.split == freed.gathered == 0.0
    # with flash attention the core keeps nothing beyond its inputs and its output
    assert module_savings(LLAMA, _training("core_attn")).per_seq == 0.0


def test_mla_up_proj_frees_the_attention_inputs_the_up_projections_form() -> None:
    freed = module_savings(DSV3, _training("mla_up_proj"))
    # DeepSeek-V3: 128 heads of 192-wide queries and keys, 128-wide values
    assert freed.split == E * 128 * (192 + 192 + 128)
    assert DSV3.v_width == 128 * 128 and DSV3.attention_out_width == 128 * 128
    assert LLAMA.v_width == LLAMA.kv_width and LLAMA.attention_out_width == LLAMA.q_width
    # ... and nothing on a model without MLA (the API refuses it there)
    assert module_savings(LLAMA, _training("mla_up_proj")).split == 0.0


def test_moe_act_frees_the_second_expert_gemms_input_in_the_moe_blocks_only() -> None:
    freed = module_savings(DSV3, _training("moe_act"))
    share = (DSV3.num_layers - DSV3.dense_layers) / DSV3.num_layers
    assert freed.split == pytest.approx(share * DSV3.experts_per_token * E * DSV3.ffn_hidden_size)


def test_moe_includes_moe_act_and_keeps_only_the_layer_input() -> None:
    both = module_savings(DSV3, _training("moe", "moe_act"))
    moe = module_savings(DSV3, _training("moe"))
    assert both == moe
    assert moe.split > module_savings(DSV3, _training("moe_act")).split
    assert moe.replicated > 0  # the routed copies of the hidden state


def test_mlp_frees_a_dense_models_whole_mlp() -> None:
    freed = module_savings(LLAMA, _training("mlp"))
    assert freed.split == 3 * E * LLAMA.ffn_hidden_size  # SwiGLU input (2f) + down input (f)


def test_more_modules_hold_less_and_cost_more_time() -> None:
    run = dict(gpu="h100-sxm", gpus=256, pp=16, ep=8, framework="megatron")
    steps = [
        ("none", "core_attn"),
        ("selective", "mla_up_proj"),
        ("selective", "mla_up_proj,moe_act,layernorm"),
        ("selective", "mla_up_proj,moe,mlp,layernorm"),
    ]
    answers = [estimate("deepseek-v3", recompute=r, recompute_modules=m, **run) for r, m in steps]
    memory = [a.memory_per_gpu_gib for a in answers]
    time = [a.step_time_s for a in answers]
    assert memory == sorted(memory, reverse=True) and len(set(memory)) == len(memory)
    assert time == sorted(time) and len(set(time)) == len(time)
    full = estimate("deepseek-v3", recompute="full", **run)
    # (both at the floor the model states and the last stage set here)
    assert full.memory_per_gpu_gib <= memory[-1] and full.step_time_s > time[-1]


@pytest.mark.parametrize(
    ("model", "kwargs", "words"),
    [
        ("llama3.1-8b", {"recompute_modules": "mla_up_proj"}, "needs multi-latent attention"),
        ("llama3.1-8b", {"recompute_modules": "moe_act"}, "needs a mixture-of-experts model"),
        ("llama3.1-8b", {"recompute_modules": "attention"}, "unknown module 'attention'"),
        ("llama3.1-8b", {"recompute_modules": "mlp,mlp"}, "names a module twice"),
    ],
)
def test_bad_modules_get_one_line(model: str, kwargs: dict[str, str], words: str) -> None:
    with pytest.raises(InputError, match=words) as err:
        estimate(model, gpu="h100-sxm", gpus=8, recompute="selective", **kwargs)
    assert "\n" not in str(err.value)


def test_modules_without_selective_recompute_are_refused() -> None:
    with pytest.raises(InputError, match="applies with --recompute selective"):
        estimate("llama3.1-8b", gpu="h100-sxm", gpus=8, recompute_modules="mlp")
    # the default list is what selective means, so it needs no --recompute
    estimate("llama3.1-8b", gpu="h100-sxm", gpus=8, recompute_modules="core_attn")


def test_mlp_also_frees_the_fused_norm_output_and_its_statistics() -> None:
    # Transformer Engine fuses the pre-MLP norm into the first MLP linear; the checkpointed
    # MLP keeps only the norm's input (transformer_layer._run_mlp).
    freed = module_savings(LLAMA, _training("mlp"))
    assert freed.replicated == E * LLAMA.hidden_size + 4  # the norm output + fp32 rstd


def test_a_recomputed_moe_layer_runs_its_all_to_alls_again() -> None:
    run = dict(gpu="h100-sxm", gpus=1024, tp=2, pp=16, ep=32, etp=1, framework="megatron")
    kept = estimate("deepseek-v3", recompute="selective", **run)
    moe = estimate("deepseek-v3", recompute="selective", recompute_modules="moe", **run)
    full = estimate("deepseek-v3", recompute="full", **run)
    # 4 all-to-alls a layer, 6 when the layer's forward runs twice (full or moe)
    assert moe.parts_s["comm_ep"] == pytest.approx(full.parts_s["comm_ep"], rel=1e-9)
    assert moe.parts_s["comm_ep"] == pytest.approx(1.5 * kept.parts_s["comm_ep"], rel=1e-9)


def test_modules_apply_under_the_megatron_policy_only() -> None:
    from gpuscale.costmodel.compute import layer_compute
    from gpuscale.costmodel.profile import load_profile
    from gpuscale.specs import Plan, PlanBatch

    plans = PlanBatch.from_plans([Plan(tp=8, recompute="selective", global_batch=8)])
    device, prof = catalog.gpu("h100-sxm"), load_profile("generic")
    op = dataclasses.replace(_training("core_attn"), selective_policy="op")
    op_mlp = dataclasses.replace(op, recompute_modules=("mlp",))
    a = layer_compute(LLAMA, device, op, plans, prof).layer_recompute_s
    b = layer_compute(LLAMA, device, op_mlp, plans, prof).layer_recompute_s
    assert a == pytest.approx(b, rel=0, abs=0)


@pytest.mark.parametrize("text", ["none", "", ("none",), [" NONE "]])
def test_no_modules_is_accepted_without_selective_recompute(text: object) -> None:
    estimate("llama3.1-8b", gpu="h100-sxm", gpus=8, recompute_modules=text)  # type: ignore[arg-type]


def test_module_lists_are_read_alike_as_text_or_sequence() -> None:
    from gpuscale.api.training import parse_recompute_modules

    assert parse_recompute_modules(" MLP , core_attn") == ("mlp", "core_attn")
    assert parse_recompute_modules([" mlp", "core_attn "]) == ("mlp", "core_attn")
