"""benchmarks/validate_bridge.py, the held-out training figure docs/benchmarks.md quotes
("Held-out training runs: Megatron-Bridge"), runs from a clone and prints its summary."""

from __future__ import annotations

import json
import re

from tests.benchmark_scripts import run_benchmark


def test_prints_the_summary_and_the_spread() -> None:
    out = run_benchmark("validate_bridge", "--spread")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "rows: 282, predicted: 218, not expressible: 64" in text
    for label in ("all ", "dense (Llama 3)", "MoE ", "latest release (26.08)", "by release:"):
        assert label in text
    m = re.search(r"^dense \(Llama 3\)\s+n=\s*(\d+)\s+mean\s+([\d.]+)%", text, re.M)
    assert m and int(m.group(1)) == 89
    assert "same recipe in several releases" in text
    assert re.search(r"Qwen3_30B_a3B\s+DGX-GB200\s+mxfp8\s+releases\s+8\s+x1\.72", text)


def test_json_matches_the_text() -> None:
    out = run_benchmark("validate_bridge", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["rows"] == 282 and data["predicted"] == 218
    assert data["dense"]["n"] + data["moe"]["n"] == 218
    assert len(data["skipped"]) == 64
    assert data["memory_checked"] + sum(data["memory_not_checked"].values()) == 218
    assert 0 <= data["ran_but_not_fit"] <= data["memory_checked"]
    assert 0 <= data["ran_but_not_fit_allocated_within_card"] <= data["ran_but_not_fit"]


def test_memory_line_counts_checked_and_unchecked_runs() -> None:
    out = run_benchmark("validate_bridge")
    assert out.returncode == 0, out.stderr
    m = re.search(r"^memory: (\d+) of (\d+) runs .* fit .*; (\d+) not checked:", out.stdout, re.M)
    assert m and int(m.group(2)) + int(m.group(3)) == 218
    assert "MoE paged stash" in out.stdout
    within = re.search(r"of the (\d+) that would not, (\d+) hold their allocated", out.stdout)
    assert within and int(within.group(2)) <= int(within.group(1))
