"""benchmarks/unstated_microbatch.py: the micro-batch sensitivity quoted in
docs/investigations/training-throughput.md ("Megatron README H100 rows")."""

from __future__ import annotations

import json
import subprocess

from gpuscale.costmodel.profile import load_profile
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import cases, load_all, predict
from tests.benchmark_scripts import run_benchmark


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_benchmark("unstated_microbatch", *args)


def test_megatron_rows_at_the_assumed_micro_batch_match_the_validation() -> None:
    out = _run("--source", "megatron", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)}
    # The nine weak-scaling rows; the two strong-scaling rows are skipped (TP/PP not stated).
    assert len(rows) == 9 and all(i.startswith("megatron-readme-h100-") for i in rows)
    mapped, _ = cases(load_all(DATA_DIR))
    for case in mapped:
        if case.id not in rows:
            continue
        assert case.plan.micro_batch == 1  # the loader's stated assumption is unchanged
        at_one = rows[case.id]["errors"]["1"]
        expected = predict(case, load_profile(case.framework)) / case.measured_tokens_per_s_per_gpu
        assert abs(at_one - (expected - 1.0)) < 1e-9
        # Only micro-batches dividing the sequences per data-parallel rank are tried.
        assert all(rows[case.id]["per_rank"] % int(mb) == 0 for mb in rows[case.id]["errors"])
        assert 0 <= rows[case.id]["dp_exposed_s"] <= rows[case.id]["step_s"]


def test_a_source_without_assumed_micro_batches_is_one_line_and_exit_2() -> None:
    out = _run("--source", "torchtitan")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "torchtitan" in out.stderr
