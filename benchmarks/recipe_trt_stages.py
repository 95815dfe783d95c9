"""Regenerate ``data/validation/serving/inferencex_disagg_trt_stages.csv``: the context (prefill)
and generation (decode) servers' scheduler and KV-cache settings of every TensorRT-LLM srt-slurm
recipe the multi-node tables name, read over every version of the file in two forks' histories.

A TensorRT-LLM recipe states each stage's LLM-API settings apart (``backend.trtllm_config.
prefill`` and ``.decode``; srt-slurm writes each as the server's ``--extra_llm_api_options``
YAML). What the records do not carry and the engine defaults do not give: the context
servers' ``max_batch_size`` (prompts a rank schedules per iteration; TensorRT-LLM's default
2048) and ``max_num_tokens`` (the rank's token budget; default 8192), e.g. 2 prompts and 2,048
tokens on H100 1k/1k, 16 and 16,384 on GB200 1k/1k; and both stages' ``kv_cache_config.
free_gpu_memory_fraction`` (the share of the memory left after the weights the KV cache takes;
default 0.9): 0.1-0.85 on the context servers, which hold a finished prompt's KV until the
generation server pulls it, 0.6-0.9 on the generation servers.

Columns: ``recipe``; ``prefill_max_batch_size``, ``prefill_max_num_tokens``,
``prefill_kv_fraction``, ``decode_kv_fraction`` as written (empty: not stated, the default);
``versions``, ``first_day``, ``last_day``, ``first_commit``, ``last_commit``, ``repo`` as in the
prefill-chunks table
(``recipe_prefill_chunks.py``). One line per (recipe, value).

    PYTHONPATH=src python benchmarks/recipe_trt_stages.py [--mirrors /work/.mirror] [--out PATH]
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuscale.validation.inferencex_multinode import TRT_STAGES_COLUMNS, TRT_STAGES_FILE
from recipe_frontends import recipes
from recipe_prefill_chunks import generator_args, keyed_table, write_table

KEYS = ("prefill_max_batch_size", "prefill_max_num_tokens", "prefill_kv_fraction")
KEYS_DECODE = ("decode_kv_fraction",)


def _stage(cfg: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    stage = cfg.get(name)
    return stage if isinstance(stage, dict) else {}


def _fraction(stage: Mapping[str, Any]) -> str:
    kv = stage.get("kv_cache_config")
    value = kv.get("free_gpu_memory_fraction") if isinstance(kv, dict) else None
    return "" if value is None else str(value)


def stage_values(text: str) -> tuple[str, str, str, str] | None:
    """(context max_batch_size, context max_num_tokens, context and generation KV fractions) of
    a TensorRT-LLM recipe as written (empty: not stated), or None where it has no
    ``trtllm_config`` with both stages (an SGLang recipe, an aggregated one)."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return None
    backend = doc.get("backend") or (doc.get("base") or {}).get("backend") or {}
    cfg = backend.get("trtllm_config") if isinstance(backend, dict) else None
    if not isinstance(cfg, dict) or "prefill" not in cfg or "decode" not in cfg:
        return None
    pre, dec = _stage(cfg, "prefill"), _stage(cfg, "decode")

    def shown(value: Any) -> str:
        return "" if value is None else str(value)

    return (
        shown(pre.get("max_batch_size")),
        shown(pre.get("max_num_tokens")),
        _fraction(pre),
        _fraction(dec),
    )


def table(mirrors: Path, paths: list[str]) -> list[dict[str, str]]:
    """The table's lines for the TensorRT-LLM recipes among ``paths``."""
    return keyed_table(mirrors, paths, stage_values, KEYS + KEYS_DECODE)


def main() -> None:
    args = generator_args(__doc__, TRT_STAGES_FILE)
    paths = [p for p in recipes() if p.startswith("recipes/trtllm/")]
    write_table(table(args.mirrors, paths), args.out, TRT_STAGES_COLUMNS)


if __name__ == "__main__":
    main()
