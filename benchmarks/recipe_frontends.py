"""Regenerate ``data/validation/serving/inferencex_disagg_frontends.csv``: how many Dynamo
frontends each srt-slurm recipe the multi-node tables name starts, and their router, read over
every version of the file in two forks' histories.

Why it matters: a router that does not look at the decode workers' load sends a request to a
worker whose slots are all held while another has a free one; with a few slots a worker (a
``max_batch_size`` of 1-8) the request waits there for a whole decode. srt-slurm starts the
frontends of a recipe as ``python3 -m dynamo.frontend --http-port=...`` plus the recipe's
``frontend.args`` (``src/srtctl/frontends/dynamo.py``), so without ``--router-mode`` each runs
Dynamo's default, ``round-robin`` (Dynamo frontend configuration reference: ``--router-mode``
default ``round-robin``), its own counter over the decode workers. With
``frontend.enable_multiple_frontends`` (the schema's default ``True``, with
``num_additional_frontends`` ``9``, in every srt-slurm version from 2025-12-17 to 2026-06-26,
``src/srtctl/core/schema.py`` ``FrontendConfig``) and more than one worker node, srt-slurm puts
nginx on the head node and ``min(num_additional_frontends + 1, worker nodes - 1)`` frontends on
the other nodes (``cli/mixins/frontend_stage.py`` ``_compute_frontend_topology``); nginx
deals connections round the frontends (``templates/nginx.conf.j2``: an ``upstream`` with no
balancing directive, ``worker_processes auto``: each nginx worker process keeps its own turn),
and sa-bench opens a connection per request, so which frontend's counter a request meets is
not the order it came in.

Columns: ``recipe``; ``frontend_type`` (``dynamo`` unless stated); ``multiple`` (the
``enable_multiple_frontends`` in force: stated, or the schema default ``true``);
``additional`` (``num_additional_frontends``, stated or ``9``); ``worker_nodes``
(``resources``: prefill + decode + aggregated nodes); ``frontends`` (the count the rule
above starts); ``router_args`` (``frontend.args`` as ``key=value``, space-separated; empty:
none); ``versions``, ``first_day``, ``last_day``, ``first_commit``, ``last_commit``, ``repo`` as in the
prefill-chunks table
(``recipe_prefill_chunks.py``). One line per (recipe, value).

    PYTHONPATH=src python benchmarks/recipe_frontends.py [--mirrors /work/.mirror] [--out PATH]
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_multinode import FRONTENDS_COLUMNS, FRONTENDS_FILE
from recipe_prefill_chunks import generator_args, keyed_table, write_table

SERVING = DATA_DIR / "serving"
TABLES = (
    "inferencex_disagg_plain_recipes.csv",
    "inferencex_disagg_mtp_recipes.csv",
    "inferencex_disagg_decode_caps.csv",
    "inferencex_disagg_recipes.csv",
)
"""The multi-node tables whose ``recipe`` column names the srt-slurm recipes."""
MULTIPLE_DEFAULT = True
ADDITIONAL_DEFAULT = 9
"""srt-slurm ``FrontendConfig`` defaults, the same in every version read (2025-12-17 ..
2026-06-26)."""


def recipes(directory: Path = SERVING) -> list[str]:
    """Every srt-slurm recipe path (``recipes/...``) of the multi-node tables."""
    out: set[str] = set()
    for name in TABLES:
        with (directory / name).open(newline="") as f:
            out.update(
                ln["recipe"] for ln in csv.DictReader(f) if ln["recipe"].startswith("recipes/")
            )
    return sorted(out)


def _section(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``doc[key]``, or the sweep layout's ``base[key]``."""
    got = doc.get(key)
    if got is None and isinstance(doc.get("base"), dict):
        got = doc["base"].get(key)
    return got if isinstance(got, dict) else {}


def frontend_values(text: str) -> tuple[str, str, str, str, str, str] | None:
    """(frontend type, multiple, additional, worker nodes, frontends, router args) of a recipe,
    or None where its YAML is not a mapping."""
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        return None
    fe = _section(doc, "frontend")
    res = _section(doc, "resources")
    kind = str(fe.get("type", "dynamo"))
    multiple = bool(fe.get("enable_multiple_frontends", MULTIPLE_DEFAULT))
    additional = int(fe.get("num_additional_frontends", ADDITIONAL_DEFAULT))
    nodes = sum(int(res.get(k) or 0) for k in ("prefill_nodes", "decode_nodes", "agg_nodes"))
    count = min(additional + 1, nodes - 1) if multiple and nodes > 1 else 1
    args = fe.get("args") or {}
    shown = " ".join(f"{k}={v}" for k, v in args.items()) if isinstance(args, dict) else str(args)
    return kind, str(multiple).lower(), str(additional), str(nodes), str(count), shown


def table(mirrors: Path, paths: list[str]) -> list[dict[str, str]]:
    """The table's lines for ``paths`` read from the forks under ``mirrors``."""
    keys = ("frontend_type", "multiple", "additional", "worker_nodes", "frontends", "router_args")
    return keyed_table(mirrors, paths, frontend_values, keys)


def main() -> None:
    args = generator_args(__doc__, FRONTENDS_FILE)
    paths = recipes()
    rows = table(args.mirrors, paths)
    write_table(rows, args.out, FRONTENDS_COLUMNS)
    print(f"not found: {', '.join(sorted(set(paths) - {r['recipe'] for r in rows})) or 'none'}")


if __name__ == "__main__":
    main()
