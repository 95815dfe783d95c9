"""benchmarks/moe_prefill_probe.py: the diagnostic the "MoE TTFT gap: engine time or not"
section of docs/investigations/serving-moe-prefill.md quotes runs from a clone and prints its
four readings."""

from __future__ import annotations

from tests.benchmark_scripts import run_benchmark


def test_probe_prints_every_reading_for_sglang_deepseek() -> None:
    out = run_benchmark(
        "moe_prefill_probe", "--engines", "sglang", "--model", "DeepSeek", timeout=300
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for variant in ("model as is", "not blocking", "blocking (", "additive eager host"):
        assert any(line.startswith(variant) for line in lines), variant
    # The gap is sized only from the light-load rows and judged on the others.
    assert "judged on the" in lines[0] and "concurrency <= 4" in lines[0]
