"""Decode caps of InferenceX's plain (non-speculative) multi-node TensorRT-LLM recipes on
B200, B300, GB200 and GB300.

A held-out disaggregated record (``inferencex_api``) states its deployment (per stage workers,
``tp``, ``ep``, ``dp_attention``) but not the decode engines' ``max_batch_size``. A TensorRT-LLM
decode worker holds at most that many requests per attention rank; the rest wait after their
prefill, and the wait is part of TTFT (the rule ``serving_rows._decode_cap`` applies to the
H100/H200 rows). InferenceX ran most of these recipes at 1.05-1.5 times their decode slots (e.g.
``gb300-fp8/1k1k/stp/ctx2_gen1_dep16_batch128_eplb0_mtp0_2253``: 16 ranks x 128 = 2,048 slots
for 2,253 clients), so without the cap every such record is read as one with no slot queue.

:data:`DECODE_CAPS_FILE` holds every plain Dynamo-TensorRT-LLM DeepSeek-R1 entry version of
InferenceX's configuration on those GPUs with the days it was on ``main`` and the decode
``max_batch_size`` its recipe name states (``..._batch{B}_...``; SOURCES.md there). A record is
read as an entry when GPU, framework, precision, lengths, the record's concurrency in the
entry's list, worker counts and ``tp``/``ep``/``dp_attention`` labels of both stages and the
record's run day within the entry's days on ``main`` agree, and every such entry gives one cap.
Read from the record's stated fields and day only, never from its measured latency.

The recipe name also states the decode workers' attention DP (``dep{N}``/``dp{N}``: attention DP
over the N GPUs; ``tep{N}``/``tp{N}``: none). The configuration labelled some entries otherwise
until InferenceX #919 ("Fix nvidia-master.yaml metadata to align with recipe files",
f316a0ef6, 2026-03-23) relabelled them, e.g. ``gb200-fp4/8k1k/stp/ctx1_gen4_tep8_batch16`` was
labelled decode ``dp-attn: true``; its recipe file runs ``enable_attention_dp: false``. A
record carries the label of its day, so the decode attention DP is taken from the name, as
``serving_rows._decode_cap`` takes the prefill's from the H200 recipes.
"""

from __future__ import annotations

import csv
import functools
import re
from pathlib import Path
from typing import Any

DECODE_CAPS_FILE = "inferencex_disagg_decode_caps.csv"

DecodeCaps = list[dict[str, str]]

RECIPE_NAME = re.compile(r"ctx(\d+)_gen(\d+)_(dep|tep|dp|tp)(\d+)_batch(\d+)_")
"""srt-slurm's TensorRT-LLM recipe names: prefill workers, decode workers, the decode worker's
kind and GPUs (``dep``/``dp``: attention DP; ``tep``/``tp``: attention TP) and its
``max_batch_size``."""

STAGE_FIELDS = ("workers", "tp", "ep", "dp_attn")
"""Per-stage columns of the table; the record's are ``{stage}_num_workers``, ``{stage}_tp``,
``{stage}_ep`` and ``{stage}_dp_attention``."""


def load_decode_caps(path: Path) -> DecodeCaps:
    with path.open() as f:
        return list(csv.DictReader(f))


@functools.cache
def default_decode_caps() -> tuple[dict[str, str], ...]:
    """The table in the project's data (``gpuscale.validation.DATA_DIR``), read once."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_decode_caps(DATA_DIR / "serving" / DECODE_CAPS_FILE))


def _runs(line: dict[str, str], rec: dict[str, str]) -> bool:
    """Whether entry version ``line`` runs record ``rec`` on the record's day."""
    return (
        (line["system"], line["framework"], line["precision"], line["isl"], line["osl"])
        == (rec["hardware"], rec["framework"], rec["precision"], rec["isl"], rec["osl"])
        and rec["conc"] in line["concurrencies"].split()
        and all(
            tuple(line[f"{s}_{f}"] for f in STAGE_FIELDS)
            == (
                rec[f"{s}_num_workers"],
                rec[f"{s}_tp"],
                rec[f"{s}_ep"],
                rec[f"{s}_dp_attention"],
            )
            for s in ("prefill", "decode")
        )
        and line["from_day"] <= rec["date"] <= line["to_day"]
    )


def decode_cap(
    rec: dict[str, str], caps: DecodeCaps | tuple[dict[str, str], ...]
) -> tuple[dict[str, Any], list[str]]:
    """``{"decode_batch": B}`` and a note for a plain disaggregated record whose entries all
    name one decode ``max_batch_size`` B; nothing where no entry runs it, an entry's recipe
    name states no cap, or the entries disagree."""
    if rec.get("spec_method", "none") not in ("", "none"):
        return {}, []
    hits = [line for line in caps if _runs(line, rec)]
    batches = {line["decode_max_batch"] for line in hits}
    if len(batches) != 1 or "" in batches:
        return {}, []
    (b,) = batches
    names = sorted({line["recipe"].rsplit("/", 1)[-1] for line in hits})
    out: dict[str, Any] = {"decode_batch": int(b)}
    notes = [f"decode max_batch_size {b} from {', '.join(names)} ({DECODE_CAPS_FILE})"]
    kinds = {m.group(3) in ("dep", "dp") for n in names if (m := RECIPE_NAME.search(n))}
    if len(kinds) == 1 and kinds != {rec["decode_dp_attention"] == "true"}:
        adp = kinds.pop()
        out["decode_attention_dp"] = int(rec["decode_tp"]) if adp else 1
        notes.append(
            f"decode attention DP {out['decode_attention_dp']} (the recipe's name), not the "
            f"record's dp_attention {rec['decode_dp_attention']} (InferenceX #919 relabelled it)"
        )
    return out, notes
