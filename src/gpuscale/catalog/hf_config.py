"""Read a Hugging Face style ``config.json`` into a :class:`ModelSpec`.

Supported ``model_type`` values and their architectural conventions (bias, MLP, norm, position)
follow each family's modeling file in ``transformers``. A multimodal config whose language model
sits under ``text_config`` is read from there. Anything malformed is an
:class:`~gpuscale.errors.InputError` naming the file and the key, never another exception.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuscale import files
from gpuscale.errors import InputError
from gpuscale.specs import ModelSpec

LLAMA_LIKE = ("llama", "mistral", "qwen2", "mixtral", "qwen3")
MOE_LIKE = (
    "qwen2_moe",
    "qwen3_moe",
    "gpt_oss",
    "minimax_m2",
    "deepseek_v3",
    "deepseek_v2",
    "kimi_k2",
    "glm_moe_dsa",
    "qwen3_next",
    "qwen3_5_moe_text",
    "llama4_text",
)
MLA_LIKE = ("deepseek_v3", "deepseek_v2", "kimi_k2", "glm_moe_dsa")
"""DeepSeek-V2/V3 layout: MLA, shared experts, leading dense layers (GLM-5's glm_moe_dsa adds
a DeepSeek sparse-attention indexer, not counted)."""
HYBRID_LIKE = ("qwen3_next", "qwen3_5_moe_text")
"""Qwen3-Next/Qwen3.5: Gated DeltaNet layers between gated full-attention layers."""
SUPPORTED = (*LLAMA_LIKE, *MOE_LIKE, "gpt2", "gpt_neox", "gptj", "mpt", "bloom", "opt", "bert")

MAX_DIMENSION = 1 << 24
"""Largest accepted width, depth or count (16.7M): far above any released model (vocabularies
reach ~256k, hidden sizes ~16k), low enough that a typo cannot overflow the cost model."""


def _int(cfg: Mapping[str, Any], where: str, *keys: str, default: int | None = None) -> int:
    for key in keys:
        if key in cfg and cfg[key] is not None:
            value = cfg[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(f"{where}: '{key}' must be a positive integer, got {value!r:.40}")
            if value > MAX_DIMENSION:
                raise InputError(
                    f"{where}: '{key}' = {value} is implausibly large (at most {MAX_DIMENSION})"
                )
            return value
    if default is not None:
        return default
    raise InputError(f"{where}: missing '{keys[0]}' (needed to size the model)")


def _count(cfg: Mapping[str, Any], where: str, key: str) -> int:
    """A count the config may leave out or set to 0 (shared experts, leading dense layers, a
    sliding window): 0 when absent or null, else a whole number 0 to :data:`MAX_DIMENSION`
    (``int()`` of the raw value raised a TypeError/ValueError/OverflowError traceback on a
    string, a list or 1e400, and truncated 1.5 to 1)."""
    value = cfg.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DIMENSION:
        raise InputError(
            f"{where}: '{key}' must be a whole number 0 to {MAX_DIMENSION}, got {value!r:.40}"
        )
    return value


def _number(cfg: Mapping[str, Any], where: str, key: str, default: float) -> float:
    value = cfg.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e3:
        raise InputError(f"{where}: '{key}' must be a positive number, got {value!r:.40}")
    return float(value)


def _flag(cfg: Mapping[str, Any], where: str, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if not isinstance(value, (bool, int)):
        raise InputError(f"{where}: '{key}' must be true or false, got {value!r:.40}")
    return bool(value)


def _mapping(cfg: Mapping[str, Any], where: str, key: str) -> Mapping[str, Any]:
    value = cfg.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{where}: '{key}' must be a JSON object")
    return value


def _model_type(cfg: Mapping[str, Any], where: str) -> str:
    raw = cfg.get("model_type")
    if raw is None:
        guessed = _guess_type(cfg)
        if guessed is None:
            raise InputError(f"{where}: no 'model_type'; supported: {', '.join(SUPPORTED)}")
        return guessed
    if not isinstance(raw, str) or raw not in SUPPORTED:
        raise InputError(
            f"{where}: unsupported model_type {str(raw)[:40]!r}; supported: {', '.join(SUPPORTED)}"
        )
    return raw


def model_from_config(cfg: Mapping[str, Any], name: str) -> ModelSpec:
    """Map one parsed ``config.json`` to a :class:`ModelSpec`."""
    if not isinstance(cfg, Mapping):
        raise InputError(f"{name}: a config.json must hold a JSON object")
    text = cfg.get("text_config")
    if cfg.get("model_type") not in SUPPORTED and isinstance(text, Mapping):
        return model_from_config(text, name)
    model_type = _model_type(cfg, name)
    source = f"config.json ({name})"
    if model_type == "mpt":
        return _mpt(cfg, name, source)

    hidden = _int(cfg, name, "hidden_size", "n_embd", "d_model")
    heads = _int(cfg, name, "num_attention_heads", "n_head", "num_heads")
    common: dict[str, Any] = {
        "name": name,
        "hidden_size": hidden,
        "num_heads": heads,
        "source": source,
        "num_layers": _int(cfg, name, "num_hidden_layers", "n_layer", "num_layers"),
        "vocab_size": _int(cfg, name, "vocab_size"),
    }
    if cfg.get("head_dim") is not None:
        head_dim = _int(cfg, name, "head_dim")
        if head_dim * heads != hidden:
            common["head_dim"] = head_dim

    if model_type not in ("gpt2", "opt", "bloom", "bert"):
        common["rope_theta"] = _rope_theta(cfg, name)
        common.update(_rope_scaling(cfg, name))
    if model_type in MOE_LIKE:
        return _moe(cfg, name, model_type, common, heads)
    if model_type == "gptj":
        # GPT-J: parallel attention/MLP block, rotary on rotary_dim of each head, biased MLP
        # and head, no QKV bias, untied embeddings (transformers GPTJModel).
        return ModelSpec(
            **common,
            num_kv_heads=heads,
            ffn_hidden_size=_int(cfg, name, "n_inner", default=4 * hidden),
            max_seq_len=_int(cfg, name, "n_positions", default=2048),
            mlp="plain",
            norm="layernorm",
            position="rope",
            tied_embeddings=False,
            qkv_bias=False,
            linear_bias=True,
            parallel_block=True,
            rotary_dim=_count(cfg, name, "rotary_dim") if "rotary_dim" in cfg else 64,
        )
    if model_type in LLAMA_LIKE:
        # transformers' MixtralConfig defaults (num_local_experts 8, num_experts_per_tok 2) stand
        # where a mixtral config leaves the keys out: it was read as a dense model.
        mixtral = model_type == "mixtral"
        experts = _int(cfg, name, "num_local_experts", default=8) if mixtral else 1
        return ModelSpec(
            **common,
            num_kv_heads=_int(cfg, name, "num_key_value_heads", default=heads),
            ffn_hidden_size=_int(cfg, name, "intermediate_size"),
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=4096),
            mlp="gated",
            norm="rmsnorm",
            position="rope",
            tied_embeddings=_flag(cfg, name, "tie_word_embeddings", False),
            qkv_bias=model_type == "qwen2" or _flag(cfg, name, "attention_bias", False),
            linear_bias=_flag(cfg, name, "mlp_bias", False),
            qk_norm="rmsnorm" if model_type == "qwen3" else "none",  # Qwen3Attention q/k_norm
            num_experts=experts,
            experts_per_token=_int(cfg, name, "num_experts_per_tok", default=2 if mixtral else 1)
            if experts > 1
            else 1,
        )
    if model_type == "gpt2":
        return ModelSpec(
            **common,
            num_kv_heads=heads,
            ffn_hidden_size=_int(cfg, name, "n_inner", default=4 * hidden),
            max_seq_len=_int(cfg, name, "n_positions", "n_ctx", default=1024),
            mlp="plain",
            norm="layernorm",
            position="learned",
            tied_embeddings=True,
            qkv_bias=True,
            linear_bias=True,
        )
    if model_type == "gpt_neox":
        # GPTNeoXConfig: use_parallel_residual (default true) runs attention and the MLP on one
        # normed input; rotary_pct (default 0.25) of each head carries the rotary embedding.
        rotary = _number(cfg, name, "rotary_pct", 0.25)
        if rotary > 1.0:
            raise InputError(f"{name}: 'rotary_pct' must be at most 1, got {rotary}")
        head = hidden // heads
        return ModelSpec(
            **common,
            num_kv_heads=heads,
            ffn_hidden_size=_int(cfg, name, "intermediate_size"),
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=2048),
            mlp="plain",
            norm="layernorm",
            position="rope",
            tied_embeddings=_flag(cfg, name, "tie_word_embeddings", False),
            qkv_bias=_flag(cfg, name, "attention_bias", True),
            linear_bias=True,
            parallel_block=_flag(cfg, name, "use_parallel_residual", True),
            rotary_dim=0 if rotary == 1.0 else max(int(head * rotary), 1),
        )
    if model_type == "bloom":
        return ModelSpec(
            **common,
            num_kv_heads=heads,
            ffn_hidden_size=4 * hidden,
            max_seq_len=_int(cfg, name, "seq_length", default=2048),
            mlp="plain",
            norm="layernorm",
            position="alibi",
            tied_embeddings=True,
            qkv_bias=True,
            linear_bias=True,
            # word_embeddings_layernorm (weight + bias)
            extra_params=2 * hidden,
        )
    if model_type == "opt":
        proj = _int(cfg, name, "word_embed_proj_dim", default=hidden)
        extra = 0 if proj == hidden else 2 * hidden * proj
        bias = _flag(cfg, name, "enable_bias", True)
        return ModelSpec(
            **common,
            num_kv_heads=heads,
            ffn_hidden_size=_int(cfg, name, "ffn_dim"),
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=2048),
            mlp="plain",
            norm="layernorm",
            position="learned",
            tied_embeddings=_flag(cfg, name, "tie_word_embeddings", True),
            qkv_bias=bias,
            linear_bias=bias,
            # OPT's learned positions carry an offset of 2 rows (OPTLearnedPositionalEmbedding)
            extra_params=extra + 2 * hidden,
        )
    # bert: token-type embeddings and the pooler (dense + bias) on top of the shared layout;
    # its embedding LayerNorm stands in for the final norm the layout counts.
    return ModelSpec(
        **common,
        num_kv_heads=heads,
        ffn_hidden_size=_int(cfg, name, "intermediate_size"),
        max_seq_len=_int(cfg, name, "max_position_embeddings", default=512),
        mlp="plain",
        norm="layernorm",
        position="learned",
        tied_embeddings=True,
        qkv_bias=True,
        linear_bias=True,
        causal=False,
        extra_params=_int(cfg, name, "type_vocab_size", default=2) * hidden
        + hidden * hidden
        + hidden,
    )


def _moe(
    cfg: Mapping[str, Any], name: str, model_type: str, common: dict[str, Any], heads: int
) -> ModelSpec:
    """Mixture-of-experts configs: Qwen2/3-MoE, Qwen3-Next/Qwen3.5 hybrids, gpt-oss, MiniMax-M2
    and DeepSeek-V2/V3, Kimi-K2, GLM-5 (MLA, shared experts, leading dense layers), key names as
    in each transformers config class."""
    experts = _int(cfg, name, "num_experts", "num_local_experts", "n_routed_experts")
    top_k = _int(cfg, name, "num_experts_per_tok", "experts_per_token", default=2)
    expert_ffn = _int(cfg, name, "moe_intermediate_size", "intermediate_size")
    layers = common["num_layers"]
    extra: dict[str, Any] = {}
    if model_type in MLA_LIKE:
        rope = _int(cfg, name, "qk_rope_head_dim")
        nope = _int(cfg, name, "qk_nope_head_dim")
        extra.update(
            kv_lora_rank=_int(cfg, name, "kv_lora_rank"),
            q_lora_rank=_int(cfg, name, "q_lora_rank", default=0) if cfg.get("q_lora_rank") else 0,
            qk_rope_head_dim=rope,
            qk_nope_head_dim=nope,
            v_head_dim=_int(cfg, name, "v_head_dim"),
            head_dim=rope + nope,
            shared_experts=_count(cfg, name, "n_shared_experts"),
            dense_layers=min(_count(cfg, name, "first_k_dense_replace"), layers),
            dense_ffn_hidden_size=_int(cfg, name, "intermediate_size"),
            # Kimi-K2.5's INT4 checkpoint ignores ``re:.*self_attn.*`` (checkpoints.yaml); a
            # config without a quantization_config is a 16-bit or architecture-only copy.
            attention_weights_16bit=_attention_not_quantized(cfg, default=False),
            dense_mlp_weights_16bit=_dense_mlp_not_quantized(cfg),
        )
        if model_type == "glm_moe_dsa":
            # DSA indexer (transformers GlmMoeDsaConfig defaults: top-2048, 32 heads of 128)
            extra.update(
                sparse_attention_topk=_int(cfg, name, "index_topk", default=2048),
                indexer_heads=_int(cfg, name, "index_n_heads", default=32),
                indexer_head_dim=_int(cfg, name, "index_head_dim", default=128),
            )
    elif model_type in ("qwen2_moe", "qwen3_moe", *HYBRID_LIKE):
        shared = (
            _int(cfg, name, "shared_expert_intermediate_size", default=0)
            if cfg.get("shared_expert_intermediate_size")
            else 0
        )
        extra["shared_experts"] = max(round(shared / expert_ffn), 0) if shared else 0
        if cfg.get("head_dim") is not None:
            extra["head_dim"] = _int(cfg, name, "head_dim")
        if model_type in HYBRID_LIKE:
            extra.update(_hybrid(cfg, name, model_type, layers))
    elif model_type == "llama4_text":
        extra.update(_llama4(cfg, name, layers))
    elif model_type == "gpt_oss":
        window = _count(cfg, name, "sliding_window")
        kinds = cfg.get("layer_types")
        if kinds is not None:
            # gpt-oss alternates, a window first; the spec counts the layers and the exports
            # place them by that rule, so another layout is refused rather than misplaced.
            # (transformers GptOssConfig's default: sliding where (i + 1) % 2, full elsewhere)
            alternate = [
                "sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)
            ]
            if kinds not in (alternate, ["full_attention"] * layers):
                raise InputError(
                    f"{name}: 'layer_types' must alternate sliding_attention and full_attention "
                    f"over the {layers} layers (gpt-oss), or be all full_attention"
                )
            sliding = kinds.count("sliding_attention")
        else:
            sliding = (layers + 1) // 2
        extra.update(
            sliding_window=window,
            sliding_window_layers=sliding if window else 0,
            head_dim=_int(cfg, name, "head_dim", default=64),
            attention_weights_16bit=_attention_not_quantized(cfg, default=True),
        )
    elif cfg.get("head_dim") is not None:
        extra["head_dim"] = _int(cfg, name, "head_dim")
    if top_k > experts:
        raise InputError(f"{name}: num_experts_per_tok ({top_k}) exceeds the experts ({experts})")
    extra.update(_router(cfg, name, experts, model_type))
    if model_type in ("qwen3_moe", *HYBRID_LIKE):
        extra["qk_norm"] = "rmsnorm"  # transformers Qwen3MoeAttention / Qwen3NextAttention
    if model_type == "minimax_m2":
        # MiniMaxM2Attention: q_norm / k_norm over all heads together, rotary on rotary_dim.
        if _flag(cfg, name, "use_qk_norm", True):
            extra["qk_norm"] = "rmsnorm_full"
        extra["rotary_dim"] = _count(cfg, name, "rotary_dim")
    if model_type in ("qwen2_moe", *HYBRID_LIKE) and extra.get("shared_experts"):
        extra["shared_expert_gate"] = True  # Qwen2MoeSparseMoeBlock.shared_expert_gate
    if model_type == "gpt_oss":
        extra["attention_sinks"] = True  # GptOssAttention.sinks
    common = {k: v for k, v in common.items() if k != "head_dim"}
    return ModelSpec(
        **common,
        num_kv_heads=_int(cfg, name, "num_key_value_heads", default=heads),
        ffn_hidden_size=expert_ffn,
        max_seq_len=_int(cfg, name, "max_position_embeddings", default=4096),
        mlp="gated",
        norm="rmsnorm",
        position="rope",
        tied_embeddings=_flag(cfg, name, "tie_word_embeddings", False),
        qkv_bias=_flag(cfg, name, "attention_bias", model_type == "gpt_oss"),
        # gpt-oss: o_proj follows attention_bias; every expert has gate_up and down biases.
        linear_bias=model_type == "gpt_oss",
        num_experts=experts,
        experts_per_token=top_k,
        **extra,
    )


def _attention_not_quantized(cfg: Mapping[str, Any], *, default: bool) -> bool:
    """True when the checkpoint's quantization leaves the whole attention module in 16 bits:
    an entry naming ``self_attn`` (not one of its submodules, as GLM-5-FP8's
    ``self_attn.indexers_proj``) in ``modules_to_not_convert`` (gpt-oss MXFP4), compressed-
    tensors ``ignore`` (Kimi-K2.5 INT4: ``re:.*self_attn.*``) or ModelOpt ``exclude_modules``.
    Without a ``quantization_config`` (a copy of the architecture fields only) ``default``:
    gpt-oss keeps the published recipe, its only released checkpoints being MXFP4 experts with
    BF16 attention."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping):
        return default
    for key in ("modules_to_not_convert", "ignore", "exclude_modules"):
        skip = qc.get(key)
        if isinstance(skip, list) and any(_names_attention(str(m)) for m in skip):
            return True
    return False


def _dense_mlp_not_quantized(cfg: Mapping[str, Any]) -> bool:
    """True when the checkpoint's quantization skips both the shared experts and the leading
    dense layers' MLP of a DeepSeek-V3-layout model (Kimi-K2.5 compressed-tensors ``ignore``:
    ``re:.*shared_experts.*``, ``re:.*mlp\\.(gate|up|gate_up|down)_proj.*``). Patterns are
    tried on the transformers module names: ``re:`` as compressed-tensors does (``re.match``),
    others as globs (``fnmatch``)."""
    qc = cfg.get("quantization_config")
    if not isinstance(qc, Mapping):
        return False
    patterns = [
        str(p)
        for key in ("modules_to_not_convert", "ignore", "exclude_modules")
        if isinstance(qc.get(key), list)
        for p in qc[key]
    ]

    def skipped(module: str) -> bool:
        for p in patterns:
            if p.startswith("re:"):
                try:
                    if re.match(p[3:], module):
                        return True
                except re.error:
                    continue
            elif fnmatch.fnmatchcase(module, p) or module == p:
                return True
        return False

    return skipped("model.layers.0.mlp.down_proj") and skipped(
        "model.layers.1.mlp.shared_experts.down_proj"
    )


def _names_attention(pattern: str) -> bool:
    """Whether a module pattern (glob, or ``re:`` regex in compressed-tensors) covers the whole
    ``self_attn`` module: it ends at ``self_attn`` up to a trailing wildcard."""
    p = pattern.removeprefix("re:")
    for tail in (".*", "*"):
        p = p.removesuffix(tail)
    return p.endswith("self_attn")


def _router(cfg: Mapping[str, Any], name: str, experts: int, model_type: str) -> dict[str, Any]:
    """How the router weighs its experts: ``scoring_func``, ``topk_method`` ``noaux_tc`` (an
    expert bias) or MiniMaxM2Config ``use_routing_bias``, ``n_group`` / ``topk_group`` (one group
    is no grouping), ``routed_scaling_factor`` and ``norm_topk_prob``. Where a key is left out,
    the family's: DeepseekV3Config (also read for kimi_k2) has no ``scoring_func`` (its
    DeepseekV3TopkRouter is a sigmoid with ``e_score_correction_bias``) and defaults n_group 8,
    topk_group 4, routed_scaling_factor 2.5; GLM's Glm4MoeTopkRouter and MiniMax-M2's router are
    the same sigmoid with a bias; Llama4TextMoe a sigmoid without one; the rest score with a
    softmax. Top-k weights are renormalized except where DeepseekV2Config and Qwen2MoeConfig
    default ``norm_topk_prob`` to false (every released Qwen3 MoE config sets it true)."""
    v3 = model_type in ("deepseek_v3", "kimi_k2")
    biased = v3 or model_type in ("glm_moe_dsa", "minimax_m2")
    sigmoid = biased or model_type == "llama4_text"
    score = cfg.get("scoring_func") or ("sigmoid" if sigmoid else "softmax")
    if score not in ("softmax", "sigmoid"):
        raise InputError(
            f"{name}: unsupported scoring_func {str(score)[:40]!r}; supported: softmax, sigmoid"
        )
    groups = _count(cfg, name, "n_group") if "n_group" in cfg else (8 if v3 else 0)
    group_topk = _count(cfg, name, "topk_group") if "topk_group" in cfg else (4 if v3 else 0)
    if groups > 1 and (experts % groups or not 1 <= group_topk <= groups):
        raise InputError(
            f"{name}: n_group ({groups}) must divide the {experts} experts and topk_group "
            f"({group_topk}) lie in 1..n_group"
        )
    method = cfg.get("topk_method")
    if method is not None and not isinstance(method, str):
        raise InputError(f"{name}: 'topk_method' must be a string, got {method!r:.40}")
    bias = (
        method == "noaux_tc"
        or (biased and method is None)
        or _flag(cfg, name, "use_routing_bias", model_type == "minimax_m2")
    )
    if bias and score != "sigmoid":
        raise InputError(
            f"{name}: an expert-bias router (noaux_tc, use_routing_bias) scores with a sigmoid; "
            f"scoring_func is {score!r}"
        )
    return {
        "router_score": score,
        "router_expert_bias": bias,
        "router_groups": groups if groups > 1 else 0,
        "router_group_topk": group_topk if groups > 1 else 0,
        "router_scaling_factor": _number(cfg, name, "routed_scaling_factor", 2.5 if v3 else 1.0),
        "router_topk_normalized": _flag(
            cfg, name, "norm_topk_prob", model_type not in ("deepseek_v2", "qwen2_moe")
        ),
    }


def _layer_flags(cfg: Mapping[str, Any], name: str, key: str, layers: int) -> list[int] | None:
    """A per-layer list of 0/1 flags (``no_rope_layers``), or None when the key is absent or
    empty; anything else is refused in one line."""
    value = cfg.get(key)
    if value is None or value == []:
        return None
    if (
        not isinstance(value, list)
        or len(value) != layers
        or any(isinstance(v, bool) or v not in (0, 1) for v in value)
    ):
        raise InputError(f"{name}: '{key}' must list a 0 or 1 for each of the {layers} layers")
    return [int(v) for v in value]


def _llama4(cfg: Mapping[str, Any], name: str, layers: int) -> dict[str, Any]:
    """Llama 4's text model (transformers Llama4TextConfig and its defaults): routed experts of
    ``intermediate_size`` plus one shared expert on the MoE layers (``moe_layers``, else every
    ``interleave_moe_layer_step``-th), dense MLPs of ``intermediate_size_mlp`` on the rest;
    ``no_rope_layers`` marks the RoPE layers (1), which attend within ``attention_chunk_size``
    (8192) tokens, the others attend globally without RoPE (every ``no_rope_layer_interval``-th,
    4); ``use_qk_norm`` (true) is an L2 norm without weights; the router's sigmoid weight scales
    the expert's input. Other layer placements are refused: the spec counts layers, and the
    exports place them by that rule."""
    step = _int(cfg, name, "interleave_moe_layer_step", default=1)
    if step > layers:
        raise InputError(f"{name}: interleave_moe_layer_step ({step}) exceeds the {layers} layers")
    moe = cfg.get("moe_layers")
    if moe is not None and moe != []:
        wanted = list(range(step - 1, layers, step))
        if not isinstance(moe, list) or moe != wanted:
            raise InputError(
                f"{name}: 'moe_layers' must be every interleave_moe_layer_step-th layer "
                f"({wanted[:4]}...); other placements are not read"
            )
    rope = _layer_flags(cfg, name, "no_rope_layers", layers)
    if rope is None:
        interval = _int(cfg, name, "no_rope_layer_interval", default=4)
        rope = [int((i + 1) % interval != 0) for i in range(layers)]
    nope = layers - sum(rope)
    periodic = nope == 0 or (
        layers % nope == 0 and rope == [int((i + 1) % (layers // nope) != 0) for i in range(layers)]
    )
    if not periodic:
        raise InputError(
            f"{name}: 'no_rope_layers' must make every n-th layer a NoPE layer (0), as Llama 4 "
            "does; other placements are not read"
        )
    chunk = _count(cfg, name, "attention_chunk_size") if "attention_chunk_size" in cfg else 8192
    if chunk and nope == layers:
        raise InputError(f"{name}: attention_chunk_size is set but no layer uses RoPE")
    return {
        "shared_experts": 1,
        "dense_layers": layers - layers // step,
        "moe_layer_step": step if step > 1 else 1,
        "dense_ffn_hidden_size": _int(cfg, name, "intermediate_size_mlp") if step > 1 else 0,
        "attention_chunk_size": chunk,
        "attention_chunk_layers": layers - nope if chunk else 0,
        "qk_norm": "l2" if _flag(cfg, name, "use_qk_norm", True) else "none",
        "router_scales_input": True,
        "head_dim": _int(
            cfg,
            name,
            "head_dim",
            default=_int(cfg, name, "hidden_size") // _int(cfg, name, "num_attention_heads"),
        ),
    }


def _hybrid(cfg: Mapping[str, Any], name: str, model_type: str, layers: int) -> dict[str, Any]:
    """Qwen3-Next/Qwen3.5 layer mix and Gated DeltaNet shapes (transformers
    Qwen3_5MoeTextConfig: ``layer_types``, else full attention every ``full_attention_interval``
    layers; ``linear_*`` head counts and widths; ``attn_output_gate``)."""
    kinds = cfg.get("layer_types")
    interval = _int(cfg, name, "full_attention_interval", default=4)
    if kinds is not None:
        # The spec counts the layers and the exports place a full-attention layer every n-th
        # one (Megatron-Core linear_attention_freq), so another layout is refused.
        full = kinds.count("full_attention") if isinstance(kinds, list) else 0
        n = layers // full if full else 0
        if (
            not n
            or layers % full
            or kinds != (["linear_attention"] * (n - 1) + ["full_attention"]) * full
        ):
            raise InputError(
                f"{name}: 'layer_types' must put a full_attention layer every n-th of the "
                f"{layers} layers and linear_attention elsewhere (Qwen3-Next/Qwen3.5)"
            )
        interval = n
    linear = layers - layers // interval
    return {
        "linear_attention_layers": linear,
        "linear_num_key_heads": _int(cfg, name, "linear_num_key_heads"),
        "linear_num_value_heads": _int(cfg, name, "linear_num_value_heads"),
        "linear_key_head_dim": _int(cfg, name, "linear_key_head_dim"),
        "linear_value_head_dim": _int(cfg, name, "linear_value_head_dim"),
        "linear_conv_kernel": _int(cfg, name, "linear_conv_kernel_dim", default=4),
        # Qwen3-Next always gates its attention output; Qwen3.5 says so in the config.
        "attention_output_gate": _flag(cfg, name, "attn_output_gate", model_type == "qwen3_next"),
        "rotary_dim": _partial_rotary(cfg, name),
        "norm_offset_one": True,  # Qwen3NextRMSNorm / Qwen3_5MoeRMSNorm: x * (1 + weight)
    }


def _rope_theta(cfg: Mapping[str, Any], name: str) -> float:
    """``rope_theta`` (top level, or inside ``rope_parameters``), 0 where the file leaves it
    out: an export then keeps its tool's default and says so."""
    value: Any = cfg.get("rope_theta")
    inner = cfg.get("rope_parameters")
    if value is None and isinstance(inner, Mapping):
        value = inner.get("rope_theta")
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e12:
        raise InputError(f"{name}: 'rope_theta' must be a positive number, got {value!r:.40}")
    return float(value)


def _rope_scaling(cfg: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``rope_scaling`` (or ``rope_parameters``): its ``rope_type`` (``type`` in older files)
    and ``factor``; Llama 3's scaling is read only with the low/high frequency factors 1 and 4
    over 8,192 original tokens that every Llama 3.x/4 file states (the exports' tools fix
    them); other kinds are left out (an export then says the scaling is not carried)."""
    scaling: Any = cfg.get("rope_scaling")
    if not isinstance(scaling, Mapping):
        scaling = cfg.get("rope_parameters")
    if not isinstance(scaling, Mapping):
        return {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in ("llama3", "yarn"):
        return {}
    factor = _number(scaling, name, "factor", 0.0) if scaling.get("factor") is not None else 0.0
    if not factor:
        raise InputError(f"{name}: rope_scaling of type {kind} needs a positive 'factor'")
    if kind == "llama3":
        fixed = {
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        }
        if any(scaling.get(k, v) != v for k, v in fixed.items()):
            return {}
    return {"rope_scaling": kind, "rope_scaling_factor": factor}


def _partial_rotary(cfg: Mapping[str, Any], name: str) -> int:
    """Rotary channels of a Qwen3-Next/Qwen3.5 full-attention head: ``partial_rotary_factor``
    (top level, or inside ``rope_parameters`` / ``rope_scaling``; Qwen3NextConfig's default
    0.25) of ``head_dim``."""
    factor: Any = cfg.get("partial_rotary_factor")
    for key in ("rope_parameters", "rope_scaling"):
        inner = cfg.get(key)
        if factor is None and isinstance(inner, Mapping):
            factor = inner.get("partial_rotary_factor")
    value = _number({"partial_rotary_factor": factor}, name, "partial_rotary_factor", 0.25)
    if value > 1.0:
        raise InputError(f"{name}: 'partial_rotary_factor' must be at most 1, got {value}")
    head = _int(
        cfg, name, "head_dim",
        default=_int(cfg, name, "hidden_size") // _int(cfg, name, "num_attention_heads"),
    )  # fmt: skip
    return 0 if value == 1.0 else max(int(head * value), 1)


def _mpt(cfg: Mapping[str, Any], name: str, source: str) -> ModelSpec:
    hidden = _int(cfg, name, "d_model")
    heads = _int(cfg, name, "n_heads")
    attn = _mapping(cfg, name, "attn_config")
    no_bias = _flag(cfg, name, "no_bias", True)
    alibi = _flag(attn, name, "alibi", False)
    learned = _flag(cfg, name, "learned_pos_emb", True) and not alibi
    return ModelSpec(
        name=name,
        num_layers=_int(cfg, name, "n_layers"),
        hidden_size=hidden,
        num_heads=heads,
        num_kv_heads=_int(attn, name, "kv_n_heads", default=heads),
        ffn_hidden_size=int(hidden * _number(cfg, name, "expansion_ratio", 4.0)),
        vocab_size=_int(cfg, name, "vocab_size"),
        max_seq_len=_int(cfg, name, "max_seq_len", default=2048),
        mlp="plain",
        norm="layernorm",
        position="learned" if learned else "alibi",
        tied_embeddings=True,
        qkv_bias=not no_bias,
        linear_bias=not no_bias,
        source=source,
    )


def _guess_type(cfg: Mapping[str, Any]) -> str | None:
    if "n_embd" in cfg and "n_layer" in cfg:
        return "gpt2"
    if "d_model" in cfg and "n_layers" in cfg:
        return "mpt"
    return None


def model_from_config_file(path: Path) -> ModelSpec:
    """Read ``path`` (a ``config.json``) into a :class:`ModelSpec`, with one-line errors."""
    text = files.read_text(
        path,
        label="config.json",
        expected="a config.json (UTF-8 JSON)",
        missing=f"no such model or file '{files.shown(path)}'",
    )
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    spec = model_from_config(cfg, str(path))
    # The format the checkpoint stores, as an engine loading it would read it (Kimi-K2.5 keeps
    # its quantization_config inside text_config).
    inner = cfg.get("text_config") if isinstance(cfg, Mapping) else None
    qc = cfg.get("quantization_config") if isinstance(cfg, Mapping) else None
    if qc is None and isinstance(inner, Mapping):
        qc = inner.get("quantization_config")
    stored = checkpoint_weights(qc) if isinstance(qc, Mapping) else None
    kv = checkpoint_kv_cache(qc) if isinstance(qc, Mapping) else None
    return dataclasses.replace(
        spec,
        stored_weights=stored or "",
        stored_kv_cache=kv or "",
        unread_quantization=unread_quantization(qc),
    )


def unread_quantization(qc: Any) -> str:
    """What a ``quantization_config`` says (a clause: ``declares quant_method 'bitsandbytes'``)
    when it declares quantized weights in a scheme :func:`checkpoint_weights` does not read
    (empty when there is none, when it is read, or when it quantizes the KV cache alone): a GPTQ
    or AWQ checkpoint of 3 bits, bitsandbytes, a string. Served under ``--weights auto`` it was
    priced as 16-bit weights without a word."""
    if qc is None:
        return ""
    if not isinstance(qc, Mapping):
        return f"is not an object ({str(qc)[:40]!r})"
    if checkpoint_weights(qc) is not None:
        return ""
    method = str(qc.get("quant_method", "")).lower()
    if method == "modelopt" and _modelopt(qc, "quant_algo") is None:
        return ""  # ModelOpt's KV-cache-only scheme: 16-bit weights
    if method in ("gptq", "awq"):
        return f"declares quant_method '{method}' with {_bits(qc)!r} bits"
    return f"declares quant_method '{method}'" if method else "declares no quant_method"


def _bits(qc: Mapping[str, Any]) -> Any:
    # HF GPTQConfig/AwqConfig write "bits"; AutoAWQ's quant_config writes "w_bit".
    return qc.get("bits", qc.get("w_bit"))


def checkpoint_kv_cache(qc: Mapping[str, Any] | None) -> str | None:
    """The KV-cache dtype a checkpoint's quantization config declares: ``fp8`` for ModelOpt's
    ``kv_cache_quant_algo: FP8`` (flat in ``config.json``, or under ``quantization`` in
    ``hf_quant_config.json``), which TensorRT-LLM (``ModelConfig`` reads it into
    ``QuantConfig.kv_cache_quant_algo``), SGLang (``ModelRunner.configure_kv_cache_dtype``) and
    vLLM (vllm-project/vllm PR #30785) follow under ``auto``; None otherwise (the fp8, mxfp4 and
    compressed-tensors configs of the catalogued checkpoints carry no KV scheme)."""
    if not isinstance(qc, Mapping):
        return None
    return "fp8" if str(_modelopt(qc, "kv_cache_quant_algo") or "").upper() == "FP8" else None


def _modelopt(qc: Mapping[str, Any], key: str) -> Any:
    """A ModelOpt field, flat (``config.json``'s ``quantization_config``) or under
    ``quantization`` (``hf_quant_config.json``)."""
    inner = qc.get("quantization")
    return qc.get(key) or (inner.get(key) if isinstance(inner, Mapping) else None)


def checkpoint_weights(qc: Mapping[str, Any] | None) -> str | None:
    """The serving weight format (a ``--weights`` name) a checkpoint's ``quantization_config``
    stores, or None for 16-bit weights or a scheme not read here.

    - ``quant_method: fp8`` with ``weight_block_size`` -> ``fp8_block`` (one scale per weight
      block, activations quantized per token group at run time: vLLM/SGLang ``Fp8Config``
      ``weight_block_size``; DeepSeek-V3, arXiv:2412.19437 Sec. 3.3.2), without it -> ``fp8``
      (per-tensor scales);
    - ``mxfp4`` -> ``mxfp4`` (gpt-oss; OCP MX v1.0);
    - ModelOpt (``hf_quant_config.json`` ``quant_algo``): ``FP8`` -> ``fp8``, ``NVFP4`` ->
      ``nvfp4``;
    - ``compressed-tensors`` whose weight groups are 4-bit integers with no input activation
      scheme -> ``int4_wo`` (W4A16, compressed-tensors ``QuantizationArgs``);
    - ``gptq`` and ``awq`` of 4 or 8 bits -> ``int4_wo`` / ``int8_wo``."""
    if not isinstance(qc, Mapping):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        return "fp8_block" if qc.get("weight_block_size") else "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method in ("gptq", "awq"):
        # Integer weights in groups with 16-bit scales, activations in 16 bits (GPTQ, Frantar
        # et al. 2022, arXiv:2210.17323; AWQ, Lin et al. 2023, arXiv:2306.00978), the
        # weight-only kernels the engines run them on (vLLM/SGLang GPTQ/AWQ Marlin W4A16/W8A16).
        return {4: "int4_wo", 8: "int8_wo"}.get(_bits(qc))
    if method == "modelopt":
        return {"FP8": "fp8", "NVFP4": "nvfp4"}.get(str(_modelopt(qc, "quant_algo") or "").upper())
    if method == "compressed-tensors":
        groups = qc.get("config_groups")
        if not isinstance(groups, Mapping):
            return None
        found = set()
        for group in groups.values():
            w = group.get("weights") if isinstance(group, Mapping) else None
            if not isinstance(w, Mapping):
                return None
            weight_only = group.get("input_activations") is None
            if w.get("type") == "int" and w.get("num_bits") == 4 and weight_only:
                found.add("int4_wo")
            else:
                return None
        return found.pop() if len(found) == 1 else None
    return None
