"""Where the serving model's TTFT misses at light load (issue 10: "TTFT too short where no
queue explains it").

At concurrency 1-4 a request waits for almost nothing: its TTFT is its prompt's prefill (with
the few requests of its cohort) plus fixed per-request overheads. This script reads the
aggregated rows of ``data/validation/serving`` at ``--max-concurrency`` or less and prints,
per engine and architecture and then per deployment:

- measured mean TTFT, the model's TTFT at the row's concurrency, and the model's TTFT for
  one request alone on the same deployment (``concurrency=1``: one prefill + the engine's
  request overhead, nothing to wait for);
- how the measured and the modelled TTFT scale with the tensor-parallel size at a fixed
  model, GPU, lengths and concurrency (``--tp-scaling``): a per-request fixed overhead would
  not shrink with TP, a compute-bound prefill shrinks about 1/TP;
- how they scale with the prompt length at a fixed deployment (``--isl-scaling``);
- with ``--excess``: measured and modelled TTFT as a line over the prompt length at a fixed
  deployment (least squares over its ISLs): the intercept is the part that does not grow with
  the prompt, the slope the prefill rate; the measured intercept beyond the model's is also
  given per decoder layer (a per-layer host or launch cost would show as a constant there);
- with ``--disagg``: the disaggregated rows whose deployment is stated (or known from a twin
  row), at every concurrency, with the model's TTFT for one request on the same prefill and
  decode workers.

It changes nothing in the model; the figures are the evidence for
docs/investigations/serving-moe-prefill.md ("Serving TTFT at light load").

    PYTHONPATH=src python benchmarks/ttft_light_load.py [--max-concurrency 4] [--tp-scaling]
        [--isl-scaling] [--excess] [--disagg]
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import ServingRow, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _ttft(row: ServingRow, **over: Any) -> float:
    kw = {**row.kwargs, **over}
    return float(infer(row.raw["model_path"], **kw).to_dict()["options"][0]["ttft_ms"])


def _layers(model: str) -> int:
    try:
        return catalog.model(model).num_layers
    except InputError:
        return 0


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept, slope) of the least-squares line through the points (x, y)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0.0:
        raise ValueError("a line needs at least two distinct x values")
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def _arch(model: str) -> str:
    try:
        return "moe" if catalog.model(model).is_moe else "dense"
    except InputError:
        return "?"


def _short(model: str) -> str:
    return model.split("/")[-1][:20]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-concurrency", type=int, default=4)
    ap.add_argument("--tp-scaling", action="store_true", help="measured vs modelled TTFT over TP")
    ap.add_argument("--isl-scaling", action="store_true", help="measured vs modelled over ISL")
    ap.add_argument(
        "--excess", action="store_true", help="TTFT over ISL split into intercept and slope"
    )
    ap.add_argument("--disagg", action="store_true", help="the expressible disaggregated rows")
    args = ap.parse_args()
    if args.disagg:
        disagg()
        return
    rows = [
        r
        for r in load(ROWS)
        if r.mode == "agg" and r.expressible and r.concurrency <= args.max_concurrency
    ]
    seen: set[tuple[Any, ...]] = set()
    recs: list[dict[str, Any]] = []
    for r in rows:
        key = (r.raw["model_path"], r.engine, repr(sorted(r.kwargs.items())), r.ttft_ms)
        if key in seen:  # DeepSeek-R1/V3 rows repeat the same run under both names
            continue
        seen.add(key)
        recs.append(
            {
                "engine": r.engine,
                "arch": _arch(r.raw["model_path"]),
                "layers": _layers(r.raw["model_path"]),
                "model": _short(r.raw["model_path"]),
                "gpu": r.raw["system"].split("_")[0],
                "quant": r.raw["gemm_quant_mode"],
                "tp": r.kwargs.get("tp", 1),
                "ep": r.kwargs.get("ep", 1),
                "dp": r.kwargs.get("attention_dp", 1),
                "isl": int(r.raw["isl"]),
                "osl": int(r.raw["osl"]),
                "c": r.concurrency,
                "meas": r.ttft_ms,
                "pred": _ttft(r),
                "alone": _ttft(r, concurrency=1),
            }
        )
    print(
        f"aggregated rows at concurrency <= {args.max_concurrency}: {len(recs)} distinct runs\n"
        "alone = the model's TTFT for one request on the same deployment (one prefill + fixed "
        "overheads)\n"
    )
    print(
        f"{'engine':>7} {'arch':>5} {'n':>3}  {'meas ms':>8} {'pred ms':>8} {'alone ms':>8}  "
        f"{'meas/pred':>9} (median)  {'meas-pred ms':>12} (median)"
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        groups[(x["engine"], x["arch"])].append(x)
    for (eng, arch), xs in sorted(groups.items()):
        ratio = [x["meas"] / x["pred"] for x in xs]
        diff = [x["meas"] - x["pred"] for x in xs]
        print(
            f"{eng:>7} {arch:>5} {len(xs):3d}  {statistics.fmean(x['meas'] for x in xs):8.1f} "
            f"{statistics.fmean(x['pred'] for x in xs):8.1f} "
            f"{statistics.fmean(x['alone'] for x in xs):8.1f}  "
            f"{statistics.median(ratio):9.2f}           {statistics.median(diff):12.1f}"
        )
    print()
    for x in sorted(recs, key=lambda x: (x["engine"], x["model"], x["gpu"], x["tp"], x["isl"])):
        print(
            f"{x['engine']:>7} {x['model']:20} {x['gpu']} {x['quant']:9} tp={x['tp']:<2} "
            f"ep={x['ep']:<2} dp={x['dp']:<2} isl={x['isl']:<5} osl={x['osl']:<5} c={x['c']}  "
            f"meas {x['meas']:7.1f}  pred {x['pred']:7.1f}  alone {x['alone']:7.1f}  "
            f"ratio {x['meas'] / x['pred']:5.2f}"
        )
    if args.tp_scaling:
        print("\nTP scaling (TTFT at each TP / TTFT at the smallest TP; ep = dp = 1):")
        same_tp = ("engine", "model", "gpu", "quant", "isl", "osl", "c")
        flat = [x for x in recs if x["ep"] == 1 and x["dp"] == 1]
        scaling(flat, "tp", same_tp, lambda k: f"isl={k[4]:<5} osl={k[5]:<5} c={k[6]}")
    if args.isl_scaling:
        print("\nISL scaling (TTFT at each ISL / TTFT at the smallest ISL):")
        same_isl = ("engine", "model", "gpu", "tp", "ep", "dp", "osl", "c")
        scaling(recs, "isl", same_isl, lambda k: f"tp={k[3]} osl={k[6]:<5} c={k[7]}")
    if args.excess:
        excess(recs)


def scaling(
    recs: list[dict[str, Any]],
    vary: str,
    same: tuple[str, ...],
    label: Callable[[tuple[Any, ...]], str],
) -> None:
    """Measured and modelled TTFT at each value of ``vary`` over that at its smallest value,
    for rows equal in every ``same`` field (the first three name the engine, model and GPU)."""
    by: dict[tuple[Any, ...], dict[int, list[dict[str, Any]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for x in recs:
        by[tuple(x[f] for f in same)][x[vary]].append(x)
    for k, groups in sorted(by.items()):
        if len(groups) < 2:
            continue
        base = min(groups)
        m0 = statistics.fmean(x["meas"] for x in groups[base])
        p0 = statistics.fmean(x["pred"] for x in groups[base])
        cells = "  ".join(
            f"{vary}{v}: meas {statistics.fmean(x['meas'] for x in xs) / m0:4.2f} "
            f"pred {statistics.fmean(x['pred'] for x in xs) / p0:4.2f}"
            for v, xs in sorted(groups.items())
        )
        print(f"{k[0]:>7} {k[1]:20} {k[2]} {label(k)}  {cells}")


def excess(recs: list[dict[str, Any]]) -> None:
    """Measured and modelled TTFT as intercept + slope x ISL per deployment and concurrency."""
    print(
        "\nTTFT = intercept + slope x ISL (least squares over the ISLs of one deployment and "
        "concurrency):\n"
        f"{'engine':>7} {'model':20} {'gpu':4} {'tp':>3} {'ep':>3} {'c':>2} {'ISLs':>10}  "
        f"{'meas: ms + ms/1k':>18}  {'model: ms + ms/1k':>18}  {'excess ms/layer':>15}"
    )
    by: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for x in recs:
        k = (x["engine"], x["model"], x["gpu"], x["quant"], x["tp"], x["ep"], x["dp"], x["c"])
        by[k].append(x)
    for k, xs in sorted(by.items()):
        isls = sorted({x["isl"] for x in xs})
        if len(isls) < 2:
            continue
        m0, m1 = line_fit([float(x["isl"]) for x in xs], [x["meas"] for x in xs])
        p0, p1 = line_fit([float(x["isl"]) for x in xs], [x["pred"] for x in xs])
        layers = xs[0]["layers"]
        per_layer = (m0 - p0) / layers if layers else float("nan")
        print(
            f"{k[0]:>7} {k[1]:20} {k[2]:4} {k[4]:3d} {k[5]:3d} {k[7]:2d} "
            f"{isls[0]:>5}-{isls[-1]:<5} {m0:8.1f} + {m1 * 1e3:7.1f}  "
            f"{p0:8.1f} + {p1 * 1e3:7.1f}  {per_layer:15.2f}"
        )


def disagg() -> None:
    """Measured vs modelled TTFT of the expressible disaggregated rows, every concurrency."""
    seen: set[tuple[Any, ...]] = set()
    print("disaggregated rows (stated or twin); alone = one request on the same workers")
    for r in sorted(
        (r for r in load(ROWS) if r.mode == "disagg" and r.expressible),
        key=lambda r: (r.engine, r.raw["model_path"], int(r.raw["isl"]), r.concurrency),
    ):
        key = (r.engine, repr(sorted(r.kwargs.items())), r.ttft_ms)
        if key in seen:
            continue
        seen.add(key)
        kw = r.kwargs
        pred, alone = _ttft(r), _ttft(r, concurrency=1)
        print(
            f"{r.engine:>7} {_short(r.raw['model_path']):20} isl={r.raw['isl']:<5} "
            f"osl={r.raw['osl']:<5} c={r.concurrency:<5} "
            f"P{kw.get('prefill_workers')}xTP{kw.get('prefill_tp')} "
            f"D{kw.get('decode_workers')}xTP{kw.get('decode_tp')}"
            f"/dp{kw.get('decode_attention_dp', 1)}  meas {r.ttft_ms:8.1f}  pred {pred:8.1f}  "
            f"alone {alone:7.1f}  meas-alone {r.ttft_ms - alone:8.1f}"
        )


if __name__ == "__main__":
    main()
