"""The tables an InferenceX record is read with (``inferencex_api.read_record``), bundled in one
value and loaded once from the project's data (:func:`load_tables`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuscale.validation.client_tokenizer import (
    CLIENT_TOKENS_FILE,
    ServerPrompts,
    load_server_prompts,
)
from gpuscale.validation.inferencex_memory import MEM_FRACTIONS_FILE, Fractions, load_fractions
from gpuscale.validation.inferencex_multinode import (
    FRONTENDS_FILE,
    MTP_RECIPES_FILE,
    PLAIN_RECIPES_FILE,
    PREFILL_CHUNKS_FILE,
    SGLANG_STAGES_FILE,
    TRT_STAGES_FILE,
    MultinodeRecipes,
    PrefillChunks,
    load_multinode_recipes,
)
from gpuscale.validation.inferencex_sweeps import (
    SCRIPTS_FILE,
    SWEEPS_FILE,
    Scripts,
    Sweeps,
    load_scripts,
    load_sweeps,
)
from gpuscale.validation.serving_recipes import RECIPES_FILE, Recipes, load_recipes


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceXTables:
    """What ``inferencex_api.read_record`` reads a record against, each table as its loader
    returns it. None: no such table (the record is read without it), except ``plain_recipes``,
    where None reads the project's table (``inferencex_multinode.default_plain_recipes``) and
    ``[]`` none; likewise ``server_prompts``, ``prefill_chunks``, ``frontends``,
    ``trt_stages`` and ``sglang_stages``."""

    recipes: Recipes | None = None
    """H100/H200 disaggregated recipes (``serving_recipes.load_recipes``)."""
    sweeps: Sweeps | None = None
    """Aggregated sweeps that ran MTP entries (``inferencex_sweeps.load_sweeps``)."""
    scripts: Scripts | None = None
    """Draft counts of aggregated MTP scripts (``inferencex_sweeps.load_scripts``)."""
    mtp_recipes: MultinodeRecipes | None = None
    """Multi-node MTP recipes (``inferencex_multinode.load_multinode_recipes`` of
    ``MTP_RECIPES_FILE``)."""
    fractions: Fractions | None = None
    """SGLang ``--mem-fraction-static`` of the launches (``inferencex_memory.load_fractions``)."""
    plain_recipes: MultinodeRecipes | None = None
    """Multi-node non-MTP recipes (``PLAIN_RECIPES_FILE``)."""
    server_prompts: ServerPrompts | None = None
    """Prompt lengths the server counted where the client's tokenizer differed
    (``client_tokenizer.load_server_prompts``; None: the project's)."""
    prefill_chunks: PrefillChunks | None = None
    """The srt-slurm SGLang recipes' prefill-stage ``chunked-prefill-size`` and
    ``max-prefill-tokens`` (``PREFILL_CHUNKS_FILE``; None: the project's, ``[]``: none)."""
    frontends: PrefillChunks | None = None
    """The Dynamo frontends each srt-slurm recipe starts (``FRONTENDS_FILE``; None: the
    project's, ``[]``: none)."""
    trt_stages: PrefillChunks | None = None
    """The TensorRT-LLM recipes' context and generation server settings (``TRT_STAGES_FILE``;
    None: the project's, ``[]``: none)."""
    sglang_stages: PrefillChunks | None = None
    """The SGLang recipes' per-stage kernel switches and KV-cache dtype (``SGLANG_STAGES_FILE``;
    None: the project's, ``[]``: none)."""


NO_TABLES = InferenceXTables()
"""A record read without any table (the project's plain recipes still apply)."""


def load_tables(directory: Path) -> InferenceXTables:
    """Every table of ``directory`` (the project's: ``gpuscale.validation.DATA_DIR / "serving"``)."""
    return InferenceXTables(
        recipes=load_recipes(directory / RECIPES_FILE),
        sweeps=load_sweeps(directory / SWEEPS_FILE),
        scripts=load_scripts(directory / SCRIPTS_FILE),
        mtp_recipes=load_multinode_recipes(directory / MTP_RECIPES_FILE),
        fractions=load_fractions(directory / MEM_FRACTIONS_FILE),
        plain_recipes=load_multinode_recipes(directory / PLAIN_RECIPES_FILE),
        server_prompts=load_server_prompts(directory / CLIENT_TOKENS_FILE),
        prefill_chunks=load_multinode_recipes(directory / PREFILL_CHUNKS_FILE),
        frontends=load_multinode_recipes(directory / FRONTENDS_FILE),
        trt_stages=load_multinode_recipes(directory / TRT_STAGES_FILE),
        sglang_stages=load_multinode_recipes(directory / SGLANG_STAGES_FILE),
    )
