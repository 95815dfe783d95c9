"""Regenerate ``data/validation/serving/inferencex_disagg_prefill_chunks.csv``: the prefill
stage's ``chunked-prefill-size``, ``max-prefill-tokens``, ``mem-fraction-static`` and
``max-running-requests`` of every SGLang srt-slurm recipe the multi-node tables name, read over
every version of the file in two forks' histories.

InferenceX's Dynamo-SGLang multi-node entries launch srt-slurm recipes (``CONFIG_FILE=recipes/
...``, branch ``sa-submission-q1-2026`` of ishandhanani/srt-slurm, whose history is public only
through forks that carry its commits: qiching/srt-slurm and connorcarpenter15/srt-slurm;
``SOURCES.md``). Each recipe states its prefill workers' own SGLang flags under
``backend.sglang_config.prefill`` (``base.backend...`` in the later sweep layout), apart from the
decode workers'. This script reads, for every SGLang recipe path in
``inferencex_disagg_plain_recipes.csv``, ``inferencex_disagg_mtp_recipes.csv`` and
``inferencex_disagg_recipes.csv``, every commit that touches it in both forks (``git log --all
-- PATH``; a commit that deletes it is skipped), and writes one line per (recipe, value): the
prefill ``chunked-prefill-size`` and ``max-prefill-tokens`` (empty: not stated, SGLang's default;
several values separated by spaces: a sweep version, ``zip_override_*`` lists), the versions
(distinct commits) that state it, the first and last of their committer days, and the forks
holding them. A file with more than one line changed its value across versions.

Mirrors: the ``fetch`` tool's bare repositories under ``/work/.mirror/<owner>+srt-slurm/repo``.

    PYTHONPATH=src python benchmarks/recipe_prefill_chunks.py [--mirrors /work/.mirror] [--out PATH]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_multinode import PREFILL_CHUNKS_COLUMNS, PREFILL_CHUNKS_FILE

SERVING = DATA_DIR / "serving"
FORKS = ("qiching/srt-slurm", "connorcarpenter15/srt-slurm")
"""The forks whose histories carry the ``sa-submission-q1-2026`` commits (SOURCES.md)."""
TABLES = (
    ("inferencex_disagg_plain_recipes.csv", "framework"),
    ("inferencex_disagg_mtp_recipes.csv", "framework"),
    ("inferencex_disagg_recipes.csv", "backend"),
)
"""The multi-node tables and the column that names each line's engine."""
KEYS = {
    "chunked_prefill_size": ("chunked-prefill-size", "chunked_prefill_size"),
    "max_prefill_tokens": ("max-prefill-tokens", "max_prefill_tokens"),
    "mem_fraction_static": ("mem-fraction-static", "mem_fraction_static"),
    "max_running_requests": ("max-running-requests", "max_running_requests"),
}
"""The SGLang flags read, as a recipe may spell them (srt-slurm passes each key as ``--key``)."""


def sglang_recipes(directory: Path = SERVING) -> list[str]:
    """The srt-slurm recipe paths of the SGLang lines of the multi-node tables."""
    out: set[str] = set()
    for name, column in TABLES:
        with (directory / name).open(newline="") as f:
            for line in csv.DictReader(f):
                if "sglang" in line[column] and line["recipe"].startswith("recipes/"):
                    out.add(line["recipe"])
    return sorted(out)


def _stated(stage: Mapping[str, Any], names: Iterable[str]) -> str:
    for name in names:
        if name in stage:
            value = stage[name]
            values = value if isinstance(value, list) else [value]
            return " ".join(str(v) for v in values)
    return ""


def _prefill_stages(doc: Any) -> list[Mapping[str, Any]]:
    """Every ``sglang_config.prefill`` mapping of a recipe: the plain layout's, or the sweep
    layout's ``base`` and each ``zip_override_*`` / ``override_*`` section's."""
    if not isinstance(doc, dict):
        return []
    out = []
    sections = [doc] + [v for k, v in doc.items() if k == "base" or "override" in k]
    for sec in sections:
        stage = ((sec or {}).get("backend") or {}).get("sglang_config", {}) or {}
        if isinstance(stage, dict) and isinstance(stage.get("prefill"), dict):
            out.append(stage["prefill"])
    return out


def prefill_values(text: str) -> tuple[str, str, str, str] | None:
    """(chunked-prefill-size, max-prefill-tokens, mem-fraction-static, max-running-requests) of a
    recipe's prefill stage, as written (a later section's value overriding the base's; lists
    kept whole, space-separated; empty: not stated); None where the recipe has no prefill stage (an
    aggregated recipe). The fraction is read because SGLang derives its own from the chunk
    where none is stated (``server_args.py`` ``_handle_gpu_memory_settings``), so a prefill
    chunk applied without the stage's stated fraction would size its memory by a rule the
    launch did not run. The running cap is read because SGLang sizes each rank's prefill batch
    by it (``max_running_requests // dp_size`` per attention-DP rank, ``model_runner.py``)."""
    stages = _prefill_stages(yaml.safe_load(text))
    if not stages:
        return None
    got = {key: "" for key in KEYS}
    for stage in stages:
        for key, names in KEYS.items():
            if value := _stated(stage, names):
                got[key] = value
    return (
        got["chunked_prefill_size"],
        got["max_prefill_tokens"],
        got["mem_fraction_static"],
        got["max_running_requests"],
    )


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )


def versions(repo: Path, path: str) -> list[tuple[str, str, str]]:
    """(commit, committer instant in UTC as ``YYYY-MM-DDTHH:MM:SSZ``, file text) of every commit
    of ``repo`` touching ``path`` that holds it. UTC, as the records' run days are: a commit's
    local day (``%cs``) can be the day before or after."""
    log = _git(repo, "log", "--all", "--format=%H %ct", "--", path).stdout.split("\n")
    out = []
    for line in filter(None, log):
        commit, stamp = line.split()
        shown = _git(repo, "show", f"{commit}:{path}")
        if shown.returncode == 0:
            when = datetime.fromtimestamp(int(stamp), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append((commit, when, shown.stdout))
    return out


def versioned_values(
    mirrors: Path, path: str, parse: Callable[[str], Any]
) -> list[tuple[Any, dict[str, str]]]:
    """``parse`` of every version of ``path`` in the forks under ``mirrors``: one (value, line
    fields) per distinct value, in the order of its first version; the fields are ``versions``
    (distinct commits stating it), ``first_commit`` / ``last_commit`` (the first and last of
    those commits' instants, UTC), ``first_day`` / ``last_day`` (their UTC days) and ``repo``
    (the forks holding them)."""
    seen: dict[Any, dict[str, Any]] = {}
    for fork in FORKS:
        repo = mirrors / fork.replace("/", "+") / "repo"
        for commit, when, text in versions(repo, path):
            entry = seen.setdefault(parse(text), {"commits": {}, "forks": set()})
            entry["commits"][commit] = when
            entry["forks"].add(fork)
    spans = {v: sorted(e["commits"].values()) for v, e in seen.items()}
    return [
        (
            value,
            {
                "versions": str(len(seen[value]["commits"])),
                "first_day": spans[value][0][:10],
                "last_day": spans[value][-1][:10],
                "first_commit": spans[value][0],
                "last_commit": spans[value][-1],
                "repo": " ".join(f for f in FORKS if f in seen[value]["forks"]),
            },
        )
        for value in sorted(seen, key=lambda v: (spans[v][0], spans[v][-1]))
    ]


def keyed_table(
    mirrors: Path,
    paths: Iterable[str],
    parse: Callable[[str], tuple[str, ...] | None],
    keys: Sequence[str],
) -> list[dict[str, str]]:
    """One line per (recipe, value) of ``paths``: ``parse`` of each version read into the
    columns ``keys`` beside the version span (:func:`versioned_values`); a version ``parse``
    gives None (a recipe of another kind) has no line. The recipe tables' one loop."""
    rows = []
    for path in paths:
        for value, span in versioned_values(mirrors, path, parse):
            if value is not None:
                rows.append({"recipe": path, **dict(zip(keys, value, strict=True)), **span})
    return rows


def table(mirrors: Path, paths: Iterable[str]) -> list[dict[str, str]]:
    """The table's lines for ``paths`` read from the forks under ``mirrors``."""
    rows = []
    for path in paths:
        for value, span in versioned_values(mirrors, path, prefill_values):
            chunk, limit, fraction, running = ("", "", "", "") if value is None else value
            rows.append(
                {
                    "recipe": path,
                    "prefill_stage": "no" if value is None else "yes",
                    "chunked_prefill_size": chunk,
                    "max_prefill_tokens": limit,
                    "mem_fraction_static": fraction,
                    "max_running_requests": running,
                    **span,
                }
            )
    return rows


def write_table(rows: list[dict[str, str]], out: Path, columns: Sequence[str]) -> None:
    """Write ``rows`` to ``out`` and print how many lines and files, and which files changed
    their value across versions."""
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    files = {r["recipe"] for r in rows}
    changed = sorted(p for p in files if sum(r["recipe"] == p for r in rows) > 1)
    print(f"{len(rows)} lines, {len(files)} files; changed across versions: {', '.join(changed)}")


def generator_args(doc: str | None, table_file: str) -> argparse.Namespace:
    """The recipe-table generators' one command line: ``--mirrors`` (the forks' mirrors) and
    ``--out`` (default: ``table_file`` in the project's serving data), described by the first
    paragraph of the generator's ``doc``."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--out", type=Path, default=SERVING / table_file)
    return ap.parse_args()


def main() -> None:
    args = generator_args(__doc__, PREFILL_CHUNKS_FILE)
    write_table(table(args.mirrors, sglang_recipes()), args.out, PREFILL_CHUNKS_COLUMNS)


if __name__ == "__main__":
    main()
