"""Speculative decoding of InferenceX's aggregated runs, read from what each run swept.

InferenceX's exports drop the config's ``spec-decoding`` field, and until 2026-01-15 its
single-node result files were not even keyed by it (InferenceX #438 / #439, "hash single-node
file output on spec decoding value"). Its workflow measures the search-space entries of the
``config-keys`` that the merged commit's ``perf-changelog.yaml`` entry names, and a row's
``measured=`` stamp is that commit's merge time plus a few seconds (SOURCES.md). So the run that
measured a row, and with it the speculative decoding the row ran, can be read from the commit:

- 2026-01-14T22:26:21Z is bf3456727 (#392, "Add MTP Benchmark Support for DeepSeek-R1 TRT",
  merged 22:26:18Z), whose changelog names only ``dsr1-fp{4,8}-b200-trt-mtp`` and
  ``dsr1-fp8-h200-trt-mtp``: the H200 TensorRT-LLM DeepSeek-R1 rows of that day ran
  ``dsr1_fp8_h200_trt_mtp_slurm.sh`` (``speculative_config: decoding_type: MTP,
  num_nextn_predict_layers: 3``, 1 with attention DP);
- 2026-01-28T06:18:44Z is e28c038f8 (#587), whose changelog entry names both
  ``dsr1-fp8-h200-trt`` and ``dsr1-fp8-h200-trt-mtp`` with ``evals-only: true``
  (``utils/process_changelog.py``: ``--evals-only``), which keeps only the entries
  ``mark_eval_entries`` selects (``utils/matrix_logic/generate_sweep_configs.py``): 1k/8k only,
  per (model, runner, framework, precision, spec-decoding) the highest concurrency at the
  highest and at the lowest TP, i.e. non-speculative TP8 EP8 at 64 and MTP TP8 EP8 attention-DP
  at 256.

``inferencex_agg_sweeps.csv`` holds the entries those two runs measured for H200 TensorRT-LLM
DeepSeek-R1 (copied from ``.github/configs/nvidia-master.yaml`` at each commit); earlier
aggregated runs of that model (2025-11-02, 2025-12-15) predate the MTP entry. Such rows are
read as MTP deployments (``speculative="mtp"`` with the script's draft count,
:data:`MTP_DRAFT_TOKENS`, and its token budget, :func:`mtp_max_num_tokens`); read from the row's
source, day and shape only, never from its measured latency."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

SWEEPS_FILE = "inferencex_agg_sweeps.csv"
MTP_DRAFT_TOKENS = {False: 3, True: 1}
"""Draft tokens by attention DP: ``dsr1_fp8_h200_trt_mtp_slurm.sh`` (SemiAnalysisAI/InferenceX,
at 40be3a4b7) sets ``MTP=1`` when ``DP_ATTENTION`` is true, else ``MTP=3``, and launches
``speculative_config: {decoding_type: MTP, num_nextn_predict_layers: $MTP}`` (strict
acceptance: no ``use_relaxed_acceptance_for_thinking``)."""
MTP_MAX_ISL_RATIO = 1.8
"""The same script sizes ``--max_num_tokens=$(( ((MTP+1)*MAX_BATCH_SIZE+MAX_ISL+64+63)/64*64
))`` with ``MAX_ISL = ISL * (1 + RANDOM_RANGE_RATIO)`` (0.8, rounded) and ``MAX_BATCH_SIZE =
CONC / TP`` with attention DP, else ``CONC`` (at least 1)."""


def mtp_max_num_tokens(isl: int, concurrency: int, tp: int, attention_dp: bool) -> int:
    """TensorRT-LLM's ``max_num_tokens`` of an InferenceX MTP launch (:data:`MTP_MAX_ISL_RATIO`)."""
    drafts = MTP_DRAFT_TOKENS[attention_dp]
    batch = max(concurrency // tp if attention_dp else concurrency, 1)
    max_isl = round(isl * MTP_MAX_ISL_RATIO)
    return ((drafts + 1) * batch + max_isl + 64 + 63) // 64 * 64


Sweeps = list[dict[str, str]]


def load_sweeps(path: Path) -> Sweeps:
    with path.open() as f:
        return list(csv.DictReader(f))


def _runs(entry: dict[str, str], r: dict[str, str], day: str, kw: dict[str, Any]) -> bool:
    """Whether search-space ``entry``, swept on ``day``, runs row ``r``'s deployment and load."""
    return (
        entry["measured_day"] == day
        and (entry["system"], entry["backend"], entry["model"])
        == (
            r["system"],
            r["backend"],
            r["model_path"],
        )
        and (entry["isl"], entry["osl"]) == (r["isl"], r["osl"])
        and (int(entry["tp"]), int(entry["ep"])) == (kw["tp"], kw["ep"])
        and (entry["dp_attn"] == "true") == (kw.get("attention_dp", 1) > 1)
        and int(entry["conc_start"]) <= kw["concurrency"] <= int(entry["conc_end"])
    )


def speculative_reading(
    r: dict[str, str], day: str, kw: dict[str, Any], sweeps: Sweeps
) -> tuple[dict[str, Any], str, str]:
    """Aggregated row ``r`` (measured on ``day``, read as ``kw``) as the run that measured it
    ran it: (keyword arguments to add, the note saying why, or the reason it is not
    expressible). Nothing when that run swept no MTP entry at the row's shape and load. A run
    that swept both a speculative and a plain entry there leaves it unknown (no public row is
    such a case; the rule is the disaggregated rows'), and so does a run that swept entries for
    the row's engine, GPU and model but none at its shape and load."""
    hits = [e for e in sweeps if _runs(e, r, day, kw)]
    specs = {e["spec"] for e in hits}
    ran = {
        f"{e['commit']} (InferenceX #{e['pr']})"
        for e in sweeps
        if e["measured_day"] == day
        and (e["system"], e["backend"], e["model"]) == (r["system"], r["backend"], r["model_path"])
    }
    if ran and not hits:
        # The run of that day measured only the listed entries for this engine, GPU and model:
        # a row none of them runs was read wrong (or the list is), and whether it ran MTP is
        # not known.
        return (
            {},
            "",
            f"not expressible: the run of {', '.join(sorted(ran))} swept no entry at this "
            "shape and load; the export drops spec-decoding, so whether this row ran MTP is "
            "unknown",
        )
    if "mtp" not in specs:
        return {}, "", ""
    # Two sweeps of one UTC day would both be named (the stamp's day cannot tell them apart).
    commit = ", ".join(sorted({f"{e['commit']} (InferenceX #{e['pr']})" for e in hits}))
    keys = ", ".join(sorted({e["config_key"] for e in hits}))
    if specs != {"mtp"}:
        return (
            {},
            "",
            f"not expressible: the run of {commit} swept both {keys} at this shape and load; "
            "the export drops spec-decoding, so whether this row ran MTP is unknown",
        )
    adp = kw.get("attention_dp", 1) > 1
    drafts = MTP_DRAFT_TOKENS[adp]
    tokens = mtp_max_num_tokens(int(r["isl"]), kw["concurrency"], kw["tp"], adp)
    note = (
        f"speculative decoding: the run of {commit} swept {keys} at this shape and load "
        f"(num_nextn_predict_layers {drafts}, max_num_tokens {tokens}; "
        "dsr1_fp8_h200_trt_mtp_slurm.sh)"
    )
    return (
        {"speculative": "mtp", "draft_tokens": drafts, "max_num_batched_tokens": tokens},
        note,
        "",
    )


SCRIPTS_FILE = "inferencex_mtp_scripts.csv"
"""Draft counts of InferenceX's single-node DeepSeek-R1 MTP launch scripts, per script version
(path, commit), day range and attention-DP branch (SOURCES.md)."""

Scripts = list[dict[str, str]]


def load_scripts(path: Path) -> Scripts:
    with path.open() as f:
        return list(csv.DictReader(f))


def script_draft_tokens(
    r: dict[str, str], day: str, kw: dict[str, Any], scripts: Scripts
) -> tuple[dict[str, Any], str, str]:
    """Draft tokens of aggregated row ``r``, known to have run MTP (a record that states
    ``spec_method: mtp``; the exports of ``serving_rows`` do not), measured on ``day`` and read
    as ``kw``: (keyword arguments to add, the note saying which script versions set it, or the
    reason it is not known); nothing when no line is on file for it. The lines of ``scripts``
    for the row's GPU, engine, model and precision in force on ``day`` (``from_day`` <= day <=
    ``to_day``) at its attention-DP branch must all give one count; lines that disagree leave
    it unknown. A line that names the ``engine_version`` its configuration's image pinned over
    the whole of its days applies only to rows of that version (or of an unknown one): on a day
    two versions share, the row's image tells which launched it. Read from the row's source,
    day, image and deployment only, never from its measured latency."""
    adp = "true" if kw.get("attention_dp", 1) > 1 else "false"
    version = r.get("backend_version", "")
    hits = [
        s
        for s in scripts
        if (s["system"], s["backend"], s["model"], s["precision"])
        == (r["system"], r["backend"], r["model_path"], r["precision"])
        and s["from_day"] <= day <= s["to_day"]
        and s["attention_dp"] == adp
        and (not s.get("engine_version") or not version or s["engine_version"] == version)
    ]
    versions = ", ".join(sorted({f"{s['script']}@{s['commit']}" for s in hits}))
    counts = {int(s["draft_tokens"]) for s in hits}
    if not hits:
        return {}, "", ""
    if len(counts) != 1:
        return (
            {},
            "",
            f"not expressible: the launch scripts in force on {day} ({versions}) set "
            f"different draft counts ({sorted(counts)}), and the record's time of day is not "
            "stated",
        )
    (n,) = counts
    note = f"speculative decoding: MTP, {n} draft tokens ({versions}; {SCRIPTS_FILE})"
    return {"speculative": "mtp", "draft_tokens": n}, note, ""
