"""How much an unstated micro-batch moves each published run's prediction.

    python benchmarks/unstated_microbatch.py [--source megatron] [--json]

For every published training run whose micro-batch its source does not state (the loader then
assumes 1 and says so in the row's assumptions), predict the run again at each micro-batch that
divides the sequences per data-parallel rank (1, 2, 4, 8) and print the error of each, with the
data-parallel sync time of the plan and the part of it the model leaves exposed. A diagnostic,
not a fit: nothing here feeds back into the loader, which keeps its stated assumption. It shows
whether any single micro-batch would make a source's rows consistent, and which rows carry
the assumption's weight (Megatron-Core syncs gradients only during the last micro-batch's
backward, core/pipeline_parallel/schedules.py no_sync_func, so fewer, larger micro-batches
hide more of it).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.step import estimate_plan
from gpuscale.errors import InputError
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import cases, load_all, with_overrides

_MICRO_BATCHES = (1, 2, 4, 8)
_ASSUMED = "micro-batch not stated"


def sweep(source: str) -> list[dict[str, object]]:
    """One entry per run of ``source`` whose micro-batch is assumed: the error (predicted /
    measured - 1) at each micro-batch dividing the per-rank batch, and at micro-batch 1 the
    step, data-parallel sync and exposed data-parallel communication in seconds."""
    mapped, _ = cases(load_all(DATA_DIR))
    out: list[dict[str, object]] = []
    for case in mapped:
        if case.source != source or not any(a.startswith(_ASSUMED) for a in case.assumptions):
            continue
        profile = with_overrides(load_profile(case.framework), case.overrides)
        per_rank = case.plan.global_batch // case.plan.dp
        errors: dict[int, float] = {}
        detail: dict[str, float] = {}
        for mb in _MICRO_BATCHES:
            if per_rank % mb:
                continue
            plan = dataclasses.replace(case.plan, micro_batch=mb)
            try:
                est = estimate_plan(case.model, case.cluster, case.training, plan, profile)
            except InputError:  # e.g. interleaving needs the micro-batch count a multiple of pp
                continue
            predicted = float(est.tokens_per_s[0]) / plan.num_gpus
            errors[mb] = predicted / case.measured_tokens_per_s_per_gpu - 1.0
            if mb == 1:
                detail = {
                    "step_s": float(est.step_time_s[0]),
                    "dp_sync_s": float(est.dp_sync_unhidden_s[0]),
                    "dp_exposed_s": float(est.comm_dp_s[0]),
                }
        measured_step = (
            case.plan.global_batch
            * case.training.seq_len
            / (case.measured_tokens_per_s_per_gpu * case.plan.num_gpus)
        )
        out.append(
            {
                "id": case.id,
                "per_rank": per_rank,
                "errors": errors,
                "measured_step_s": measured_step,
                **detail,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="megatron", help="row-id source (default megatron)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    rows = sweep(args.source)
    if not rows:
        print(f"no run of source {args.source!r} has an assumed micro-batch", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = "".join(f"{'mb=' + str(mb):>9}" for mb in _MICRO_BATCHES)
    print(f"{'row':<34}{'seq/rank':>9}{head}   step(meas/mb1)  DP sync  DP exposed (mb1)")
    for r in rows:
        errors = r["errors"]
        assert isinstance(errors, dict)
        cells = "".join(
            f"{errors[mb]:>+9.1%}" if mb in errors else f"{'-':>9}" for mb in _MICRO_BATCHES
        )
        print(
            f"{r['id']:<34}{r['per_rank']:>9}{cells}   {r['measured_step_s']:5.2f} / "
            f"{r['step_s']:5.2f} s  {r['dp_sync_s']:6.2f} s  {r['dp_exposed_s']:6.2f} s"
        )
    print(
        "errors: predicted/measured - 1 at each micro-batch dividing the sequences per "
        "data-parallel rank; the loader assumes 1 (not stated by the source)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
