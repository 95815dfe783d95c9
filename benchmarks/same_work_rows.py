"""Published data-parallel runs that repeat the same per-GPU work: how far each is from its group.

    python benchmarks/same_work_rows.py [--source llmfoundry] [--json]

Under PyTorch FSDP (FULL_SHARD or SHARD_GRAD_OP) without tensor or pipeline parallelism, every
GPU runs each micro-batch of ``micro_batch`` sequences through the whole model and every
micro-batch pays its own gathers and reduce-scatters (FULL_SHARD; SHARD_GRAD_OP reduces every
micro-batch too), so one micro-batch is the same work at any GPU count, up to the ring's latency
and bandwidth over more nodes. Its measured time is ``micro_batch * seq / (tokens/s/GPU)``.

Rows of one source are grouped by what fixes that work (model, sequence length, micro-batch,
sharding, recompute, precision column, GPU family; GPUs of one family with different memory are
different clusters in these tables and are printed side by side, not mixed into one median).
Each row is printed with its time per micro-batch, its distance from the median of rows of the
same GPU in its group, and the model's predicted time per micro-batch (the shipped profile, no
calibration). A row far from rows that ran the same work with the same launch is a measurement
the model cannot be asked to reproduce: nothing in the plan differs. A diagnostic: it changes
no row and fits nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict

from gpuscale.costmodel.profile import load_profile
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import Case, cases, load_all, predict, source_of

_KEY_COLUMNS = ("model", "seq_len", "micro_batch", "sharding", "recompute", "precision")


def _family(gpu: str) -> str:
    """``A100-40GB`` -> ``A100``: one GPU family, whatever its memory."""
    return gpu.split("-")[0].split(" ")[0]


def groups(source: str) -> list[dict[str, object]]:
    """Groups of at least two data-parallel-only rows of ``source`` with the same work per
    micro-batch, each row with its measured and predicted seconds per micro-batch."""
    mapped, _ = cases(load_all(DATA_DIR))
    by_id: dict[str, Case] = {c.id: c for c in mapped}
    grouped: dict[tuple[str, ...], list[dict[str, object]]] = defaultdict(list)
    for row in load_all(DATA_DIR):
        if source_of(row["id"]) != source or row["id"] not in by_id:
            continue
        if row["tp"] not in ("", "1") or row["pp"] not in ("", "1"):
            continue
        if "FSDP" not in row["sharding"] or not row["micro_batch"].strip():
            continue
        case = by_id[row["id"]]
        per_mb = case.plan.micro_batch * case.training.seq_len
        predicted = predict(case, load_profile(case.framework))
        key = (_family(row["gpu"]), *(row[c] for c in _KEY_COLUMNS))
        grouped[key].append(
            {
                "id": row["id"],
                "gpu": row["gpu"],
                "n_gpus": case.plan.num_gpus,
                "global_batch": case.plan.global_batch,
                "measured_s_per_mb": per_mb / case.measured_tokens_per_s_per_gpu,
                "predicted_s_per_mb": per_mb / predicted,
            }
        )
    out: list[dict[str, object]] = []
    for key, members in grouped.items():
        if len(members) < 2:
            continue
        for member in members:
            same_gpu = [m["measured_s_per_mb"] for m in members if m["gpu"] == member["gpu"]]
            median = statistics.median(same_gpu)  # type: ignore[type-var]
            member["from_median"] = float(member["measured_s_per_mb"]) / float(median) - 1.0  # type: ignore[arg-type]
            member["same_gpu_rows"] = len(same_gpu)
        out.append({"key": dict(zip(("family", *_KEY_COLUMNS), key, strict=True)), "rows": members})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="llmfoundry", help="row-id source (default llmfoundry)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    found = groups(args.source)
    if not found:
        print(
            f"source {args.source!r} has no two FSDP data-parallel rows with the same work per "
            "micro-batch",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    for group in found:
        k = group["key"]
        assert isinstance(k, dict)
        print(
            f"{k['family']} {k['model']}, seq {k['seq_len']}, micro-batch {k['micro_batch']}, "
            f"{k['sharding']}, recompute {k['recompute']}"
        )
        members = group["rows"]
        assert isinstance(members, list)
        for m in members:
            away = f"{m['from_median']:+6.1%}" if m["same_gpu_rows"] > 1 else f"{'-':>6}"
            print(
                f"  {m['id']:<38} {m['gpu']:<10} {m['n_gpus']:>4} GPUs  measured "
                f"{m['measured_s_per_mb']:7.3f} s/mb ({away} vs its GPU's median)  "
                f"predicted {m['predicted_s_per_mb']:7.3f} s/mb"
            )
    print(
        "s/mb: seconds per micro-batch per GPU = micro_batch * seq / tokens/s/GPU; predicted: "
        "shipped profile, no calibration"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
