"""Read the measured serving rows (``data/validation/serving``) into the deployment each one ran.

One row of AIConfigurator's ``silicon_sample.csv`` is one benchmark of a real engine. An
aggregated row states its engine's parallelism; a disaggregated row must state its prefill and
decode worker counts as well, or the deployment it measured is unknown: AIConfigurator's own
replay of the file (``tools/accuracy_regression_testing/predict_silicon_sample.py`` at commit
095f58a5, ``REQUIRED_DISAGG_FIELDS``) refuses a disaggregated row without ``prefill_num_workers``
and ``decode_num_workers``, and its InferenceX adapter (``sdk/config_adapter/inferencex.py``)
derives them only from ``num_prefill_gpu`` / ``prefill_num_workers``, fields these rows do not
carry. Each row is read into one of four classes, with every assumption written next to it:

- ``stated``: the row names its workers (or is aggregated);
- ``twin``: the row leaves its workers empty, but the same measurement (same engine, system,
  lengths, concurrency and identical TTFT and TPOT) is also recorded in a row that names them
  (the file holds both the InferenceX CSV export and the AIConfigurator database dump of the
  same runs): the deployment is that row's;
- ``recipe``: worker counts empty and no twin, but InferenceX's configuration at the run date
  (``inferencex_disagg_recipes.csv``) has exactly one entry at the row's engine, system,
  lengths and concurrency whose prefill ``tp``/``ep`` labels are the export's (the export's only
  parallelism fields that agree with every independently known deployment,
  ``serving_recipes.EXPORT_RELIABLE``): the deployment is that entry's recipe (never chosen by
  the measured latency), with MTP speculative decoding where it is an MTP recipe whose draft
  count is on file (TensorRT-LLM ``_mtpN``; SGLang ``speculative-num-steps`` of the recipes read);
- ``not expressible``: worker counts not stated, no twin and no single entry (the reason names
  the candidate recipes: mostly a plain and an MTP recipe at one key, which nothing in the row
  tells apart), or no client concurrency stated
  (the id's ``_c_`` is empty and ``silicon_data_source`` has no ``silicon_concurrency``; for the
  disaggregated gap-analysis rows AIConfigurator's benchmark swept several concurrencies,
  :data:`AIC_DISAGG_SWEEP`). These
  carry a ``guess`` reading (one worker of each kind; AIConfigurator's decode batch x workers x
  attention-DP as the concurrency) for comparison lines only. Aggregated rows are not
  expressible when their recorded concurrency is the benchmark client's cap rather than the load
  the engine ran (``serving_clients.client_cap_only``), or when the InferenceX sweep that
  measured them ran both an MTP and a plain entry at their shape; their ``guess`` is the row as
  recorded. A row whose sweep ran only an MTP entry there is read as MTP (``inferencex_sweeps``).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuscale.validation.inferencex_memory import (
    MEM_FRACTIONS_FILE,
    Fractions,
    load_fractions,
)
from gpuscale.validation.inferencex_multinode import (
    PrefillChunks,
    default_frontends,
    default_prefill_chunks,
    default_trt_stages,
    recipe_files,
    recipes_decode_routing,
    recipes_prefill_chunk,
    recipes_trt_stages,
)
from gpuscale.validation.inferencex_sweeps import (
    SWEEPS_FILE,
    Sweeps,
    load_sweeps,
    speculative_reading,
)
from gpuscale.validation.serving_clients import (
    CLIENT_CAP,
    client_cap_only,
    client_lengths,
    client_requests,
)
from gpuscale.validation.serving_fields import (
    ENGINES,
    INFERENCEX_EXPORTS,
    INFERENCEX_SOURCES,
    SYSTEMS,
    _int,
    concurrency,
    decode_slots,
    measured_day,
    parallelism,
    weights,
)
from gpuscale.validation.serving_launches import (
    add_engine_options,
    add_launch,
    disagg_kv_dtype,
    engine_version_options,
    launch_options,
    stated_kv_cache_dtype,
    stated_memory,
)
from gpuscale.validation.serving_recipes import (
    RECIPES_FILE,
    Recipes,
    _decode_cap,
    _from_config,
    disagg_recipe_entries,
    load_recipes,
)

STATED, TWIN, NOT_EXPRESSIBLE = "stated", "twin", "not expressible"


TWIN_RTOL = 1e-9
"""Twins are the same measurement written twice, so their TTFT and TPOT agree to the digit."""


LATENCIES = ("silicon_ttft_ms", "silicon_tpot_ms")


def same_latencies(a: dict[str, str], b: dict[str, str]) -> bool:
    """Two rows record the same TTFT and TPOT to the last digit (:data:`TWIN_RTOL`): the test
    every rule that folds records of one run into one measurement uses."""
    return all(math.isclose(float(a[k]), float(b[k]), rel_tol=TWIN_RTOL) for k in LATENCIES)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRow:
    """One measured row and the deployment it is read as."""

    id: str
    engine: str
    mode: str
    """``agg`` or ``disagg``."""
    kind: str
    """``stated``, ``twin``, ``recipe`` or ``not expressible`` (module docstring)."""
    reason: str = ""
    """Why a row is not expressible."""
    ttft_ms: float
    tpot_ms: float
    concurrency: int
    kwargs: dict[str, Any] = field(default_factory=dict)
    """The keyword arguments of ``gpuscale.api.infer`` that express the row (empty when not
    expressible)."""
    guess: dict[str, Any] = field(default_factory=dict)
    """For a row that is not expressible: the reading used before rows were classed, for
    comparison only (never counted with the expressible rows)."""
    assumptions: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict)
    copy_of: str = ""
    """The id of the row whose measurement this row repeats at fewer digits
    (:func:`rounded_copies`); empty for an original."""

    @property
    def expressible(self) -> bool:
        return self.kind != NOT_EXPRESSIBLE


def _named(r: dict[str, str]) -> bool:
    return bool(r["prefill_num_workers"] and r["decode_num_workers"])


AIC_DISAGG_SWEEP = (
    "AIConfigurator's benchmark of a generated deployment sweeps several client concurrencies "
    "(eval/pipeline.py _auto_concurrency_values at c46a56b02: up to six points to the decode "
    "max_batch_size; generator bench_run.sh.j2 from f90534bc2, 2026-02-11: 1-128 plus decode "
    "workers x max_batch_size x 0.95/1/1.05) and the row does not say which point it is"
)
"""Why a disaggregated gap-analysis row's concurrency cannot be read from its decode batch and
workers. At the run dates (2026-01-23/25, Dynamo 0.8.0) ai-dynamo/aiconfigurator's eval pipeline
(``src/aiconfigurator/eval/pipeline.py`` at c46a56b02) benchmarked a generated disaggregated
deployment at ``_auto_concurrency_values(max_batch_size)`` of ``disagg/decode_config.yaml`` (the
decode engine's batch, not multiplied by the decode workers; agg multiplies by ``AGG_WORKERS``):
1, then 1/8, 1/4, 1/2, 3/4 of it snapped to a grid, and the batch itself. The generator's own
``benchmark/bench_run.sh.j2`` (added after the runs, f90534bc2) sweeps ``[1, 2, 8, 16, 32, 64,
128]`` plus 0.95/1/1.05 x ``decode_workers x max_batch_size`` (``rule_plugin/benchmark/*.rule``).
AIConfigurator's own disaggregated summary calls decode concurrency x decode workers "not exact
matching" (``sdk/inference_session.py``). The gap-analysis tool that picked one point per row
(``aic-auto-gap-analysis``) is not published."""


def _base(r: dict[str, str], conc: int) -> dict[str, Any]:
    return {
        "gpu": SYSTEMS[r["system"]],
        "engine": ENGINES[r["backend"]],
        "weights": weights(r),
        **client_lengths(r),
        "concurrency": conc,
        **client_requests(r, conc),
    }


def _disagg_kwargs(d: dict[str, str]) -> dict[str, Any]:
    """Worker pools of a row that names them. Neither batch size is passed as an engine cap:
    both are AIConfigurator's modelling inputs, not settings the run used. Its InferenceX
    adapter (``_worker``) sets the prefill batch to 1 ("defaults to 1 unless explicitly
    overridden") and the decode batch to concurrency / (decode workers x attention-DP ranks);
    the rows agree (config 303 keeps one deployment while its decode batch follows the
    concurrency: 4, 8, 16, 32, 64 at 36-576)."""
    p, q = parallelism(d, "prefill_"), parallelism(d, "decode_")
    return {
        "prefill_workers": _int(d["prefill_num_workers"]),
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": _int(d["decode_num_workers"]),
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _one_each(r: dict[str, str]) -> dict[str, Any]:
    """One prefill and one decode worker of the row's per-worker parallelism."""
    p, q = parallelism(r, "prefill_"), parallelism(r, "decode_")
    return {
        "prefill_workers": 1,
        "prefill_tp": p["tp"],
        "prefill_ep": p["ep"],
        "prefill_attention_dp": p["attention_dp"],
        "decode_workers": 1,
        "decode_tp": q["tp"],
        "decode_ep": q["ep"],
        "decode_attention_dp": q["attention_dp"],
    }


def _key(r: dict[str, str], conc: int) -> tuple[str, ...]:
    return (r["backend"], r["system"], r["isl"], r["osl"], str(conc))


RECIPE = "recipe"
"""Class of a disaggregated row whose worker counts are empty but whose measurement date,
lengths and concurrency leave exactly one entry of the InferenceX configuration (plain, or MTP
with its draft count in the recipe's name): the deployment is that entry's."""


def read_rows(
    raw: list[dict[str, str]],
    recipes: Recipes | None = None,
    sweeps: Sweeps | None = None,
    fractions: Fractions | None = None,
    prefill_chunks: PrefillChunks | None = None,
) -> list[ServingRow]:
    """Every raw row read as the deployment it ran, or marked not expressible; ``recipes``
    (:func:`load_recipes`) gives the decode engines' batch caps where a recipe states them,
    ``sweeps`` (``inferencex_sweeps``) the aggregated InferenceX runs that swept MTP entries,
    ``fractions`` (``inferencex_memory``) the ``--mem-fraction-static`` of InferenceX's SGLang
    launches (:func:`stated_memory`) and their ``--kv-cache-dtype`` (:func:`stated_kv_cache_dtype`),
    ``prefill_chunks`` (None: the project's) the SGLang recipes' prefill-stage chunk, prompt
    limit and fraction (``inferencex_multinode.recipes_prefill_chunk``)."""
    table: Recipes = recipes or []
    named: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in raw:
        c = concurrency(r)
        if r["mode"] == "disagg" and _named(r) and c is not None:
            named[_key(r, c)].append(r)
    out = []
    for r in raw:
        stated = concurrency(r)
        conc = stated if stated is not None else decode_slots(r)
        notes: list[str] = []
        kind, reason = STATED, ""
        kw = _base(r, conc)
        guess: dict[str, Any] = {}
        if stated is None:
            kind, kw = NOT_EXPRESSIBLE, {}
            reason = (
                "not expressible: concurrency not stated (empty in the id and in "
                "silicon_data_source; the decode batch is AIConfigurator's modelling input)"
                + ("; " + AIC_DISAGG_SWEEP if r["mode"] == "disagg" else "")
            )
            guess = {**_base(r, conc), **_disagg_kwargs(r)}
        elif r["mode"] != "disagg":
            kw.update(parallelism(r), pp=_int(r["pp_size"]))
            kw.update(launch_options(r, kw))
            spec_kw, spec_note, spec_reason = (
                speculative_reading(r, measured_day(r), kw, sweeps or [])
                if r["silicon_data_source"].startswith(INFERENCEX_EXPORTS)
                else ({}, "", "")
            )
            if spec_reason:
                kind, kw, guess, reason = NOT_EXPRESSIBLE, {}, kw, spec_reason
            elif spec_kw:
                tokens = spec_kw.pop("max_num_batched_tokens")
                kw.update(spec_kw)
                opts = dict(kw.get("engine_options") or {})
                opts["max_num_batched_tokens"] = max(tokens, opts.get("max_num_batched_tokens", 0))
                kw["engine_options"] = opts
                notes.append(spec_note)
            elif client_cap_only(r):
                kind, kw, guess = NOT_EXPRESSIBLE, {}, kw
                reason = (
                    f"not expressible: concurrency {CLIENT_CAP} is the client's cap, not the "
                    "engine's load: InferenceX's gptoss_fp4_h100_docker.sh ran vllm "
                    "--max-num-seqs=$CONC (sweep 4-64) on 10 x $CONC prompts with the client at "
                    f"--max-concurrency {CLIENT_CAP} (d22bf9ca9 to 4e135fd3f); $CONC is not "
                    "recorded"
                )
        elif _named(r):
            kw.update(_disagg_kwargs(r))
            cap, why = _decode_cap(r, conc, kw, table)
            kw.update(cap)
            notes.extend(why)
        else:
            twins = [n for n in named[_key(r, conc)] if same_latencies(n, r)]
            if len(twins) == 1:
                kind = TWIN
                kw.update(_disagg_kwargs(twins[0]))
                notes.append(
                    f"worker counts empty; deployment from {twins[0]['id']}, the same "
                    "measurement (identical TTFT and TPOT) with its workers named"
                )
                cap, why = _decode_cap(r, conc, kw, table)
                kw.update(cap)
                notes.extend(why)
            else:
                found, why, refused = _from_config(r, conc, table)
                if found:
                    kind = RECIPE
                    kw.update(found)
                    notes.extend(why)
                else:
                    kind, kw = NOT_EXPRESSIBLE, {}
                    guess = {**_base(r, conc), **_one_each(r)}
                    reason = (
                        "not expressible: worker counts not stated (prefill/decode_num_workers "
                        "empty, no GPU total in the row; AIConfigurator's own replay refuses "
                        "such rows)" + (f"; {refused}" if refused else "")
                    )
        if r["mode"] == "disagg":
            for read in (kw, guess):
                if read:
                    read.update(disagg_kv_dtype(r))
        if kw and r["silicon_data_source"].startswith(INFERENCEX_SOURCES):
            mem_kw, mem_note, mem_refused = stated_memory(r, kw, table, fractions or [])
            kv_kw, kv_note, kv_refused = stated_kv_cache_dtype(r, kw, fractions or [])
            if mem_refused or kv_refused:
                kind, kw, guess, reason = NOT_EXPRESSIBLE, {}, kw, mem_refused or kv_refused
            else:
                if mem_kw:
                    add_engine_options(kw, mem_kw)
                    notes.append(mem_note)
                if kv_kw:
                    kw.update(kv_kw)
                    notes.append(kv_note)
        inferencex = r["silicon_data_source"].startswith(INFERENCEX_SOURCES)
        if kw and inferencex and r["mode"] == "disagg" and r["backend"] == "sglang":
            # The prefill workers' own chunk, prompt limit and fraction the entries' srt-slurm
            # recipes state (sglang_config.prefill), read as for the held-out records.
            paths = recipe_files(e["recipe"] for e in disagg_recipe_entries(r, conc, kw, table))
            chunks = default_prefill_chunks() if prefill_chunks is None else prefill_chunks
            chunk, chunk_note = recipes_prefill_chunk(
                paths, measured_day(r), chunks, int(kw.get("prefill_attention_dp", 1))
            )
            add_launch(kw, chunk)
            if chunk_note:
                notes.append(chunk_note)
        if kw and inferencex and r["mode"] == "disagg":
            # The router in front of the decode workers: the Dynamo frontends the entries'
            # srt-slurm recipes start, read as for the held-out records.
            paths = recipe_files(e["recipe"] for e in disagg_recipe_entries(r, conc, kw, table))
            routing, routing_note = recipes_decode_routing(
                paths, measured_day(r), default_frontends()
            )
            kw.update(routing)
            if routing_note:
                notes.append(routing_note)
            if r["backend"] == "trtllm":
                # The context and generation servers' own settings the same recipes state.
                trt, trt_note = recipes_trt_stages(paths, measured_day(r), default_trt_stages())
                add_launch(kw, trt)
                if trt_note:
                    notes.append(trt_note)
        for read in (kw, guess):
            if read and (version_opts := engine_version_options(r, r["model_path"], read)):
                read["engine_options"] = {**(read.get("engine_options") or {}), **version_opts}
        out.append(
            ServingRow(
                id=r["id"],
                engine=r["backend"],
                mode=r["mode"],
                kind=kind,
                reason=reason,
                ttft_ms=float(r["silicon_ttft_ms"]),
                tpot_ms=float(r["silicon_tpot_ms"]),
                concurrency=conc,
                kwargs=kw,
                guess=guess,
                assumptions=tuple(notes),
                raw=r,
            )
        )
    return _as_originals(out)


COPY_KEY = ("backend", "backend_version", "model_path", "system", "mode", "isl", "osl")
"""Columns a rounded copy shares with its original, besides the client's concurrency."""


def _decimals(value: str) -> int:
    return len(value.partition(".")[2])


def _rounds_to(original: str, copy: str) -> bool:
    """Whether ``original``, written with more digits, rounds to ``copy``."""
    d = _decimals(copy)
    return _decimals(original) > d and f"{float(original):.{d}f}" == f"{float(copy):.{d}f}"


def rounded_copies(raw: list[dict[str, str]]) -> dict[int, int]:
    """Rows that repeat another row's measurement at fewer digits: index of the copy -> index
    of its original.

    AIConfigurator's ``kimi-k2.5-gap-analysis.csv`` and ``qwen3.5-397b-gap-analysis.csv`` rows
    repeat InferenceX's 2026-04-06 export (``silicon_data_source`` has neither its ``measured=``
    date nor its image) with TTFT and TPOT written to 0.01 ms: all 15 Kimi-K2.5 rows and 14 of the
    15 Qwen3.5 rows equal an export row of the same engine, version, model, GPU, lengths and
    concurrency rounded to two decimals, in both latencies at once (the 15th Qwen3.5 row's
    original records ``tp_size`` 64 for the same TP8 EP8 run; the parallelism columns are not
    compared). A copy is the same benchmark run: it is read as its original
    (:func:`_as_originals`) and counted once (:func:`distinct`). A row is a copy only when the
    rows with more digits that round to it all record one measurement (the exports repeat a run
    to the last digit, :data:`TWIN_RTOL`; the first of them is the original)."""
    index: dict[tuple[str | int | None, ...], list[int]] = defaultdict(list)
    for i, r in enumerate(raw):
        key: tuple[str | int | None, ...] = (*(r[k] for k in COPY_KEY), concurrency(r))
        index[key].append(i)
    out: dict[int, int] = {}
    for same in index.values():
        for i in same:
            c = raw[i]
            found = [
                j
                for j in same
                if j != i
                and _rounds_to(raw[j]["silicon_ttft_ms"], c["silicon_ttft_ms"])
                and _rounds_to(raw[j]["silicon_tpot_ms"], c["silicon_tpot_ms"])
            ]
            # Originals repeated to the last digit (the exports carry the same run twice, at
            # most a float's last bit apart) are one measurement: the first stands for it.
            if found and all(same_latencies(raw[j], raw[found[0]]) for j in found):
                out[i] = found[0]
    return out


def _as_originals(rows: list[ServingRow]) -> list[ServingRow]:
    """Rounded copies (:func:`rounded_copies`) read as the run their original records: the
    same deployment, client and launch (the copy's source says neither client nor date), so one
    measurement gets one prediction."""
    copies = rounded_copies([r.raw for r in rows])
    out = list(rows)
    for i, j in copies.items():
        o = rows[j]
        out[i] = replace(
            o,
            id=rows[i].id,
            ttft_ms=rows[i].ttft_ms,
            tpot_ms=rows[i].tpot_ms,
            raw=rows[i].raw,
            copy_of=o.id,
            assumptions=(
                *o.assumptions,
                f"the measurement of {o.id} written to fewer digits: read as that run",
            ),
        )
    return out


def load(path: Path) -> list[ServingRow]:
    recipes, sweeps = path.parent / RECIPES_FILE, path.parent / SWEEPS_FILE
    fractions = path.parent / MEM_FRACTIONS_FILE
    with path.open() as f:
        return read_rows(
            list(csv.DictReader(f)),
            load_recipes(recipes) if recipes.exists() else None,
            load_sweeps(sweeps) if sweeps.exists() else None,
            load_fractions(fractions) if fractions.exists() else None,
        )
