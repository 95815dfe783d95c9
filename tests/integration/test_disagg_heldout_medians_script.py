"""benchmarks/disagg_heldout_medians.py: the held-out disaggregated TensorRT-LLM medians split into
light load (the bound on a fixed per-request cost) and clients past the recipe's decode slots, as
quoted in docs/investigations/serving-disaggregated.md."""

from __future__ import annotations

import re

from tests.benchmark_scripts import run_benchmark


def test_script_splits_light_load_from_the_slot_queue() -> None:
    proc = run_benchmark("disagg_heldout_medians", "--limit", "6")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("1. light load (C <= 16, no slot queue)")
    past = out.split("2. clients past the decode slots")[1]
    rows = re.findall(r"^\w+\s+(\d+)\s+(\d+)\s+([\d.]+)\s+\d+\s+(\d+)\s+(\d+)$", past, re.M)
    assert rows
    for conc, slots, ratio, capped, free in rows:
        assert int(conc) > int(slots) and abs(float(ratio) - int(conc) / int(slots)) < 0.01
        # The queue for a slot is TTFT the model without the cap does not have.
        assert int(capped) > int(free)
    assert re.search(r"with the cap +\|e\| mean +[\d.]+% .*\n +without the cap", past)
    spread = re.search(
        r"3\. spread.*\n +(\d+) records: p99 ([\d.]+) +p50 ([\d.]+) +mean ([\d.]+)", out
    )
    assert spread and int(spread.group(1)) > 0
