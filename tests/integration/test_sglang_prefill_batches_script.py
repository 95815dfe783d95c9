"""benchmarks/sglang_prefill_batches.py: SGLang 0.5.x prefill batches of the gap-analysis
bursts and the prefill time they imply (figures quoted in
docs/investigations/serving-moe-prefill.md)."""

from __future__ import annotations

import re
import statistics
import sys

from tests.benchmark_scripts import ROOT, run_benchmark

ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+) \|\s+(\d+) x (\d+)\s+tok\s+(\d+)\s+([\d.]+) \|"
    r"\s+(\d+)\s+(\d+)\s+(\d+) \|\s+(\d+) \|"
)


def test_batching_rule_of_sglang_05() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sglang_prefill_batches import batches, factor

    # --max-prefill-tokens 2500 (isl 1000 + 1500): 0.5.x starts two per batch (the third's 1000
    # tokens reach the 500 left), the later rule three; 4000-token prompts run one by one.
    assert batches(1000, 9, 2500, strict=True) == [2, 2, 2, 2, 1]
    assert batches(1000, 9, 2500, strict=False) == [3, 3, 3]
    assert batches(4000, 3, 5500, strict=True) == [1, 1, 1]
    assert factor([1, 1, 1]) == 2.0 and factor([2, 2]) == 1.5


def test_implied_prefill_time_agrees_across_prompt_lengths_for_the_same_batch() -> None:
    out = run_benchmark("sglang_prefill_batches")
    assert out.returncode == 0, out.stderr
    rows = [m for m in map(ROW.match, out.stdout.splitlines()) if m]
    assert len(rows) == 24  # Qwen3-235B-A22B-FP8, TP2 and TP4
    for tp in ("2", "4"):
        # 2000-token batches: two 1000-token prompts or one 2000-token prompt.
        pairs = [int(m.group(10)) for m in rows if m.group(1) == tp and m.group(2) == "1000"]
        singles = [int(m.group(10)) for m in rows if m.group(1) == tp and m.group(2) == "2000"]
        ratio = statistics.median(singles) / statistics.median(pairs)
        assert 0.9 < ratio < 1.35, (tp, pairs, singles)
    # The modelled batch time is far below the implied one (the miss is the prefill itself).
    assert all(int(m.group(12)) < int(m.group(10)) for m in rows)


def test_unknown_model_is_one_line_exit_2() -> None:
    out = run_benchmark("sglang_prefill_batches", "--model", "no-such-model")
    assert out.returncode == 2
    assert "no SGLang 0.5.6.post2" in out.stderr and "Traceback" not in out.stderr
