"""Does gpuscale rank parallel layouts like reality?

    python benchmarks/rank_layouts.py [--json] [--verbose]

Groups of measured runs that differ only in their layout (one model, stack, device and GPU
count): every such group in data/validation/published_runs*.csv plus the BigScience layout
sweep (data/validation/layout_sweeps.csv, 30 layouts of BLOOM-shaped models on 384 A100s).
Predicted with the shipped profiles, as `gpuscale plan` ranks plans. Per group: Spearman rank
correlation, regret of the model's top pick (throughput lost against the measured best) and the
median error on the worst quarter of the layouts next to the group's median error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

import numpy as np

from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import cases, evaluate, load_all, load_rows
from gpuscale.validation.ranking import group_key, rank

SWEEPS = DATA_DIR / "layout_sweeps.csv"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="every layout of the groups of 3+: measured vs predicted",
    )
    args = parser.parse_args()
    rows = load_all(DATA_DIR) + load_rows(SWEEPS)
    mapped, _ = cases(rows)
    results = evaluate(rows)
    groups = rank(mapped, results)
    if args.json:
        print(json.dumps([dataclasses.asdict(g) for g in groups], indent=2))
        return 0
    print(
        f"{'group':78s} {'n':>3s} {'Spearman':>9s} {'regret':>7s} {'worst-q err':>11s} "
        f"{'median err':>10s}"
    )
    for g in groups:
        rho = "" if math.isnan(g.spearman) else f"{g.spearman:+.2f}"
        print(
            f"{g.key[:78]:78s} {g.layouts:3d} {rho:>9s} {g.regret:7.1%} "
            f"{g.worst_optimism:+11.1%} {g.typical_error:+10.1%}"
        )
        if g.regret > 0:
            print(f"{'':4s}model picks {g.pick}, measured best {g.best}")
        if args.verbose and g.layouts >= 3:
            by_id = {r.id: r for r in results}
            members = [by_id[c.id] for c in mapped if group_key(c) == g.key and c.id in by_id]
            for r in sorted(members, key=lambda r: -r.measured):
                assert r.predicted is not None
                print(
                    f"{'':4s}{r.id:48s} measured {r.measured:8.1f} predicted {r.predicted:8.1f} "
                    f"tokens/s/GPU ({r.error:+.1%})"
                )
    for label, chosen in (
        ("all groups", groups),
        ("groups with >= 3 layouts", [g for g in groups if g.layouts >= 3]),
    ):
        rhos = [g.spearman for g in chosen if not math.isnan(g.spearman)]
        rho = f"median Spearman {np.median(rhos):+.2f}; " if rhos else ""
        print(
            f"\n{label}: {len(chosen)} groups, {sum(g.layouts for g in chosen)} layouts; {rho}"
            f"regret mean {np.mean([g.regret for g in chosen]):.1%}, "
            f"max {max(g.regret for g in chosen):.1%}; error on the worst quarter of each "
            f"group: median {np.median([g.worst_optimism for g in chosen]):+.1%} "
            f"(all its layouts: {np.median([g.typical_error for g in chosen]):+.1%})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
