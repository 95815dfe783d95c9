"""Read a Hugging Face style ``config.json`` into a :class:`ModelSpec`.

Supported ``model_type`` values and their architectural conventions (bias, MLP, norm, position)
follow each family's modeling file in ``transformers``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuscale.errors import InputError
from gpuscale.specs import ModelSpec

LLAMA_LIKE = ("llama", "mistral", "qwen2", "mixtral")
SUPPORTED = (*LLAMA_LIKE, "gpt2", "gpt_neox", "mpt", "bloom", "opt", "bert")


def _int(cfg: Mapping[str, Any], where: str, *keys: str, default: int | None = None) -> int:
    for key in keys:
        if key in cfg and cfg[key] is not None:
            value = cfg[key]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InputError(f"{where}: '{key}' must be a positive integer, got {value!r}")
            return value
    if default is not None:
        return default
    raise InputError(f"{where}: missing '{keys[0]}' (needed to size the model)")


def model_from_config(cfg: Mapping[str, Any], name: str) -> ModelSpec:
    """Map one parsed ``config.json`` to a :class:`ModelSpec`."""
    if not isinstance(cfg, Mapping):
        raise InputError(f"{name}: a config.json must hold a JSON object")
    model_type = str(cfg.get("model_type") or _guess_type(cfg) or "")
    if model_type not in SUPPORTED:
        raise InputError(f"{name}: unsupported model_type '{model_type}'; supported: {', '.join(SUPPORTED)}")
    if model_type == "mpt":
        hidden = _int(cfg, name, "d_model")
        layers = _int(cfg, name, "n_layers")
        heads = _int(cfg, name, "n_heads")
        attn = cfg.get("attn_config") or {}
        kv = attn.get("kv_n_heads") if isinstance(attn, Mapping) else None
        ffn_ratio = cfg.get("expansion_ratio", 4)
        if not isinstance(ffn_ratio, (int, float)) or ffn_ratio <= 0:
            raise InputError(f"{name}: 'expansion_ratio' must be a positive number, got {ffn_ratio!r}")
        learned = bool(cfg.get("learned_pos_emb", True)) and not (
            isinstance(attn, Mapping) and attn.get("alibi"))
        return ModelSpec(
            name=name, num_layers=layers, hidden_size=hidden, num_heads=heads,
            num_kv_heads=kv if isinstance(kv, int) and kv > 0 else heads,
            ffn_hidden_size=int(hidden * ffn_ratio), vocab_size=_int(cfg, name, "vocab_size"),
            max_seq_len=_int(cfg, name, "max_seq_len", default=2048), mlp="plain",
            norm="layernorm", position="learned" if learned else "alibi",
            tied_embeddings=True, qkv_bias=not cfg.get("no_bias", True),
            linear_bias=not cfg.get("no_bias", True), source=f"config.json ({name})")

    hidden = _int(cfg, name, "hidden_size", "n_embd", "d_model")
    layers = _int(cfg, name, "num_hidden_layers", "n_layer", "num_layers")
    heads = _int(cfg, name, "num_attention_heads", "n_head", "num_heads")
    vocab = _int(cfg, name, "vocab_size")
    common: dict[str, Any] = {"name": name, "num_layers": layers, "hidden_size": hidden,
                              "num_heads": heads, "vocab_size": vocab,
                              "source": f"config.json ({name})"}
    head_dim = cfg.get("head_dim")
    if isinstance(head_dim, int) and head_dim > 0 and head_dim * heads != hidden:
        common["head_dim"] = head_dim

    if model_type in LLAMA_LIKE:
        experts = cfg.get("num_local_experts", 1) if model_type == "mixtral" else 1
        return ModelSpec(
            **common, num_kv_heads=_int(cfg, name, "num_key_value_heads", default=heads),
            ffn_hidden_size=_int(cfg, name, "intermediate_size"),
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=4096),
            mlp="gated", norm="rmsnorm", position="rope",
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=model_type == "qwen2" or bool(cfg.get("attention_bias", False)),
            linear_bias=bool(cfg.get("mlp_bias", False)),
            num_experts=int(experts),
            experts_per_token=_int(cfg, name, "num_experts_per_tok", default=1) if experts > 1 else 1)
    if model_type == "gpt2":
        return ModelSpec(
            **common, num_kv_heads=heads,
            ffn_hidden_size=_int(cfg, name, "n_inner", default=4 * hidden),
            max_seq_len=_int(cfg, name, "n_positions", "n_ctx", default=1024),
            mlp="plain", norm="layernorm", position="learned", tied_embeddings=True,
            qkv_bias=True, linear_bias=True)
    if model_type == "gpt_neox":
        return ModelSpec(
            **common, num_kv_heads=heads, ffn_hidden_size=_int(cfg, name, "intermediate_size"),
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=2048),
            mlp="plain", norm="layernorm", position="rope",
            tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
            qkv_bias=bool(cfg.get("attention_bias", True)), linear_bias=True)
    if model_type == "bloom":
        return ModelSpec(
            **common, num_kv_heads=heads, ffn_hidden_size=4 * hidden,
            max_seq_len=_int(cfg, name, "seq_length", default=2048),
            mlp="plain", norm="layernorm", position="alibi", tied_embeddings=True,
            qkv_bias=True, linear_bias=True,
            # word_embeddings_layernorm (weight + bias)
            extra_params=2 * hidden)
    if model_type == "opt":
        proj = cfg.get("word_embed_proj_dim", hidden)
        extra = 0 if proj == hidden else 2 * hidden * int(proj)
        return ModelSpec(
            **common, num_kv_heads=heads, ffn_hidden_size=_int(cfg, name, "ffn_dim"),
            # OPT's learned positions carry an offset of 2 rows
            max_seq_len=_int(cfg, name, "max_position_embeddings", default=2048),
            mlp="plain", norm="layernorm", position="learned",
            tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
            qkv_bias=bool(cfg.get("enable_bias", True)), linear_bias=bool(cfg.get("enable_bias", True)),
            extra_params=extra + 2 * hidden)
    # bert
    return ModelSpec(
        **common, num_kv_heads=heads, ffn_hidden_size=_int(cfg, name, "intermediate_size"),
        max_seq_len=_int(cfg, name, "max_position_embeddings", default=512),
        mlp="plain", norm="layernorm", position="learned", tied_embeddings=True,
        qkv_bias=True, linear_bias=True, causal=False,
        extra_params=_int(cfg, name, "type_vocab_size", default=2) * hidden + hidden * hidden + hidden)


def _guess_type(cfg: Mapping[str, Any]) -> str | None:
    if "n_embd" in cfg and "n_layer" in cfg:
        return "gpt2"
    if "d_model" in cfg and "n_layers" in cfg:
        return "mpt"
    return None


def model_from_config_file(path: Path) -> ModelSpec:
    """Read ``path`` (a ``config.json``) into a :class:`ModelSpec`, with one-line errors."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"no such model or file '{path}'") from None
    except OSError as exc:
        raise InputError(f"cannot read '{path}': {exc.strerror}") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return model_from_config(cfg, str(path))
