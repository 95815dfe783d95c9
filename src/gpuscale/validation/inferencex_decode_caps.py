"""Decode caps of InferenceX's plain (non-speculative) multi-node TensorRT-LLM recipes on
B200, B300, GB200 and GB300.

A held-out disaggregated record (``inferencex_api``) states its deployment (per stage workers,
``tp``, ``ep``, ``dp_attention``) but not the decode engines' ``max_batch_size``. A TensorRT-LLM
decode worker holds at most that many requests per attention rank; the rest wait after their
prefill, and the wait is part of TTFT (the rule ``serving_recipes._decode_cap`` applies to the
H100/H200 rows). InferenceX ran most of these recipes at 1.05-1.5 times their decode slots (e.g.
``gb300-fp8/1k1k/stp/ctx2_gen1_dep16_batch128_eplb0_mtp0_2253``: 16 ranks x 128 = 2,048 slots
for 2,253 clients), so without the cap every such record is read as one with no slot queue.

:data:`DECODE_CAPS_FILE` holds every plain Dynamo-TensorRT-LLM DeepSeek-R1 entry version of
InferenceX's configuration on those GPUs with the days it was on ``main`` and the decode
``max_batch_size`` its recipe name states (``..._batch{B}_...``; SOURCES.md there). A record is
read as an entry when GPU, framework, precision, lengths, the record's concurrency in the
entry's list, worker counts and ``tp``/``ep``/``dp_attention`` labels of both stages and the
record's run day within the entry's days on ``main`` agree, and every such entry gives one cap.
Read from the record's stated fields and day only, never from its measured latency. The rule is
the multi-node tables' one (``inferencex_multinode.recipes_decode_cap``); ``inferencex_api``
reads this table together with ``inferencex_multinode.PLAIN_RECIPES_FILE`` (the recipe files'
caps), so a name whose file states another cap gives none.

The recipe name also states the decode workers' attention DP (``dep{N}``/``dp{N}``: attention DP
over the N GPUs; ``tep{N}``/``tp{N}``: none). The configuration labelled some entries otherwise
until InferenceX #919 ("Fix nvidia-master.yaml metadata to align with recipe files",
f316a0ef6, 2026-03-23) relabelled them, e.g. ``gb200-fp4/8k1k/stp/ctx1_gen4_tep8_batch16`` was
labelled decode ``dp-attn: true``; its recipe file runs ``enable_attention_dp: false``. A
record carries the label of its day, so the decode attention DP is taken from the name, as
``serving_recipes._decode_cap`` takes the prefill's from the H200 recipes.
"""

from __future__ import annotations

import functools
from typing import Any

from gpuscale.validation.inferencex_multinode import (
    RECIPE_NAME,
    MultinodeRecipes,
    load_multinode_recipes,
    multinode_decode_cap,
)

DECODE_CAPS_FILE = "inferencex_disagg_decode_caps.csv"

__all__ = ["DECODE_CAPS_FILE", "RECIPE_NAME", "decode_cap", "default_decode_caps"]


@functools.cache
def default_decode_caps() -> tuple[dict[str, str], ...]:
    """The table in the project's data (``gpuscale.validation.DATA_DIR``), read once."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / DECODE_CAPS_FILE))


def decode_cap(
    rec: dict[str, str], caps: MultinodeRecipes | tuple[dict[str, str], ...]
) -> tuple[dict[str, Any], list[str]]:
    """``{"decode_batch": B}`` (and the recipe name's decode attention DP where #919 relabelled
    it) and notes for a plain disaggregated record whose entries all name one decode
    ``max_batch_size`` B, by the multi-node tables' one rule
    (``inferencex_multinode.recipes_decode_cap``); nothing where no entry runs it, an entry's
    recipe name states no cap, or the entries disagree."""
    cap, notes = multinode_decode_cap(rec, rec["hardware"], caps)
    return (cap, notes) if cap else ({}, [])
