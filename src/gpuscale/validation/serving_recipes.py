"""Disaggregated rows read against InferenceX's configuration (:data:`RECIPES_FILE`): the entries
at a row's engine, system, lengths and concurrency, the deployment of a row that leaves its
worker counts empty (the ``recipe`` class of ``serving_rows``), and what the launched recipe sets
that the row does not carry (the decode batch cap, the prefill attention DP)."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from gpuscale.validation.serving_fields import (
    INFERENCEX_EXPORTS,
    _int,
    sa_bench,
)

RECIPES_FILE = "inferencex_disagg_recipes.csv"
"""The deployments InferenceX's configuration ran for DeepSeek-R1 FP8 disaggregated on H100/H200
(SOURCES.md there): one line per search-space entry of ``.github/configs/nvidia-master.yaml`` at
the commit in effect when the rows were measured, with the srt-slurm recipe it launches, its
speculative decoding (``none`` or ``mtp``), its worker counts, the entry's ``tp``/``ep`` labels
and attention-DP widths per stage, the decode engines' running cap per attention rank
(TensorRT-LLM ``max_batch_size``; SGLang ``max-running-requests`` / ``dp-size``, where the recipe
file was read) and the draft count of an MTP recipe (TensorRT-LLM ``_mtpN``; SGLang
``speculative-num-steps``, where read)."""


Recipes = list[dict[str, str]]


def load_recipes(path: Path) -> Recipes:
    with path.open() as f:
        return list(csv.DictReader(f))


def _candidates(r: dict[str, str], conc: int, recipes: Recipes) -> Recipes:
    """The configuration's entries at the row's engine, system, lengths and concurrency."""
    return [
        e
        for e in recipes
        if (e["backend"], e["system"], e["isl"], e["osl"], int(e["concurrency"]))
        == (r["backend"], r["system"], r["isl"], r["osl"], conc)
    ]


EXPORT_FIELDS = {
    "prefill_tp": ("prefill_tp_size", "prefill_tp"),
    "prefill_ep": ("prefill_moe_ep_size", "prefill_ep"),
    "decode_tp": ("decode_tp_size", "decode_tp"),
    "decode_ep": ("decode_moe_ep_size", "decode_ep"),
    "decode_attention_dp": ("decode_attention_dp_size", "decode_attention_dp"),
}
"""Parallelism fields of a disaggregated InferenceX export row, and the recipe column each would
state: field -> (export column, recipe column)."""


EXPORT_RELIABLE = ("prefill_tp", "prefill_ep")
"""The export fields that agree with the deployment on every row whose deployment is known
independently of them (:func:`export_field_agreement`, the ``twin`` rows, whose deployment is
the database row's): the export writes the entry's prefill ``tp`` and ``ep`` labels, and
copies them into the decode columns with attention DP 1. So a DEP decode (``dp-attn: true``) is
exported as attention DP 1, and H200 SGLang ``bs128-1p1d-dep`` (prefill ``ep: 1``, decode
``ep: 8``) as decode EP 1: only the prefill fields may filter the configuration's entries."""


def _export_candidates(r: dict[str, str], conc: int, recipes: Recipes) -> Recipes:
    """:func:`_candidates` whose prefill ``tp``/``ep`` labels are the export row's
    (:data:`EXPORT_RELIABLE`): e.g. H200 SGLang 1k/1k at concurrency 512 exported with prefill
    EP 8 is ``bs256-1p6d-dep`` (or its MTP twin), never ``bs256-1p6d-tp`` (prefill ``ep: 1``)."""
    return [
        e
        for e in _candidates(r, conc, recipes)
        if all(_int(r[EXPORT_FIELDS[f][0]]) == int(e[EXPORT_FIELDS[f][1]]) for f in EXPORT_RELIABLE)
    ]


def _decode_cap(
    r: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes
) -> tuple[dict[str, Any], list[str]]:
    """What the recipe the run launched sets and the row does not carry, or carries wrong.

    - The decode engine's ``max_batch_size`` (per attention rank). A TensorRT-LLM decode worker
      admits at most that many requests per rank; the rest wait in its queue after their
      prefill, so the wait is part of TTFT. The rows do not carry it (``decode_batch_size`` is
      AIConfigurator's concurrency / workers): e.g. H100 ``ctx1_gen3_tep16_batch2`` runs
      concurrency 9 on 3 decode workers with ``max_batch_size: 2``.
    - The prefill worker's attention-DP width (``enable_attention_dp`` in the recipe). The
      rows of InferenceX's workflow run 288 (2026-02-14) carry the configuration's labels of
      that date, which InferenceX corrected to the recipe files on 2026-03-23 (#919, "Fix
      nvidia-master.yaml metadata to align with recipe files", f316a0ef6): e.g. config 303
      states a TP prefill for ``c4_ctx1_gen9_tep8_batch256``, whose prefill runs
      ``enable_attention_dp: true``; config 590 (run 333) is the same recipe, labelled DP 8.

    The entry must be non-speculative and state the row's worker counts and decode
    attention-DP width."""
    if r["backend"] != "trtllm" or not sa_bench(r):
        return {}, []
    hits = {
        e["recipe"]: e
        for e in _candidates(r, conc, recipes)
        if e["spec"] == "none"
        and e["decode_max_batch"]
        and (int(e["prefill_workers"]), int(e["decode_workers"]), int(e["decode_attention_dp"]))
        == (kw["prefill_workers"], kw["decode_workers"], kw["decode_attention_dp"])
    }
    if len(hits) != 1:
        return {}, []
    (hit,) = hits.values()
    out: dict[str, Any] = {"decode_batch": int(hit["decode_max_batch"])}
    notes = [f"decode max_batch_size {hit['decode_max_batch']} from {hit['recipe']}"]
    dp, dp_notes = recipe_prefill_dp([hit], kw)
    return {**out, **dp}, [*notes, *dp_notes]


def recipe_prefill_dp(entries: Recipes, kw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The prefill worker's attention-DP width the launched recipe sets
    (``enable_attention_dp``, the entries' ``prefill_attention_dp`` at the corrected
    configuration) where it is not the row's: the rows of InferenceX's workflow run 288
    (2026-02-14) carry the configuration's labels of that date, which InferenceX corrected to
    the recipe files on 2026-03-23 (#919, f316a0ef6), e.g. H200 TensorRT-LLM 8k/1k
    ``c512_ctx3_gen1_dep8_batch64_eplb0_mtp1`` labelled DP 8 for a context server with
    ``enable_attention_dp: false``. ``entries``: the configuration entries the row ran, which
    must agree."""
    widths = {int(e["prefill_attention_dp"]) for e in entries}
    if len(widths) != 1:
        return {}, []
    (dp,) = widths
    if dp == kw["prefill_attention_dp"] or kw["prefill_tp"] % dp:
        return {}, []
    note = (
        f"prefill attention DP {dp} (recipe's enable_attention_dp), not the row's "
        f"{kw['prefill_attention_dp']} (InferenceX #919 relabelled it to the recipe)"
    )
    return {"prefill_attention_dp": dp}, [note]


def _from_config(
    r: dict[str, str], conc: int, recipes: Recipes
) -> tuple[dict[str, Any], list[str], str]:
    """A row without worker counts read from the InferenceX configuration: (keyword arguments,
    assumptions, reason it stays not expressible).

    The candidates are the entries at the row's engine, system, lengths and concurrency whose
    prefill ``tp``/``ep`` labels are the export's (:data:`EXPORT_RELIABLE`). One candidate is the
    deployment, with its per-stage parallelism from the entry (the export's decode columns copy
    the prefill's, :data:`EXPORT_RELIABLE`). Where a plain and an MTP entry share the key nothing
    else in the row tells them apart: both are in one sweep of one commit (same ``measured=``
    stamp, one ``image`` per configuration key), and the export carries neither
    ``spec_method`` nor the workers; such rows stay not expressible."""
    if not r["silicon_data_source"].startswith(INFERENCEX_EXPORTS):
        return {}, [], ""
    cands = {e["recipe"]: e for e in _export_candidates(r, conc, recipes)}
    commits = ", ".join(
        sorted(
            {
                e["inferencex_commit"]
                for e in recipes
                if e["backend"] == r["backend"] and e["system"] == r["system"]
            }
        )
    )
    where = f"InferenceX nvidia-master.yaml at {commits or 'the run date'}"
    if not cands:
        return {}, [], f"no entry of {where} runs this concurrency at these lengths"
    names = ", ".join(sorted(n.rsplit("/", 1)[-1] for n in cands))
    if len(cands) > 1:
        specs = sorted({e["spec"] for e in cands.values()})
        why = (
            "a plain and an MTP recipe at one key: the export drops spec_method, and image, "
            "date and workflow are the same for both"
            if specs == ["mtp", "none"]
            else "the export drops the worker counts that would say which"
        )
        return (
            {},
            [],
            (
                f"{len(cands)} deployments of {where} run this concurrency with the row's "
                f"prefill TP/EP ({names}); {why}"
            ),
        )
    (e,) = cands.values()
    drafts = entry_draft_tokens(e)
    if e["spec"] == "mtp" and drafts is None:
        return (
            {},
            [],
            (
                f"speculative decoding (MTP): the only entry of {where} at this concurrency is "
                f"the MTP recipe {names}, whose draft count is not on file (recipe file not read)"
            ),
        )
    kw: dict[str, Any] = {
        "prefill_workers": int(e["prefill_workers"]),
        "prefill_tp": int(e["prefill_tp"]),
        "prefill_ep": int(e["prefill_ep"]),
        "prefill_attention_dp": int(e["prefill_attention_dp"]),
        "decode_workers": int(e["decode_workers"]),
        "decode_tp": int(e["decode_tp"]),
        "decode_ep": int(e["decode_ep"]),
        "decode_attention_dp": int(e["decode_attention_dp"]),
    }
    if e["decode_max_batch"]:
        kw["decode_batch"] = int(e["decode_max_batch"])
    if drafts is not None:
        kw.update(speculative="mtp", draft_tokens=drafts)
    what = f"MTP, {drafts} draft tokens" if drafts is not None else "non-speculative"
    note = (
        f"worker counts empty; the one entry of {where} at this concurrency, lengths and "
        f"prefill TP/EP is {e['recipe']} ({what}): its workers, per-stage parallelism and "
        "decode batch"
    )
    return kw, [note], ""


def recipe_draft_tokens(recipe: str) -> int | None:
    """Draft tokens of an srt-slurm TensorRT-LLM recipe, from its name's ``_mtpN`` (the recipes
    set ``speculative_config: num_nextn_predict_layers: N``; ``mtp0`` is the plain one), or
    None where the name does not say (the SGLang recipes)."""
    hit = re.search(r"_mtp(\d+)\.yaml$", recipe)
    return int(hit.group(1)) if hit and int(hit.group(1)) > 0 else None


def disagg_recipe_entries(
    r: dict[str, str], conc: int, kw: dict[str, Any], recipes: Recipes
) -> Recipes:
    """The recipes-table entries that run disaggregated row ``r`` as read (``kw``): its engine,
    system, lengths and concurrency (:func:`_candidates`), worker counts, per-stage TP and EP,
    decode attention-DP width and speculative decoding (``mtp`` when ``kw`` runs it)."""
    spec = "mtp" if kw.get("speculative") == "mtp" else "none"
    fields = (
        "prefill_workers", "prefill_tp", "prefill_ep", "decode_workers", "decode_tp",
        "decode_ep", "decode_attention_dp",
    )  # fmt: skip
    return [
        e
        for e in _candidates(r, conc, recipes)
        if e["spec"] == spec and all(k in kw and int(e[k]) == kw[k] for k in fields)
    ]


def entry_draft_tokens(e: dict[str, str]) -> int | None:
    """Draft tokens of an MTP entry (``draft_tokens`` in the recipes table), None for a plain
    entry or an MTP one whose recipe file was not read. TensorRT-LLM: the name's ``_mtpN``
    (:func:`recipe_draft_tokens`). SGLang: the recipe's ``speculative-num-steps`` (EAGLE with
    ``speculative-eagle-topk: 1`` and ``speculative-num-draft-tokens`` = steps + 1: a chain of
    that many draft tokens, verified with the next token in one step)."""
    if e["spec"] != "mtp" or not e.get("draft_tokens"):
        return None
    return int(e["draft_tokens"])
