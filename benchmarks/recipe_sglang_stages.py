"""Regenerate ``data/validation/serving/inferencex_disagg_sglang_stages.csv``: what each SGLang
srt-slurm recipe the multi-node tables name states per worker stage about the kernel of its dense
block-FP8 linear layers and its KV-cache dtype, read over every version of the file in two forks'
histories.

SGLang runs a DeepSeek checkpoint's block-FP8 attention projections, shared experts and dense
MLPs with DeepGEMM unless the launch says otherwise: ``--fp8-gemm-backend`` (from 0.5.8), the
environment variable ``SGLANG_ENABLE_FLASHINFER_GEMM`` (``SGLANG_ENABLE_FLASHINFER_FP8_GEMM`` in
0.5.6-0.5.9's own spelling), or DeepGEMM turned off (``SGLANG_ENABLE_JIT_DEEPGEMM=false``; the
engine then picks another kernel by its version's rule, ``inferencex_multinode.recipes_fp8_gemm``).
Its KV cache keeps the model dtype unless ``--kv-cache-dtype`` says otherwise
(``inferencex_multinode.recipes_kv_dtype``). A recipe states each worker stage's environment
apart (``backend.prefill_environment``, ``backend.decode_environment``) and its flags under
``backend.sglang_config.prefill`` / ``.decode`` (``base.backend...`` and ``override_*`` sections
in the sweep layout). Columns: ``recipe``; per stage (``prefill_``, ``decode_``)
``jit_deepgemm`` (SGLANG_ENABLE_JIT_DEEPGEMM as written, empty: not stated, on),
``flashinfer_gemm`` (either FlashInfer variable as written) and ``fp8_gemm_backend`` (the flag);
``prefill_kv_cache_dtype`` and ``decode_kv_cache_dtype`` (the flag; empty: ``auto``); then
``versions``, ``first_day``, ``last_day``, ``first_commit``, ``last_commit``, ``repo`` as in the
prefill-chunks table (``recipe_prefill_chunks.py``). One line per (recipe, value); recipes
without both stages (aggregated) are left out.

    PYTHONPATH=src python benchmarks/recipe_sglang_stages.py [--mirrors /work/.mirror] [--out PATH]
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuscale.validation.inferencex_multinode import (
    SGLANG_STAGES_COLUMNS,
    SGLANG_STAGES_FIELDS,
    SGLANG_STAGES_FILE,
)
from recipe_prefill_chunks import generator_args, keyed_table, sglang_recipes, write_table

STAGES = ("prefill", "decode")
DEEPGEMM_ENV = ("SGLANG_ENABLE_JIT_DEEPGEMM", "SGL_ENABLE_JIT_DEEPGEMM")
"""SGLang's DeepGEMM switch, in its current and its legacy spelling (``environ.py``
``_convert_SGL_to_SGLANG`` renames ``SGL_*`` to ``SGLANG_*``)."""
FLASHINFER_ENV = ("SGLANG_ENABLE_FLASHINFER_GEMM", "SGLANG_ENABLE_FLASHINFER_FP8_GEMM")
"""The FlashInfer FP8 GEMM switch in both spellings (0.5.6 copies the first into the second)."""
FLAG = ("fp8-gemm-backend", "fp8_gemm_backend")
KV_DTYPE = ("kv-cache-dtype", "kv_cache_dtype")


def _sections(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The recipe's ``backend`` mappings: the plain layout's, then the sweep layout's ``base``
    and each override section's, later ones overriding earlier ones."""
    out = []
    for sec in [doc] + [v for k, v in doc.items() if k == "base" or "override" in k]:
        backend = (sec or {}).get("backend") if isinstance(sec, dict) else None
        if isinstance(backend, dict):
            out.append(backend)
    return out


def _first(mapping: Mapping[str, Any], names: tuple[str, ...]) -> str:
    """The first of ``names`` stated, as written; a sweep's list space-separated (the reader
    takes no reading from a list: ``inferencex_multinode.fp8_gemm_of_stage``)."""
    for name in names:
        if name in mapping and mapping[name] is not None:
            value = mapping[name]
            values = value if isinstance(value, list) else [value]
            return " ".join(str(v).strip() for v in values)
    return ""


def stage_values(text: str) -> tuple[str, ...] | None:
    """(jit_deepgemm, flashinfer_gemm, fp8_gemm_backend) of the prefill stage, then of the
    decode stage, then each stage's kv-cache-dtype, as written (empty: not stated); None where
    the recipe has no SGLang prefill and decode stages (an aggregated recipe, a TensorRT-LLM
    one)."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return None
    sections = _sections(doc)
    got = {stage: ["", "", "", ""] for stage in STAGES}
    seen = set()
    for backend in sections:
        cfg = backend.get("sglang_config")
        for stage in STAGES:
            env = backend.get(f"{stage}_environment")
            if isinstance(env, dict):
                for i, names in enumerate((DEEPGEMM_ENV, FLASHINFER_ENV)):
                    if value := _first(env, names):
                        got[stage][i] = value
            flags = cfg.get(stage) if isinstance(cfg, dict) else None
            if isinstance(flags, dict):
                seen.add(stage)
                if value := _first(flags, FLAG):
                    got[stage][2] = value
                if value := _first(flags, KV_DTYPE):
                    got[stage][3] = value
    if seen != set(STAGES):
        return None
    pre, dec = got["prefill"], got["decode"]
    return (*pre[:3], *dec[:3], pre[3], dec[3])


def table(mirrors: Path, paths: list[str]) -> list[dict[str, str]]:
    """The table's lines for ``paths`` read from the forks under ``mirrors``."""
    return keyed_table(mirrors, paths, stage_values, SGLANG_STAGES_FIELDS)


def main() -> None:
    args = generator_args(__doc__, SGLANG_STAGES_FILE)
    write_table(table(args.mirrors, sglang_recipes()), args.out, SGLANG_STAGES_COLUMNS)


if __name__ == "__main__":
    main()
