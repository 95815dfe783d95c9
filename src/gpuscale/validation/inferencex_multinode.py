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
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

MTP_RECIPES_FILE = "inferencex_disagg_mtp_recipes.csv"
PLAIN_RECIPES_FILE = "inferencex_disagg_plain_recipes.csv"
VERSION_SPAN = ("versions", "first_day", "last_day", "first_commit", "last_commit", "repo")
"""The last columns of every recipe table ``benchmarks/recipe_prefill_chunks.versioned_values``
writes: how many commits state the line's value, their first and last UTC day and instant, and
the forks holding them (:func:`_in_force` reads the day and instant)."""
PREFILL_CHUNKS_FILE = "inferencex_disagg_prefill_chunks.csv"
PREFILL_CHUNKS_COLUMNS = (
    "recipe",
    "prefill_stage",
    "chunked_prefill_size",
    "max_prefill_tokens",
    "mem_fraction_static",
    "max_running_requests",
    *VERSION_SPAN,
)
"""Columns of :data:`PREFILL_CHUNKS_FILE` (``benchmarks/recipe_prefill_chunks.py`` writes it;
SOURCES.md)."""

FRONTENDS_FILE = "inferencex_disagg_frontends.csv"
FRONTENDS_COLUMNS = (
    "recipe",
    "frontend_type",
    "multiple",
    "additional",
    "worker_nodes",
    "frontends",
    "router_args",
    *VERSION_SPAN,
)
"""Columns of :data:`FRONTENDS_FILE` (``benchmarks/recipe_frontends.py`` writes it;
SOURCES.md)."""
TRT_STAGES_FILE = "inferencex_disagg_trt_stages.csv"
TRT_STAGES_COLUMNS = (
    "recipe",
    "prefill_max_batch_size",
    "prefill_max_num_tokens",
    "prefill_kv_fraction",
    "decode_kv_fraction",
    *VERSION_SPAN,
)
"""Columns of :data:`TRT_STAGES_FILE` (``benchmarks/recipe_trt_stages.py`` writes it;
SOURCES.md)."""
SGLANG_STAGES_FILE = "inferencex_disagg_sglang_stages.csv"
FP8_GEMM_FIELDS = (
    "prefill_jit_deepgemm",
    "prefill_flashinfer_gemm",
    "prefill_fp8_gemm_backend",
    "decode_jit_deepgemm",
    "decode_flashinfer_gemm",
    "decode_fp8_gemm_backend",
)
"""The kernel values of a :data:`SGLANG_STAGES_FILE` line: per stage DeepGEMM switch, FlashInfer
switch, ``--fp8-gemm-backend``."""
KV_DTYPE_FIELDS = ("prefill_kv_cache_dtype", "decode_kv_cache_dtype")
"""Each stage's ``--kv-cache-dtype`` in a :data:`SGLANG_STAGES_FILE` line."""
SGLANG_STAGES_FIELDS = (*FP8_GEMM_FIELDS, *KV_DTYPE_FIELDS)
"""The values ``benchmarks/recipe_sglang_stages.stage_values`` reads, in this order."""
SGLANG_STAGES_COLUMNS = ("recipe", *SGLANG_STAGES_FIELDS, *VERSION_SPAN)
"""Columns of :data:`SGLANG_STAGES_FILE` (``benchmarks/recipe_sglang_stages.py`` writes it;
SOURCES.md)."""

MultinodeRecipes = list[dict[str, str]]
PrefillChunks = list[dict[str, str]]

STAGE_FIELDS = ("workers", "tp", "ep", "dp_attn")
"""Per-stage columns of the table; the record's are ``{stage}_num_workers``, ``{stage}_tp``,
``{stage}_ep`` and ``{stage}_dp_attention``."""


def load_multinode_recipes(path: Path) -> MultinodeRecipes:
    """A multi-node recipes table (:data:`MTP_RECIPES_FILE`, :data:`PLAIN_RECIPES_FILE`,
    ``inferencex_decode_caps.DECODE_CAPS_FILE``): one dict per line."""
    with path.open() as f:
        return list(csv.DictReader(f))


@functools.cache
def default_plain_recipes() -> tuple[dict[str, str], ...]:
    """:data:`PLAIN_RECIPES_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / PLAIN_RECIPES_FILE))


@functools.cache
def default_prefill_chunks() -> tuple[dict[str, str], ...]:
    """:data:`PREFILL_CHUNKS_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / PREFILL_CHUNKS_FILE))


@functools.cache
def default_frontends() -> tuple[dict[str, str], ...]:
    """:data:`FRONTENDS_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / FRONTENDS_FILE))


def _record_stage(rec: dict[str, str], stage: str) -> tuple[str, ...]:
    return (
        rec[f"{stage}_num_workers"],
        rec[f"{stage}_tp"],
        rec[f"{stage}_ep"],
        rec[f"{stage}_dp_attention"],
    )


def _line_stage(line: dict[str, str], stage: str) -> tuple[str, ...]:
    return tuple(line[f"{stage}_{f}"] for f in STAGE_FIELDS)


def entry_runs(line: dict[str, str], rec: dict[str, str], system: str) -> bool:
    """Whether entry version ``line`` runs record ``rec`` (on ``system``, ``serving_rows``'
    GPU name) on its day: the one match rule of the multi-node tables (this module's and
    ``inferencex_decode_caps``'). ``run_concurrencies`` is optional (empty: ``conc-list`` only)."""
    return (
        (line["system"], line["framework"], line["precision"])
        == (system, rec["framework"], rec["precision"])
        and (line["isl"], line["osl"]) == (rec["isl"], rec["osl"])
        and rec["conc"] in (line["concurrencies"] + " " + line.get("run_concurrencies", "")).split()
        and all(_line_stage(line, s) == _record_stage(rec, s) for s in ("prefill", "decode"))
        and line["from_day"] <= rec["date"] <= line["to_day"]
    )


def multinode_draft_tokens(
    rec: dict[str, str], system: str, lines: MultinodeRecipes
) -> tuple[dict[str, Any], str, str]:
    """Draft tokens (and decode cap, where stated) of disaggregated MTP record ``rec``: (keyword
    arguments to add, the note naming the recipe, or the reason it stays not expressible).
    Nothing at all when the table has no line for the record's GPU, framework and precision (the
    caller's general reason applies)."""
    if not any(
        (ln["system"], ln["framework"], ln["precision"])
        == (system, rec["framework"], rec["precision"])
        for ln in lines
    ):
        return {}, "", ""
    hits = [ln for ln in lines if entry_runs(ln, rec, system)]
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
    cap, cap_notes = recipes_decode_cap(rec, system, hits)
    out.update(cap)
    if cap_notes:
        note += "; " + "; ".join(cap_notes)
    return out, note, ""


RECIPE_NAME = re.compile(r"ctx(\d+)_gen(\d+)_(dep|tep|dp|tp)(\d+)_batch(\d+)_")
"""srt-slurm's TensorRT-LLM recipe names: prefill workers, decode workers, the decode worker's
kind and GPUs (``dep``/``dp``: attention DP; ``tep``/``tp``: attention TP) and its
``max_batch_size``."""


def recipes_decode_cap(
    rec: dict[str, str], system: str, lines: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], list[str]]:
    """The one rule for the multi-node recipes' decode cap per attention rank, MTP or not: the
    lines of ``lines`` that run record ``rec`` (:func:`entry_runs`) must all state one
    ``decode_max_batch``; it is applied as ``decode_batch``. A matching line without a cap, or
    lines (entries, or versions of one recipe file) with different caps, give no cap and a
    note; no matching line gives nothing.

    Where the matching recipes' names state one decode kind (:data:`RECIPE_NAME`) other than the
    record's ``dp_attention`` label, the name's is applied: InferenceX #919 ("Fix
    nvidia-master.yaml metadata to align with recipe files", f316a0ef6, 2026-03-23) relabelled
    such entries to their recipe files, and a record carries the label of its day (e.g.
    ``gb200-fp4/8k1k/stp/ctx1_gen4_tep8_batch16`` was labelled decode ``dp-attn: true``; its recipe
    runs ``enable_attention_dp: false``)."""
    hits = [ln for ln in lines if entry_runs(ln, rec, system)]
    if not hits:
        return {}, []
    unread = sorted(
        {ln.get("cap_source") or ln["recipe"] for ln in hits if not ln["decode_max_batch"]}
    )
    if unread:
        return {}, [f"no decode cap: a matching entry's cap is not on file ({'; '.join(unread)})"]
    caps = sorted({int(ln["decode_max_batch"]) for ln in hits})
    recipes = ", ".join(sorted({f"{ln['recipe']}@{ln['config_commit']}" for ln in hits}))
    if len(caps) > 1:
        return {}, [
            "no decode cap: the entries of InferenceX's configuration (or versions of their "
            "recipe) that match the record on its day state different caps "
            f"({', '.join(map(str, caps))}: {recipes})"
        ]
    (cap,) = caps
    # The decode engine admits at most this many requests per attention rank; the rest wait
    # after their prefill, inside TTFT (as serving_recipes._decode_cap reads the H100/H200 recipes:
    # TensorRT-LLM max_batch_size, SGLang max-running-requests / dp-size).
    out: dict[str, Any] = {"decode_batch": cap}
    notes = [f"decode cap {cap} per attention rank ({recipes})"]
    names = [ln["recipe"].rsplit("/", 1)[-1] for ln in hits]
    kinds = {m.group(3) in ("dep", "dp") for n in names if (m := RECIPE_NAME.search(n))}
    if len(kinds) == 1 and kinds != {rec["decode_dp_attention"] == "true"}:
        adp = kinds.pop()
        out["decode_attention_dp"] = int(rec["decode_tp"]) if adp else 1
        notes.append(
            f"decode attention DP {out['decode_attention_dp']} (the recipe's name), not the "
            f"record's dp_attention {rec['decode_dp_attention']} (InferenceX #919 relabelled it)"
        )
    return out, notes


def multinode_decode_cap(
    rec: dict[str, str], system: str, lines: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], list[str]]:
    """Decode cap of non-MTP disaggregated record ``rec`` (:func:`recipes_decode_cap` over
    ``lines``, e.g. :data:`PLAIN_RECIPES_FILE` and ``inferencex_decode_caps``' table)."""
    if rec.get("spec_method", "none") not in ("", "none"):
        return {}, []
    return recipes_decode_cap(rec, system, lines)


RECIPE_RECV_INTERVAL: dict[str, tuple[int, int]] = {
    "recipes/gb200-fp4/1k1k/low-latency.yaml": (10, 10),
    "recipes/gb200-fp4/8k1k/low-latency.yaml": (10, 10),
    "recipes/gb200-fp8/1k1k/low-latency.yaml": (10, 10),
    "recipes/gb200-fp8/8k1k/low-latency.yaml": (10, 10),
    "recipes/gb300-fp4/1k1k/low_latency.yaml": (10, 10),
    "recipes/gb300-fp4/8k1k/low_latency.yaml": (10, 10),
    "recipes/gb300-fp8/1k1k/stp/low-latency.yaml": (10, 1),
    "recipes/gb300-fp8/8k1k/stp/low-latency.yaml": (10, 1),
}
"""srt-slurm SGLang recipes -> ``scheduler-recv-interval`` of their (prefill, decode) workers
(``sglang_config.prefill`` / ``.decode``; the GB300 FP8 decode ``scheduler-recv-interval: 1  #
save mem``). Read over every version of the 105 SGLang recipe files the multi-node tables name
(:data:`PLAIN_RECIPES_FILE`, :data:`MTP_RECIPES_FILE`, ``inferencex_disagg_recipes.csv``) in the
histories of qiching/srt-slurm (at f0a303b90) and connorcarpenter15/srt-slurm (at 841154edb):
these 8 set it, with these values in every version (2026-01-27 to 2026-03-03); no other sets it
(SGLang's default 1). MI355X MoRI-SGLang launches set none (billishyahao/sglang_disagg, every
version; InferenceX ``benchmarks/multi_node/amd_utils`` at 8d81e0bf4, 4706e7009, 4230b97ca)."""


def recipe_files(recipes: Iterable[str]) -> list[str]:
    """``recipes`` sorted, each once, where every one is an srt-slurm recipe file
    (``recipes/...``); empty where one is not (a ``DECODE_MTP_SIZE`` setting of InferenceX's or
    Dynamo's own scripts): the recipes a reading of their flags must all cover."""
    files = sorted(set(recipes))
    return files if all(r.startswith("recipes/") for r in files) else []


def srt_slurm_recipes(
    rec: dict[str, str], system: str, lines: Sequence[dict[str, str]]
) -> list[str]:
    """The srt-slurm recipe files (:func:`recipe_files`) the entries of ``lines`` that run
    record ``rec`` launch (:func:`entry_runs`)."""
    return recipe_files(ln["recipe"] for ln in lines if entry_runs(ln, rec, system))


def multinode_recv_interval(
    rec: dict[str, str], system: str, lines: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], str]:
    """The decode workers' ``--scheduler-recv-interval`` of disaggregated SGLang record ``rec``
    (engine options to add, and a note): the recipes of the entries of ``lines`` that run it
    (:func:`entry_runs`) must all be read (:data:`RECIPE_RECV_INTERVAL`, or none set) and give
    one decode value; an interval of 1 adds nothing. The prefill workers' value is not applied:
    SGLang polls after every prefill batch (``SchedulerRecvSkipper``: a batch other than DECODE /
    TARGET_VERIFY counts 1000) and within N loop turns when idle, so a prefill worker, which runs
    no decode batches, takes a new request as it would with 1
    (``steady_state.decode_poll_wait``)."""
    recipes = srt_slurm_recipes(rec, system, lines)
    if not recipes:
        return {}, ""
    values = sorted({RECIPE_RECV_INTERVAL.get(r, (1, 1))[1] for r in recipes})
    if len(values) > 1:
        return {}, (
            "no receive interval: the matching recipes set different decode "
            f"--scheduler-recv-interval ({', '.join(map(str, values))}: {', '.join(recipes)})"
        )
    (n,) = values
    if n <= 1:
        return {}, ""
    return {"recv_interval": n}, (
        f"decode --scheduler-recv-interval {n} ({', '.join(recipes)}; RECIPE_RECV_INTERVAL)"
    )


def recipe_prefill_values(
    recipe: str, day: str, table: Sequence[dict[str, str]]
) -> tuple[tuple[str, str, str, str] | None, str]:
    """((chunked-prefill-size, max-prefill-tokens, mem-fraction-static, max-running-requests) as
    written, or None; why not) of ``recipe``'s prefill stage on ``day``, from
    :data:`PREFILL_CHUNKS_FILE`. A file with one value in every version read gives it. A file whose value changed (one line per value)
    gives the value in force on ``day``, the value of its latest version committed on or before
    it (InferenceX's runners clone the srt-slurm branch when they launch), only where the day
    decides it (:func:`_in_force`): a day before every version read, or a boundary day (the
    day a value's first version was committed, when the one before may still have run) or
    interleaving versions where the values in question differ, leave it unread. A sweep version
    (several values, space-separated) is unread too."""
    read, unread = _recipes_in_force(
        [recipe], day, _prefill_lines(table), _value,
        f"prefill stage not on file ({PREFILL_CHUNKS_FILE})",
    )  # fmt: skip
    if unread:
        return None, unread[0]
    chunk, limit, fraction, running = read[recipe]
    if any(" " in v for v in (chunk, limit, fraction, running)):
        return None, f"{recipe}: a sweep version {_shown(read[recipe])}"
    return (chunk, limit, fraction, running), ""


def _prefill_lines(table: Sequence[dict[str, str]]) -> Callable[[str], list[dict[str, str]]]:
    return lambda recipe: [
        ln for ln in table if ln["recipe"] == recipe and ln["prefill_stage"] == "yes"
    ]


def _recipe_lines(table: Sequence[dict[str, str]]) -> Callable[[str], list[dict[str, str]]]:
    return lambda recipe: [ln for ln in table if ln["recipe"] == recipe]


def _in_force(
    recipe: str,
    lines: Sequence[dict[str, str]],
    day: str,
    value_of: Callable[[dict[str, str]], tuple[str, ...]],
    shown: Callable[[tuple[str, ...]], str] | None = None,
) -> tuple[tuple[str, ...] | None, str]:
    """The value (``value_of`` a line) of ``recipe``'s versions in force on ``day``: the value of
    its latest version committed before the run (InferenceX's runners clone the srt-slurm branch
    when they launch). A line holds the versions of one value, committed from ``first_commit`` to
    ``last_commit`` (UTC instants; ``first_day`` / ``last_day`` where a table has no instants);
    only those two commits are known. A commit of an earlier day was before the run; one of the
    run's own day may have come after it. A line may be the one in force unless another line
    certainly committed later: at a known instant before the run's day and after the line's last
    commit (where that commit was before the run's day; a line whose last commit is on the day or
    after may have committed up to the run). The value is read where every line that may be in
    force gives it, so a boundary day, or lines whose versions interleave, are read wherever the
    versions in question agree (a line may carry more than ``value_of`` reads); a day before
    every version read, or lines in question that differ, leave it unread (None and why). A
    recipe with one line is read on any day (its one value)."""
    if len(lines) == 1:
        return value_of(lines[0]), ""
    show = shown or _shown

    def span(ln: dict[str, str]) -> tuple[str, str]:
        return ln.get("first_commit") or ln["first_day"], ln.get("last_commit") or ln["last_day"]

    def may_be_in_force(ln: dict[str, str]) -> bool:
        first, last = span(ln)
        if first[:10] > day:
            return False
        if last[:10] >= day:
            return True  # its own commits may reach up to the run
        return not any(
            last < t and t[:10] < day for other in lines if other is not ln for t in span(other)
        )

    candidates = [ln for ln in lines if may_be_in_force(ln)]
    values = {value_of(ln) for ln in candidates}
    if len(values) == 1:
        return values.pop(), ""
    order = sorted(lines, key=lambda ln: (ln["first_day"], ln["last_day"]))
    listed = "; ".join(
        f"{show(value_of(ln))} {ln['first_day']} to {ln['last_day']}" for ln in order
    )
    if not candidates:
        return None, f"{recipe}: {day} is before every version read ({listed})"
    return None, f"{recipe}: its versions' values changed and {day} does not decide ({listed})"


def _recipes_in_force(
    recipes: Sequence[str],
    day: str,
    lines_of: Callable[[str], list[dict[str, str]]],
    value_of: Callable[[dict[str, str]], tuple[str, ...]],
    not_on_file: str,
    shown: Callable[[tuple[str, ...]], str] | None = None,
) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """The one loop of the recipe-table readings: each recipe's value on ``day``
    (:func:`_in_force` over ``lines_of(recipe)``); ({recipe: value read}, why the others were
    not: ``not_on_file`` where a recipe has no line)."""
    read: dict[str, tuple[str, ...]] = {}
    unread: list[str] = []
    for recipe in recipes:
        lines = lines_of(recipe)
        if not lines:
            unread.append(f"{recipe}: {not_on_file}")
            continue
        value, why = _in_force(recipe, lines, day, value_of, shown)
        if value is None:
            unread.append(why)
        else:
            read[recipe] = value
    return read, unread


def _frontend(line: dict[str, str]) -> tuple[str, str, str]:
    return line["frontends"], line["frontend_type"], line["router_args"]


def _frontends_shown(value: tuple[str, ...]) -> str:
    frontends, kind, router_args = value
    return f"{frontends} frontends" + (
        "" if kind == "dynamo" and not router_args else f" ({kind} {router_args})"
    )


def recipes_decode_routing(
    recipes: Sequence[str], day: str, table: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], str]:
    """How the record's requests reach its decode workers (``decode_routing``, and a note),
    from the Dynamo frontends its srt-slurm recipes start (:data:`FRONTENDS_FILE`, read on
    ``day`` by the rule of :func:`_in_force`; every recipe read, one count): one frontend
    without router arguments deals them in turn (Dynamo's default ``--router-mode
    round-robin``); several behind nginx, each with its own turn and met in no set order,
    deal them as at random. Nothing for no recipes, a recipe not read, counts that differ, or
    router arguments (none of the tables' recipes states any)."""
    if not recipes:
        return {}, ""
    read, unread = _recipes_in_force(
        recipes, day, _recipe_lines(table), _frontend, f"not on file ({FRONTENDS_FILE})",
        _frontends_shown,
    )  # fmt: skip
    counts = set()
    for recipe, (frontends, kind, router_args) in read.items():
        if kind != "dynamo" or router_args:
            unread.append(f"{recipe}: frontend {kind} {router_args}")
        else:
            counts.add(int(frontends))
    if unread:
        return {}, "decode routing not read: " + "; ".join(unread)
    if len(counts) > 1:
        return {}, (
            f"decode routing not read: the matching recipes start {sorted(counts)} Dynamo "
            f"frontends ({', '.join(recipes)})"
        )
    (n,) = counts
    routing = "round-robin" if n == 1 else "random"
    how = (
        "one Dynamo frontend, round-robin over the decode workers"
        if n == 1
        else f"{n} Dynamo frontends behind nginx, each round-robin: the decode worker as at random"
    )
    return {"decode_routing": routing}, f"{how} ({', '.join(recipes)}; {FRONTENDS_FILE})"


@functools.cache
def default_trt_stages() -> tuple[dict[str, str], ...]:
    """:data:`TRT_STAGES_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / TRT_STAGES_FILE))


@functools.cache
def default_sglang_stages() -> tuple[dict[str, str], ...]:
    """:data:`SGLANG_STAGES_FILE` in the project's data (``gpuscale.validation.DATA_DIR``)."""
    from gpuscale.validation import DATA_DIR

    return tuple(load_multinode_recipes(DATA_DIR / "serving" / SGLANG_STAGES_FILE))


SGLANG_KV_DTYPES = {"auto": "", "bf16": "bf16", "bfloat16": "bf16", "fp8_e4m3": "fp8"}
"""SGLang ``--kv-cache-dtype`` values -> ``infer``'s ``kv_dtype`` ("": the engine's own rule:
``auto`` keeps the model dtype for a block-FP8 checkpoint, ``serving_engines.yaml``); the others
SGLang accepts (``fp8_e5m2``, ``fp4_e2m1``) have no KV format here and are not read."""
FLASHINFER_AUTO_FROM = (0, 5, 8)
"""First SGLang release whose automatic choice takes FlashInfer's TRT-LLM GEMM on Blackwell
when DeepGEMM is off (0.5.8.post1 ``fp8_utils._dispatch_auto_backend``: DeepGEMM, then
FlashInfer on Blackwell, then CUTLASS, then Triton); 0.5.3-0.5.6 fall to Triton there unless
``SGLANG_SUPPORT_CUTLASS_BLOCK_FP8`` is set (``dispatch_w8a8_block_fp8_linear``, read in the
0.5.3, 0.5.5.post2 and 0.5.6 wheels)."""
SWITCH_READ_BEFORE = (0, 5, 10)
"""First release that reads no FlashInfer switch (0.5.10.post1: no such field in ``environ.py``;
``initialize_fp8_gemm_config`` reads the flag alone). 0.5.3-0.5.5 read
``SGLANG_ENABLE_FLASHINFER_GEMM``, 0.5.6-0.5.9 copy it into ``SGLANG_ENABLE_FLASHINFER_FP8_GEMM``
(``_convert_SGL_to_SGLANG``) and read that."""
SGLANG_DEEPGEMM_SWITCH_FROM = (0, 5, 5)
"""First release reading ``SGLANG_ENABLE_JIT_DEEPGEMM`` (``deep_gemm_wrapper/configurer.py``;
0.5.3 reads ``SGL_ENABLE_JIT_DEEPGEMM`` only). The table keeps one DeepGEMM column for both
spellings, so below it a stated "off" does not decide."""
KNOWN_RELEASES = ((0, 5, 3), (0, 5, 6), (0, 5, 8), (0, 5, 10))
"""One release of each rule above, for a record whose image names no version: its reading
stands only where all of them agree."""
OFF = ("false", "0", "no", "off")
ON = ("true", "1", "yes", "on")


def _release(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of an SGLang version string (``0.5.8.post1`` -> (0, 5, 8))."""
    head = re.match(r"(\d+)\.(\d+)\.(\d+)", version or "")
    return tuple(int(x) for x in head.groups()) if head else None


def _kernel_of_release(
    release: tuple[int, ...], jit_off: bool, switch_on: bool
) -> tuple[bool | None, str]:
    """:func:`fp8_gemm_of_stage`'s rule for one release, the flag not stated."""
    if switch_on and release < SWITCH_READ_BEFORE:
        return True, ""
    if not jit_off:
        return False, ""
    if release < SGLANG_DEEPGEMM_SWITCH_FROM:
        return None, "DeepGEMM stated off in a spelling SGLang 0.5.3 may not read"
    if release >= FLASHINFER_AUTO_FROM:
        return True, ""
    return None, "DeepGEMM off before SGLang 0.5.8: Triton's block-FP8 GEMM, no rate"


def fp8_gemm_of_stage(
    jit: str, flashinfer: str, flag: str, version: str
) -> tuple[bool | None, str]:
    """Whether one worker stage runs FlashInfer's TRT-LLM GEMM for its dense block-FP8 layers
    (engine option ``flashinfer_fp8_gemm``), from what its recipe states (DeepGEMM switch,
    FlashInfer switch, ``--fp8-gemm-backend``) and the SGLang version the record's image names:
    the flag decides; else the switch, where the release reads one
    (:data:`SWITCH_READ_BEFORE`); else DeepGEMM off means FlashInfer from
    :data:`FLASHINFER_AUTO_FROM` and Triton before. Unnamed version: the reading all the
    releases' rules agree on (:data:`KNOWN_RELEASES`). (None, why) where that does not decide
    it, a value is a sweep's list, or the kernel has no measured rate."""
    if any(" " in v.strip() for v in (jit, flashinfer, flag)):
        return None, "a sweep's list of values"
    flag = flag.strip().lower()
    if flag == "flashinfer_trtllm":
        return True, ""
    if flag == "deep_gemm":
        return False, ""
    if flag not in ("", "auto"):
        return None, f"--fp8-gemm-backend {flag} (no measured rate for that kernel)"
    jit_off = jit.strip().lower() in OFF
    switch_on = flashinfer.strip().lower() in ON
    release = _release(version)
    if release is not None:
        got, why = _kernel_of_release(release, jit_off, switch_on)
        return got, (f"{why} (SGLang {version})" if why else "")
    readings = {_kernel_of_release(r, jit_off, switch_on)[0] for r in KNOWN_RELEASES}
    if len(readings) == 1 and None not in readings:
        return readings.pop(), ""
    return None, "the releases differ on these switches and the image names no SGLang version"


def recipes_fp8_gemm(
    recipes: Sequence[str], day: str, table: Sequence[dict[str, str]], version: str
) -> tuple[dict[str, Any], str]:
    """The dense block-FP8 GEMM kernel the SGLang recipes of a record choose
    (:data:`SGLANG_STAGES_FILE`, read on ``day`` by the rule of :func:`_in_force`; every recipe
    read, one value, both stages alike): engine options and a note. ``{"flashinfer_fp8_gemm":
    True}`` where each stage runs FlashInfer's TRT-LLM GEMM (:func:`fp8_gemm_of_stage`),
    nothing where both keep DeepGEMM; a recipe not on file, a day that does not decide,
    recipes or stages that differ, or a kernel without a rate leave it unread (DeepGEMM's
    pricing, said in the note)."""
    if not recipes:
        return {}, "dense FP8 GEMM kernel not read: no recipe file for the record"
    read, unread = _recipes_in_force(
        recipes, day, _recipe_lines(table), _fp8_gemm, f"not on file ({SGLANG_STAGES_FILE})"
    )
    if unread:
        return {}, "dense FP8 GEMM kernel not read: " + "; ".join(unread)
    values = set(read.values())
    if len(values) > 1:
        shown = ", ".join(_shown(v) for v in sorted(values))
        return {}, f"dense FP8 GEMM kernel not read: the matching recipes differ: {shown}"
    ((pre_jit, pre_fi, pre_flag, dec_jit, dec_fi, dec_flag),) = values
    pre, pre_why = fp8_gemm_of_stage(pre_jit, pre_fi, pre_flag, version)
    dec, dec_why = fp8_gemm_of_stage(dec_jit, dec_fi, dec_flag, version)
    if pre is None or dec is None:
        why = "; ".join(w for w in (pre_why, dec_why) if w)
        return {}, f"dense FP8 GEMM kernel not read: {why} ({', '.join(recipes)})"
    if pre != dec:
        return {}, (
            "dense FP8 GEMM kernel not read: the prefill and decode workers differ "
            f"({', '.join(recipes)})"
        )
    if not pre:
        return {}, ""
    after = _committed_after(recipes, day, table)
    return {"flashinfer_fp8_gemm": True}, (
        f"dense block-FP8 GEMMs on FlashInfer's TRT-LLM kernel ({', '.join(recipes)}; "
        f"{SGLANG_STAGES_FILE}{after})"
    )


def _committed_after(recipes: Sequence[str], day: str, table: Sequence[dict[str, str]]) -> str:
    """A note's tail naming the recipes whose every version on file was first committed after
    ``day`` (the project's day rule reads a recipe's only version on any day; the forks hold no
    earlier one): "" where none."""
    later = [r for r in recipes if all(ln["first_day"] > day for ln in _recipe_lines(table)(r))]
    return f"; version on file first committed after the run: {', '.join(later)}" if later else ""


def _fp8_gemm(line: dict[str, str]) -> tuple[str, ...]:
    return tuple(line[k] for k in FP8_GEMM_FIELDS)


def recipes_kv_dtype(
    recipes: Sequence[str], day: str, table: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], str]:
    """The KV-cache dtype the SGLang recipes of a disaggregated record state for both stages
    (``--kv-cache-dtype`` of ``sglang_config.prefill`` and ``.decode``, :data:`SGLANG_STAGES_FILE`,
    read on ``day`` by the rule of :func:`_in_force`): ``{"kv_dtype": ...}`` and a note. Nothing
    where no recipe states one (SGLang's ``auto``); recipes or stages that disagree, a value with
    no KV format here (:data:`SGLANG_KV_DTYPES`), a recipe not on file or a day that does not
    decide leave it unread, said in the note."""
    if not recipes:
        return {}, ""
    read, unread = _recipes_in_force(
        recipes, day, _recipe_lines(table), _kv_dtypes, f"not on file ({SGLANG_STAGES_FILE})"
    )
    if unread:
        return {}, "KV-cache dtype not read: " + "; ".join(unread)
    stated = {x or "auto" for pair in read.values() for x in pair}
    unknown = sorted(x for x in stated if x not in SGLANG_KV_DTYPES)
    if unknown:
        return {}, f"KV-cache dtype not read: --kv-cache-dtype {unknown[0]} has no KV format here"
    # The same format however it is spelled (bf16 / bfloat16; auto or not stated).
    formats = {SGLANG_KV_DTYPES[x] for x in stated}
    if len(formats) > 1:
        shown = ", ".join(_shown(v) for v in sorted(set(read.values())))
        where = "recipes" if len(set(read.values())) > 1 else "recipe's stages"
        return {}, f"KV-cache dtype not read: the {where} differ: {shown}"
    (kv,) = formats
    if not kv:
        return {}, ""
    value = "/".join(sorted(stated))
    return {"kv_dtype": kv}, (
        f"KV cache {value} on both stages ({', '.join(recipes)}; {SGLANG_STAGES_FILE}"
        f"{_committed_after(recipes, day, table)})"
    )


def _kv_dtypes(line: dict[str, str]) -> tuple[str, ...]:
    return tuple(line[k].strip().lower() for k in KV_DTYPE_FIELDS)


TRT_STAGE_FIELDS = (
    "prefill_max_batch_size",
    "prefill_max_num_tokens",
    "prefill_kv_fraction",
    "decode_kv_fraction",
)
"""The values of a :data:`TRT_STAGES_FILE` line, in its column order."""


def _trt_stages(line: dict[str, str]) -> tuple[str, ...]:
    return tuple(line[k] for k in TRT_STAGE_FIELDS)


def recipes_trt_stages(
    recipes: Sequence[str], day: str, table: Sequence[dict[str, str]]
) -> tuple[dict[str, Any], str]:
    """The context and generation servers' settings the TensorRT-LLM recipes of a record state
    (:data:`TRT_STAGES_FILE`, read on ``day`` by the rule of :func:`_in_force`; every recipe
    read, one value): ``infer`` arguments, and a note. The context servers' ``max_batch_size``
    (per attention rank) is ``prefill_batch``, their ``max_num_tokens`` (per rank) and KV
    fraction the engine options ``prefill_max_num_batched_tokens`` and
    ``prefill_memory_fraction``, the generation servers' KV fraction ``memory_fraction``; a
    setting not stated keeps TensorRT-LLM's default. Nothing for no recipes; a recipe not on
    file, a day that does not decide, or recipes that disagree leave every setting unread."""
    if not recipes:
        return {}, ""
    read, unread = _recipes_in_force(
        recipes, day, _recipe_lines(table), _trt_stages, f"not on file ({TRT_STAGES_FILE})"
    )
    values = set(read.values())
    if unread:
        return {}, "context/generation settings not read: " + "; ".join(unread)
    if len(values) > 1:
        shown = ", ".join(_shown(v) for v in sorted(values))
        return {}, (
            f"context/generation settings not read: the matching recipes differ: {shown} "
            f"({', '.join(recipes)})"
        )
    ((batch, tokens, pre_kv, dec_kv),) = values
    out: dict[str, Any] = {}
    options: dict[str, Any] = {}
    if batch:
        out["prefill_batch"] = int(batch)
    if tokens:
        options["prefill_max_num_batched_tokens"] = int(tokens)
    if pre_kv:
        options["prefill_memory_fraction"] = float(pre_kv)
    if dec_kv:
        options["memory_fraction"] = float(dec_kv)
    if options:
        out["engine_options"] = options
    if not out:
        return {}, ""
    return out, (
        f"context servers max_batch_size {batch or 'default'}, max_num_tokens "
        f"{tokens or 'default'} per rank, KV fraction {pre_kv or 'default'}; generation "
        f"servers KV fraction {dec_kv or 'default'} ({', '.join(recipes)}; {TRT_STAGES_FILE})"
    )


def _value(line: dict[str, str]) -> tuple[str, str, str, str]:
    return (
        line["chunked_prefill_size"],
        line["max_prefill_tokens"],
        line["mem_fraction_static"],
        line["max_running_requests"],
    )


def _shown(value: tuple[str, ...]) -> str:
    return "(" + ", ".join(v or "-" for v in value) + ")"


def multinode_prefill_chunk(
    rec: dict[str, str],
    system: str,
    lines: Sequence[dict[str, str]],
    table: Sequence[dict[str, str]],
    attention_dp: int,
) -> tuple[dict[str, Any], str]:
    """The prefill workers' ``--chunked-prefill-size``, ``--max-prefill-tokens``,
    ``--mem-fraction-static`` and ``--max-running-requests`` of disaggregated SGLang record
    ``rec`` (``infer`` arguments to add, and a note), as its srt-slurm recipe states them for the
    prefill stage apart from the decode stage (``sglang_config.prefill``;
    :data:`PREFILL_CHUNKS_FILE`): the recipes of the entries of ``lines`` that run it
    (:func:`srt_slurm_recipes`, as :func:`multinode_recv_interval` reads them) must all be read
    (:func:`recipe_prefill_values` on the record's day) and agree; otherwise nothing is applied
    and the note says why. ``attention_dp``: the prefill stage's attention-DP width
    (:func:`recipes_prefill_chunk`)."""
    return recipes_prefill_chunk(
        srt_slurm_recipes(rec, system, lines), rec["date"], table, attention_dp
    )


def recipes_prefill_chunk(
    recipes: Sequence[str], day: str, table: Sequence[dict[str, str]], attention_dp: int
) -> tuple[dict[str, Any], str]:
    """The one rule of :func:`multinode_prefill_chunk` (the held-out records) and of
    ``serving_rows.read_rows`` (the H100/H200 rows, whose entries ``serving_recipes.
    disagg_recipe_entries`` matches): the prefill-stage values of every recipe in ``recipes``,
    read on ``day``, must be read and agree; (``infer`` arguments, note). Nothing for no
    recipes. Engine options (under ``engine_options``): ``prefill_max_num_batched_tokens`` (a
    size > 0), ``prefill_chunked_prefill`` false (-1, chunking off),
    ``prefill_max_prefill_tokens``, ``prefill_memory_fraction`` (read with the chunk: where none
    is stated SGLang derives the fraction from the chunk). ``prefill_batch``: the stage's
    ``--max-running-requests`` per attention-DP rank as SGLang splits it
    (``max_running_requests // dp_size``, ``model_executor/model_runner.py`` 0.5.x; at least 1,
    a launch left with 0 refuses to start), the most prompts one rank's prefill batch takes
    (``PrefillAdder`` counts them against it). A flag the recipe does not state keeps SGLang's
    default."""
    if not recipes:
        return {}, ""
    values: set[tuple[str, str, str, str]] = set()
    unread: list[str] = []
    for recipe in recipes:
        value, why = recipe_prefill_values(recipe, day, table)
        if value is None:
            unread.append(why)
        else:
            values.add(value)
    if unread:
        return {}, "no prefill chunk: " + "; ".join(unread)
    if len(values) > 1:
        shown = ", ".join(_shown(v) for v in sorted(values))
        return {}, (
            "no prefill chunk: the matching recipes state different prefill (chunked-prefill-"
            "size, max-prefill-tokens, mem-fraction-static, max-running-requests): "
            f"{shown} ({', '.join(recipes)})"
        )
    ((chunk, limit, fraction, running),) = values
    options: dict[str, Any] = {}
    if chunk:
        if int(chunk) > 0:
            options["prefill_max_num_batched_tokens"] = int(chunk)
        else:
            options["prefill_chunked_prefill"] = False
    if limit:
        options["prefill_max_prefill_tokens"] = int(limit)
    if fraction:
        options["prefill_memory_fraction"] = float(fraction)
    out: dict[str, Any] = {"engine_options": options} if options else {}
    if running:
        out["prefill_batch"] = max(int(running) // attention_dp, 1)
    if not out:
        return {}, ""
    return out, (
        f"prefill --chunked-prefill-size {chunk or 'default'}, --max-prefill-tokens "
        f"{limit or 'default'}, --mem-fraction-static {fraction or 'default'}, "
        f"--max-running-requests {running or 'default'} ({', '.join(recipes)}; "
        f"{PREFILL_CHUNKS_FILE})"
    )
