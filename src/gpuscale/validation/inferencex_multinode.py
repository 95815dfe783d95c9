"""MTP draft counts and decode caps of InferenceX's multi-node (disaggregated) DeepSeek-R1 recipes.

A held-out record (``inferencex_api``) states ``spec_method: mtp`` and its deployment (per stage
``tp``, ``ep``, ``dp_attention`` and worker counts), not the draft count. InferenceX's
configuration (``.github/configs/nvidia-master.yaml`` / ``amd-master.yaml``) lists, per
configuration key, the search-space entries the workflow ran: lengths, a concurrency list and
per-stage labels, each launching a recipe (an srt-slurm ``CONFIG_FILE``, or a
``DECODE_MTP_SIZE`` setting of InferenceX's own or Dynamo's launch scripts) that sets the draft
count. :data:`MTP_RECIPES_FILE` holds every MTP entry version with the days it was on ``main``
and the draft count read from what it launches (SOURCES.md there).

A record is read as an entry when the identifying fields agree: GPU, framework, precision,
lengths, the record's concurrency in the entry's ``conc-list`` or among the concurrencies
what it launches runs (``run_concurrencies``: the srt-slurm recipe's ``benchmark.concurrencies``,
which sa-bench runs and which the H200 TensorRT-LLM recipes state as ``conc-list`` x decode
workers; Dynamo's ``bench.sh``'s ``conc-list`` x decode workers), worker counts and
``tp``/``ep``/``dp_attention`` labels of both stages, and the record's run day within the
entry's days on ``main``. Every matching entry must give one draft count; entries that
disagree, or whose recipe was not read, leave the record not expressible with the reason. Where
the matching entries state one decode cap per attention rank (``decode_max_batch``), it is
applied as ``decode_batch``, as for the H100/H200 recipes. Read from the record's stated fields
and day only, never from its measured latency.

:data:`PLAIN_RECIPES_FILE` holds the non-MTP (``spec-decoding: none``) entry versions the same
way, with the decode cap per attention rank read from what each launches (TensorRT-LLM
``max_batch_size`` of the decode worker, SGLang ``max-running-requests`` / ``dp-size``), over
every version of an srt-slurm recipe file in the public forks' histories: one line per distinct
cap, so a record that versions with different caps match gets none.
:func:`multinode_decode_cap` reads a non-MTP record's cap by the same match rule; the matching
entries must state one cap, else none is applied and a note says why (the record stays
expressible as without the table).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

MTP_RECIPES_FILE = "inferencex_disagg_mtp_recipes.csv"
PLAIN_RECIPES_FILE = "inferencex_disagg_plain_recipes.csv"

MultinodeRecipes = list[dict[str, str]]
MtpRecipes = MultinodeRecipes

STAGE_FIELDS = ("workers", "tp", "ep", "dp_attn")
"""Per-stage columns of the table; the record's are ``{stage}_num_workers``, ``{stage}_tp``,
``{stage}_ep`` and ``{stage}_dp_attention``."""


def load_multinode_recipes(path: Path) -> MultinodeRecipes:
    """Either table (:data:`MTP_RECIPES_FILE`, :data:`PLAIN_RECIPES_FILE`): one dict per line."""
    with path.open() as f:
        return list(csv.DictReader(f))


load_mtp_recipes = load_multinode_recipes


def _record_stage(rec: dict[str, str], stage: str) -> tuple[str, ...]:
    return (
        rec[f"{stage}_num_workers"],
        rec[f"{stage}_tp"],
        rec[f"{stage}_ep"],
        rec[f"{stage}_dp_attention"],
    )


def _line_stage(line: dict[str, str], stage: str) -> tuple[str, ...]:
    return tuple(line[f"{stage}_{f}"] for f in STAGE_FIELDS)


def _runs(line: dict[str, str], rec: dict[str, str], system: str) -> bool:
    """Whether entry version ``line`` runs record ``rec`` (on ``system``, ``serving_rows``'
    GPU name) on its day."""
    return (
        (line["system"], line["framework"], line["precision"])
        == (system, rec["framework"], rec["precision"])
        and (line["isl"], line["osl"]) == (rec["isl"], rec["osl"])
        and rec["conc"] in (line["concurrencies"] + " " + line["run_concurrencies"]).split()
        and all(_line_stage(line, s) == _record_stage(rec, s) for s in ("prefill", "decode"))
        and line["from_day"] <= rec["date"] <= line["to_day"]
    )


def multinode_draft_tokens(
    rec: dict[str, str], system: str, lines: MtpRecipes
) -> tuple[dict[str, Any], str, str]:
    """Draft tokens (and decode cap, where stated) of disaggregated MTP record ``rec``: (keyword
    arguments to add, the note naming the recipe, or the reason it stays not expressible). Nothing at all when the table
    has no line for the record's GPU, framework and precision (the caller's general reason
    applies)."""
    if not any(
        (ln["system"], ln["framework"], ln["precision"])
        == (system, rec["framework"], rec["precision"])
        for ln in lines
    ):
        return {}, "", ""
    hits = [ln for ln in lines if _runs(ln, rec, system)]
    if not hits:
        return (
            {},
            "",
            "not expressible: MTP, and no MTP entry of InferenceX's configuration on the record's "
            "day runs its lengths and concurrency with its worker counts and per-stage labels "
            f"({MTP_RECIPES_FILE})",
        )
    unread = sorted({ln["draft_source"] for ln in hits if not ln["draft_tokens"]})
    if unread:
        return (
            {},
            "",
            f"not expressible: MTP draft count of the matching entry not read ({'; '.join(unread)})",
        )
    counts = sorted({int(ln["draft_tokens"]) for ln in hits})
    recipes = ", ".join(sorted({f"{ln['recipe']}@{ln['config_commit']}" for ln in hits}))
    if len(counts) > 1:
        return (
            {},
            "",
            "not expressible: MTP entries of InferenceX's configuration in force on the record's "
            f"day match its deployment with different draft counts ({', '.join(map(str, counts))})",
        )
    (n,) = counts
    out: dict[str, Any] = {"speculative": "mtp", "draft_tokens": n}
    note = f"MTP, {n} draft tokens ({recipes}; {MTP_RECIPES_FILE})"
    caps = {ln["decode_max_batch"] for ln in hits}
    if len(caps) == 1 and (cap := caps.pop()):
        # The decode engine admits at most this many requests per attention rank; the rest
        # wait after their prefill, inside TTFT (as serving_rows._decode_cap reads the H100/H200
        # recipes: TensorRT-LLM max_batch_size, SGLang max-running-requests / dp-size).
        out["decode_batch"] = int(cap)
        note += f"; decode cap {cap} per attention rank"
    return out, note, ""


def multinode_decode_cap(
    rec: dict[str, str], system: str, lines: MultinodeRecipes
) -> tuple[dict[str, Any], str]:
    """Decode cap per attention rank of non-MTP disaggregated record ``rec`` (on ``system``,
    ``serving_rows``' GPU name) from the entries of :data:`PLAIN_RECIPES_FILE` that ran it:
    (``{"decode_batch": cap}`` or nothing, the note naming the recipe or why no cap applies).
    No note where no entry matches; a record without a cap is read as without the table."""
    hits = [ln for ln in lines if _runs(ln, rec, system)]
    if not hits:
        return {}, ""
    unread = sorted({ln["cap_source"] for ln in hits if not ln["decode_max_batch"]})
    if unread:
        return {}, f"no decode cap: a matching entry's cap is not on file ({'; '.join(unread)})"
    caps = sorted({int(ln["decode_max_batch"]) for ln in hits})
    recipes = ", ".join(sorted({f"{ln['recipe']}@{ln['config_commit']}" for ln in hits}))
    if len(caps) > 1:
        return (
            {},
            "no decode cap: the entries of InferenceX's configuration (or versions of their "
            "recipe) that match the record on its day state different caps "
            f"({', '.join(map(str, caps))}: {recipes})",
        )
    (cap,) = caps
    # The decode engine admits at most this many requests per attention rank; the rest wait
    # after their prefill, inside TTFT (as for the MTP entries above and serving_rows._decode_cap).
    return (
        {"decode_batch": cap},
        f"decode cap {cap} per attention rank ({recipes}; {PLAIN_RECIPES_FILE})",
    )
