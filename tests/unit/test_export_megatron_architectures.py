"""Every catalog architecture exports to Megatron-LM as that architecture, or is refused.

The launch script's model flags are read back into megatron-core's own ``TransformerConfig`` /
``MLATransformerConfig`` (Megatron-LM's arguments.py generates a flag for each field, dashes for
underscores), whose ``__post_init__`` checks them, and the layer patterns are read with
megatron-core's own helpers. A flag that is neither a config field nor a known launch flag fails
the test, so a misspelt flag cannot pass.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuscale import catalog
from gpuscale.errors import InputError
from gpuscale.export import TrainingJob, export
from gpuscale.specs import ModelSpec, Plan, Training
from tests.launch_args import script_args

# Flags of the launch that are not TransformerConfig fields: data, batch, optimizer, position
# table and the arguments.py spellings that core_transformer_config_from_args translates.
LAUNCH_FLAGS = {
    "seq_length", "max_position_embeddings", "micro_batch_size", "global_batch_size",
    "position_embedding_type", "untie_embeddings_and_output_weights", "use_distributed_optimizer",
    "overlap_param_gather", "overlap_grad_reduce", "group_query_attention", "swiglu",
    "quick_geglu", "disable_bias_linear", "num_experts", "moe_router_topk", "bf16", "fp16",
    "fp8_format", "expert_model_parallel_size", "expert_tensor_parallel_size",
    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
    "moe_layer_freq", "cross_entropy_loss_fusion", "cross_entropy_fusion_impl",
    "grad_reduce_in_bf16", "cpu_offloading_num_layers", "moe_token_dispatcher_type",
    "overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "recompute_modules",
    "multi_latent_attention", "rotary_percent", "no_rope_fusion", "apply_layernorm_1p",
    "rotary_base", "use_rope_scaling", "rope_scaling_factor",
}  # fmt: skip


def _job(model: str | ModelSpec, seq: int = 4096, cp: int = 1) -> TrainingJob:
    spec = catalog.model(model)
    # The widest tensor parallelism up to 8 that the heads split over (megatron-core refuses
    # the rest).
    tp = next(
        t
        for t in (8, 4, 2, 1)
        if spec.num_heads % t == 0 and (spec.num_kv_heads % t == 0 or t % spec.num_kv_heads == 0)
    )
    # megatron-core builds expert biases (gpt-oss) only with experts whole on each rank.
    etp = 1 if spec.is_moe and spec.linear_bias else tp
    plan = Plan(tp=tp, etp=etp, dp=2, cp=cp, micro_batch=1, global_batch=64)
    return TrainingJob(
        model_id=spec.name,
        model=spec,
        gpu="h100-sxm",
        gpus=plan.num_gpus,
        gpus_per_node=8,
        plan=plan,
        training=Training(seq_len=seq, precision="bf16"),
    )


def _flags(model: str | ModelSpec, seq: int = 4096, cp: int = 1) -> dict[str, str | bool]:
    return script_args(export(_job(model, seq, cp), "megatron").files[0].content)


def _value(name: str, raw: str | bool) -> Any:
    """A flag's value as arguments.py types it (int, float, tuple_type, a list expression)."""
    if raw is True:
        return True
    text = str(raw)
    if name == "window_size":
        return tuple(int(v) for v in text.strip("()").split(","))
    if text.startswith("["):
        return eval(text, {"__builtins__": {}})  # as moe_freq_type / no_rope_freq_type do
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _megatron_config(flags: dict[str, str | bool]) -> Any:
    """megatron-core's config built from the script's flags, the way
    core_transformer_config_from_args maps the few arguments.py spellings that differ."""
    import torch
    from megatron.core.activations import quick_gelu
    from megatron.core.transformer import MLATransformerConfig, TransformerConfig

    cls = MLATransformerConfig if "multi_latent_attention" in flags else TransformerConfig
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(flags) - fields - LAUNCH_FLAGS)
    assert not unknown, f"flags megatron-core has no field for: {unknown}"
    kw = {name: _value(name, raw) for name, raw in flags.items() if name in fields}
    kw["num_moe_experts"] = int(flags["num_experts"]) if "num_experts" in flags else None
    if "num_experts" in flags:
        kw["moe_router_topk"] = int(flags["moe_router_topk"])
        freq = flags.get("moe_layer_freq")
        kw["moe_layer_freq"] = _value("moe_layer_freq", freq) if freq else 1
    kw["gated_linear_unit"] = "swiglu" in flags or "quick_geglu" in flags
    if "quick_geglu" in flags:
        kw["activation_func"] = quick_gelu
    # arguments.py fuses RoPE by default (--no-rope-fusion turns it off); megatron-core needs
    # Transformer Engine for it, absent here, so only the flag's presence is read.
    kw["apply_rope_fusion"] = False
    kw["add_bias_linear"] = "disable_bias_linear" not in flags
    kw["layernorm_zero_centered_gamma"] = "apply_layernorm_1p" in flags  # its arg name
    # arguments.py: "Keep the 'add bias' args in sync; add_qkv_bias is more targeted."
    kw["add_qkv_bias"] = kw["add_bias_linear"] or "add_qkv_bias" in flags
    if "rotary_percent" in flags and cls is not TransformerConfig:
        kw["rotary_percent"] = float(flags["rotary_percent"])
    kw["params_dtype"] = torch.bfloat16
    kw["bf16"] = True
    return cls(**kw)


CATALOG_DECODERS = [
    name
    for name, spec in catalog.models().items()
    if spec.causal
    and spec.position != "alibi"
    and not spec.parallel_block
    and spec.qk_norm not in ("rmsnorm_full", "l2")
]


@pytest.mark.parametrize("model", CATALOG_DECODERS)
def test_every_exportable_catalog_model_is_accepted_by_megatron_core(model: str) -> None:
    spec = catalog.model(model)
    flags = _flags(model)
    config = _megatron_config(flags)
    assert config.num_layers == spec.num_layers
    assert config.num_attention_heads == spec.num_heads
    assert config.add_qkv_bias == spec.qkv_bias
    assert config.add_bias_linear == spec.linear_bias
    assert config.qk_layernorm == (spec.qk_norm == "rmsnorm" or spec.is_mla)
    if spec.is_moe:
        assert config.num_moe_experts == spec.num_experts
        assert config.moe_router_topk == spec.experts_per_token
        assert config.moe_router_score_function == spec.router_score
        assert config.moe_router_enable_expert_bias == spec.router_expert_bias
        assert (config.moe_router_num_groups or 0) == spec.router_groups
        assert (config.moe_router_group_topk or 0) == spec.router_group_topk
        assert (config.moe_router_topk_scaling_factor or 1.0) == spec.router_scaling_factor


@pytest.mark.parametrize("model", ["deepseek-v3", "kimi-k2.5", "glm-5"])
def test_mla_models_export_their_latent_attention(model: str) -> None:
    """DeepSeek-V3, Kimi-K2.5 and GLM-5 are built with multi-head latent attention of their own
    ranks (before, they were exported as 128 or 64 full heads of 192-256 channels), and GLM-5
    with its DSA indexer."""
    from megatron.core.transformer import MLATransformerConfig

    spec = catalog.model(model)
    config = _megatron_config(_flags(model))
    assert isinstance(config, MLATransformerConfig)
    assert config.multi_latent_attention
    assert config.q_lora_rank == spec.q_lora_rank
    assert config.kv_lora_rank == spec.kv_lora_rank
    assert config.qk_head_dim == spec.qk_nope_head_dim
    assert config.qk_pos_emb_head_dim == spec.qk_rope_head_dim
    assert config.v_head_dim == spec.v_head_dim
    assert config.num_query_groups in (None, spec.num_heads)
    if spec.sparse_attention_topk:
        assert config.experimental_attention_variant == "dsa"
        assert config.dsa_indexer_topk == spec.sparse_attention_topk
        assert config.dsa_indexer_n_heads == spec.indexer_heads
        assert config.dsa_indexer_head_dim == spec.indexer_head_dim
    else:
        assert config.experimental_attention_variant is None


def test_deepseek_v3_router_is_group_limited_sigmoid_with_expert_bias() -> None:
    config = _megatron_config(_flags("deepseek-v3"))
    assert config.moe_router_score_function == "sigmoid"
    assert config.moe_router_enable_expert_bias
    assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 4)
    assert config.moe_router_topk_scaling_factor == 2.5


def test_gpt_oss_exports_windows_sinks_and_its_activation() -> None:
    """gpt-oss: a 128-token window on alternate layers (megatron-core's own
    is_layer_window_attention counts them), learned sinks, biases everywhere and the clamped
    quick-GELU SwiGLU with its +1 offset, as Megatron-Bridge's GPTOSSBridge sets them."""
    from megatron.core.transformer.utils import is_layer_window_attention

    spec = catalog.model("gpt-oss-120b")
    config = _megatron_config(_flags("gpt-oss-120b"))
    windowed = [
        is_layer_window_attention(config.window_size, config.window_attn_skip_freq, n)
        for n in range(1, spec.num_layers + 1)
    ]
    assert sum(windowed) == spec.sliding_window_layers == 18
    assert windowed[:2] == [True, False]  # layer_types: sliding_attention first
    assert config.window_size == (spec.sliding_window - 1, 0)
    assert config.softmax_type == "learnable"
    assert config.glu_linear_offset == 1.0 and config.activation_func_clamp_value == 7.0
    assert config.add_bias_linear and config.add_qkv_bias


def test_llama4_maverick_exports_nope_layers_and_a_top1_sigmoid_router() -> None:
    spec = catalog.model("llama4-maverick")
    config = _megatron_config(_flags("llama4-maverick"))
    assert sum(config.no_rope_freq) == spec.num_layers - spec.attention_chunk_layers == 12
    assert config.no_rope_freq[:4] == [0, 0, 0, 1]
    assert config.moe_router_score_function == "sigmoid"
    assert not config.moe_router_pre_softmax


def test_partial_rotary_and_qk_norm_reach_megatron() -> None:
    qwen = _megatron_config(_flags("qwen3-32b"))
    assert qwen.qk_layernorm and not qwen.qk_l2_norm
    spec = dataclasses.replace(catalog.model("llama3.1-8b"), name="partial", rotary_dim=64)
    flags = _flags(spec)
    assert float(flags["rotary_percent"]) == 0.5  # arguments.py --rotary-percent (GPTModel's)
    _megatron_config(flags)


def test_qwen25_keeps_its_qkv_bias_without_other_biases() -> None:
    config = _megatron_config(_flags("qwen2.5-72b"))
    assert config.add_qkv_bias and not config.add_bias_linear


@pytest.mark.parametrize(
    ("model", "seq", "words"),
    [
        ("bert-large", 512, "encoder"),
        ("gpt-j-6b", 2048, "in parallel"),
        ("minimax-m2.5", 4096, "over all heads"),
        ("llama4-scout", 4096, "RoPE layers only"),
        ("llama4-maverick", 16384, "8192-token chunks"),
    ],
)
def test_architectures_megatron_cannot_build_are_refused_in_one_line(
    model: str, seq: int, words: str
) -> None:
    with pytest.raises(InputError, match=words) as info:
        export(_job(model, seq), "megatron")
    assert "\n" not in str(info.value)


def test_expert_biases_with_expert_tensor_parallelism_are_refused() -> None:
    """megatron-core refuses gpt-oss's expert biases with experts split over TP ranks; the plan
    the cost model priced must say --etp 1, not be changed on the way out."""
    spec = catalog.model("gpt-oss-120b")
    plan = Plan(tp=8, dp=2, micro_batch=1, global_batch=64)
    job = TrainingJob(
        model_id=spec.name, model=spec, gpu="h100-sxm", gpus=16, gpus_per_node=8, plan=plan,
        training=Training(seq_len=4096, precision="bf16"),
    )  # fmt: skip
    with pytest.raises(InputError, match="--etp 1"):
        export(job, "megatron")


def test_alibi_models_are_refused() -> None:
    spec = dataclasses.replace(catalog.model("llama3.1-8b"), name="alibi-8b", position="alibi")
    with pytest.raises(InputError, match="ALiBi"):
        export(_job(spec), "megatron")


def test_llama4_maverick_within_one_chunk_is_exported() -> None:
    """Up to one chunk of context, chunked attention is full attention: the export is exact."""
    assert "no_rope_freq" in _flags("llama4-maverick", seq=8192)


def test_glm5_trains_its_indexer_without_fused_rope() -> None:
    """DSAttention: megatron-core asserts "RoPE fusion is not supported for DSAttention" and
    arguments.py fuses RoPE by default, so --no-rope-fusion; the indexer's inputs are detached,
    so without its own loss (Megatron-Bridge's GLM-5 bridge: 0.001, sparse) it never trains;
    under context parallelism DSA gathers its keys whole (cp_comm_type allgather)."""
    flags = _flags("glm-5")
    assert flags["no_rope_fusion"] is True
    config = _megatron_config(flags)
    assert config.dsa_indexer_loss_coeff == 0.001 and config.dsa_indexer_use_sparse_loss
    assert "cp_comm_type" not in flags
    # (megatron-core 0.16.1, installed here, predates DSA under context parallelism.)
    assert _flags("glm-5", cp=2)["cp_comm_type"] == "allgather"


def test_llama4_router_scales_the_expert_input() -> None:
    config = _megatron_config(_flags("llama4-maverick"))
    assert config.moe_apply_probs_on_input


def test_unnormalized_and_gated_routers_reach_megatron() -> None:
    """A softmax over all experts kept as is (DeepSeek-V2, Qwen2-MoE norm_topk_prob false) is
    --moe-router-pre-softmax; Qwen's sigmoid gate on the shared expert is
    --moe-shared-expert-gate."""
    base = catalog.model("qwen3-30b-a3b")
    qwen2 = dataclasses.replace(
        base, name="qwen2-moe-like", router_topk_normalized=False, shared_experts=1,
        shared_expert_gate=True,
    )  # fmt: skip
    config = _megatron_config(_flags(qwen2))
    assert config.moe_router_pre_softmax and config.moe_shared_expert_gate
    assert not _megatron_config(_flags("qwen3-30b-a3b")).moe_router_pre_softmax
    sigmoid = dataclasses.replace(
        catalog.model("glm-5"), name="sigmoid-unnormalized", router_topk_normalized=False
    )
    with pytest.raises(InputError, match="renormalizes"):
        export(_job(sigmoid), "megatron")


def test_rotary_share_megatron_cannot_state_exactly_is_refused() -> None:
    """Megatron-LM takes int(head_dim x --rotary-percent) channels: 30 of 44 written as the
    shortest decimal of 30/44 reads back as 29."""
    assert int(44 * float(repr(30 / 44))) == 29
    spec = dataclasses.replace(
        catalog.model("llama3.1-8b"), name="odd-rope", head_dim=44, rotary_dim=30
    )
    with pytest.raises(InputError, match="rotary-percent"):
        export(_job(spec), "megatron")


def test_nope_layers_that_do_not_divide_the_layers_are_refused() -> None:
    spec = dataclasses.replace(
        catalog.model("llama4-maverick"), name="odd", attention_chunk_layers=43
    )
    with pytest.raises(InputError, match="no-rope-freq"):
        export(_job(spec, seq=4096), "megatron")


def test_the_rotary_base_is_written_where_recorded_and_the_rest_is_said() -> None:
    """Llama 3.1's config.json base (500,000) and its Llama 3 scaling (factor 8) are written
    (--rotary-base, an int in arguments.py; --use-rope-scaling --rope-scaling-factor); gpt-oss's
    YaRN is named in a note; DeepSeek-V3's copy records no base, so Megatron's 10,000 stands
    and the note says so; learned positions need neither."""
    llama = export(_job("llama3.1-8b"), "megatron")
    flags = script_args(llama.files[0].content)
    assert flags["rotary_base"] == "500000"
    assert flags["use_rope_scaling"] is True and flags["rope_scaling_factor"] == "8"
    assert llama.notes == ()
    assert any("YaRN" in n for n in export(_job("gpt-oss-20b"), "megatron").notes)
    deepseek = export(_job("deepseek-v3"), "megatron")
    assert "rotary_base" not in script_args(deepseek.files[0].content)
    assert any("--rotary-base 10000" in n for n in deepseek.notes)
    assert export(_job("gpt3-1.3b"), "megatron").notes == ()


def test_qwen35_exports_its_gated_deltanet_hybrid() -> None:
    """Qwen3.5: Gated DeltaNet layers with full attention every 4th (megatron-core's own
    get_linear_attention_pattern counts them), the gated attention output, the shared-expert
    gate, norms scaled by 1 + weight and rotary on a quarter of each head, as Megatron-Bridge's
    Qwen3.5 bridge sets them."""
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import (
        get_linear_attention_pattern,
    )

    spec = catalog.model("qwen3.5-397b-a17b")
    flags = _flags("qwen3.5-397b-a17b")
    config = _megatron_config(flags)
    pattern = get_linear_attention_pattern(config)
    assert sum(pattern) == spec.linear_attention_layers == 45 and pattern[:4] == [1, 1, 1, 0]
    assert config.experimental_attention_variant == "gated_delta_net"
    assert (config.linear_num_key_heads, config.linear_num_value_heads) == (16, 64)
    assert config.attention_output_gate and config.moe_shared_expert_gate
    assert config.layernorm_zero_centered_gamma and config.qk_layernorm
    assert float(flags["rotary_percent"]) == 0.25


def test_odd_layer_count_windows_every_other_layer_from_the_first() -> None:
    """transformers' gpt-oss default windows layers 0, 2, 4, ...: ceil(L / 2) of an odd L,
    which megatron-core's --window-attn-skip-freq 2 places the same way."""
    from megatron.core.transformer.utils import is_layer_window_attention

    odd = dataclasses.replace(
        catalog.model("gpt-oss-20b"), name="odd-oss", num_layers=5, sliding_window_layers=3
    )
    config = _megatron_config(_flags(odd))
    windowed = [
        is_layer_window_attention(config.window_size, config.window_attn_skip_freq, n)
        for n in range(1, 6)
    ]
    assert windowed == [True, False, True, False, True]


@pytest.mark.parametrize(("tp", "cp"), [(1, 2), (32, 1)])
def test_gated_deltanet_layouts_megatron_core_refuses_are_refused(tp: int, cp: int) -> None:
    """megatron-core 0.16 has no context parallelism for Gated DeltaNet and needs TP to divide
    the linear layers' 16 key heads (TP 32 splits Qwen3.5's 32 attention heads)."""
    spec = catalog.model("qwen3.5-397b-a17b")
    plan = Plan(tp=tp, cp=cp, dp=1, micro_batch=1, global_batch=8)
    job = TrainingJob(
        model_id=spec.name, model=spec, gpu="h100-sxm", gpus=plan.num_gpus, gpus_per_node=8,
        plan=plan, training=Training(seq_len=4096, precision="bf16"),
    )  # fmt: skip
    with pytest.raises(InputError, match="Gated DeltaNet"):
        export(job, "megatron")
