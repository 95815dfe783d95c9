"""The serving rows that ran speculative decoding (MTP), predicted as they ran and without it.

Every InferenceX row whose run is known to have swept an MTP configuration (aggregated:
``gpuscale.validation.inferencex_sweeps``; disaggregated: the one srt-slurm MTP recipe at the
row's concurrency, ``serving_recipes._from_config``) is predicted twice: as an MTP deployment
(``speculative="mtp"`` with the configuration's draft count and the published acceptance) and
as the same deployment without speculation (what the model could say before). Prints mean and
median absolute relative error and median bias of mean TTFT and TPOT per engine and mode, and
what the rows imply for the tokens per decode iteration: ``E x predicted TPOT / measured
TPOT`` (TPOT is the iteration time over E; reported, never fed back).

    PYTHONPATH=src python benchmarks/mtp_rows.py
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from gpuscale.api.serving import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load
from gpuscale.validation.serving_runs import distinct

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _predict(row: ServingRow, speculative: bool) -> dict[str, Any]:
    kw = dict(row.kwargs)
    if not speculative:
        kw.pop("speculative", None)
        kw.pop("draft_tokens", None)
    return infer(row.raw["model_path"], **kw).to_dict()["options"][0]


def _err(p: float, m: float) -> float:
    return (p - m) / m * 100.0


def _line(name: str, errs: list[tuple[float, float]]) -> str:
    tt = [abs(a) for a, _ in errs]
    tp = [abs(b) for _, b in errs]
    return (
        f"{name:<34} n={len(errs):>3}  TTFT {statistics.mean(tt):5.1f} / "
        f"{statistics.median(tt):5.1f}%  TPOT {statistics.mean(tp):5.1f} / "
        f"{statistics.median(tp):5.1f}%  bias {statistics.median(a for a, _ in errs):+4.0f} / "
        f"{statistics.median(b for _, b in errs):+4.0f}%"
    )


def main() -> None:
    rows = [r for r in distinct(load(ROWS)) if r.expressible and r.kwargs.get("speculative")]
    before: dict[str, list[tuple[float, float]]] = defaultdict(list)
    after: dict[str, list[tuple[float, float]]] = defaultdict(list)
    implied: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        group = f"{r.mode} {r.engine} k={r.kwargs['draft_tokens']}"
        for out, spec in ((before, False), (after, True)):
            o = _predict(r, spec)
            e = (_err(o["ttft_ms"], r.ttft_ms), _err(o["tpot_ms"], r.tpot_ms))
            for key in (f"{r.mode} {r.engine}", group, "all MTP rows"):
                out[key].append(e)
            if spec:
                implied[group].append(o["tokens_per_iteration"] * o["tpot_ms"] / r.tpot_ms)
    print("mean / median |error| of mean TTFT and TPOT, median bias; before = no speculation")
    for key in sorted(after):
        print(_line(f"{key} before", before[key]))
        print(_line(f"{key} after", after[key]))
    print("tokens per decode iteration the rows imply (published: k=1 1.92, k=2 2.58, k=3 2.82)")
    for key in sorted(implied):
        v = implied[key]
        print(f"  {key:<24} median {statistics.median(v):.2f}  range {min(v):.2f}-{max(v):.2f}")


if __name__ == "__main__":
    main()
