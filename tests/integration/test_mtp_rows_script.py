"""benchmarks/mtp_rows.py: the MTP rows' figures quoted in
docs/investigations/serving-rows-and-clients.md (branch `mtp`)."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark

LINE = re.compile(
    r"^(.+?) (before|after)\s+n=\s*(\d+)\s+TTFT\s+([\d.]+) /\s+([\d.]+)%\s+TPOT\s+([\d.]+) /"
    r"\s+([\d.]+)%"
)


def test_mtp_rows_tpot_error_falls_with_speculation() -> None:
    out = run_benchmark("mtp_rows")
    assert out.returncode == 0, out.stderr
    got: dict[tuple[str, str], tuple[int, float, float]] = {}
    for m in map(LINE.match, out.stdout.splitlines()):
        if m:
            got[(m.group(1).strip(), m.group(2))] = (
                int(m.group(3)),
                float(m.group(6)),
                float(m.group(7)),
            )
    # 46 distinct measurements ran MTP: 22 aggregated, 20 disaggregated TensorRT-LLM and 4
    # disaggregated SGLang (branch disagg-read: the H200 c1 MTP recipe at 13, and the SGLang
    # rows whose one entry is an MTP recipe whose file gives its draft steps). Each run counts
    # once: the gap-analysis and db-dump records of an InferenceX run are folded
    # (``serving_runs.distinct``).
    assert got[("all MTP rows", "after")][0] == 46
    assert got[("agg trtllm", "after")][0] == 22 and got[("disagg trtllm", "after")][0] == 20
    assert got[("disagg sglang", "after")][0] == 4
    # the mean TPOT error falls by more than a third (40.5% -> 25.2%; the four SGLang rows
    # imply 1.11 tokens per step and get worse); the MTP 3 rows fall below 15%
    assert got[("all MTP rows", "after")][1] < 0.65 * got[("all MTP rows", "before")][1]
    assert got[("agg trtllm k=3", "after")][1] < 15.0
    assert "tokens per decode iteration the rows imply" in out.stdout
