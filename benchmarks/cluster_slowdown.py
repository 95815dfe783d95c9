"""The slowdown model against measured packed-vs-spread throughputs (Pollux, Sia; issue 11).

    python benchmarks/cluster_slowdown.py

Reads data/validation/cluster/placement_sensitivity.csv and the servers behind it
(placement_hardware.yaml); prints, per source and placement pair, the measured and predicted
median spread/packed throughput ratio and the model's error next to a placement-blind baseline
(ratio 1). Gavel rows carry no step/sync split or server count and are not scored.
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np

from gpuscale.cluster.sensitivity import evaluate, summary
from gpuscale.validation import DATA_DIR

HERE = Path(DATA_DIR) / "cluster"


def main() -> None:
    rows = evaluate(HERE / "placement_sensitivity.csv", HERE / "placement_hardware.yaml")
    groups: dict[tuple[str, str, str], list] = collections.defaultdict(list)
    for r in rows:
        groups[(r.source, r.packed, r.spread)].append(r)
    print(
        f"{'source':<12} {'packed':>6} {'spread':>6} {'rows':>5} {'measured':>9} {'model':>6} {'err':>6} {'blind':>6}"
    )
    for (source, packed, spread), group in sorted(groups.items()):
        s = summary(group)
        print(
            f"{source:<12} {packed:>6} {spread:>6} {len(group):5d} "
            f"{np.median([r.measured for r in group]):9.2f} {np.median([r.predicted for r in group]):6.2f} "
            f"{s['median_abs_error']:6.3f} {s['blind_median_abs_error']:6.3f}"
        )
    print()
    print(
        f"{'source':<12} {'rows':>5} {'med err':>8} {'mean err':>9} {'blind med':>10} {'blind mean':>11} {'<=20%':>6} {'spearman':>9}"
    )
    for source in [*sorted({r.source for r in rows}), "all"]:
        part = rows if source == "all" else [r for r in rows if r.source == source]
        s = summary(part)
        print(
            f"{source:<12} {len(part):5d} {s['median_abs_error']:8.3f} {s['mean_abs_error']:9.3f} "
            f"{s['blind_median_abs_error']:10.3f} {s['blind_mean_abs_error']:11.3f} "
            f"{s['within_20pct']:6.2f} {s['spearman']:9.2f}"
        )


if __name__ == "__main__":
    main()
