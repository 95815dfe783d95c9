"""benchmarks/sglang_blackwell_gap.py: the prefill slope and MTP acceptance readings of the
B200/B300 SGLang held-out records (diagnostic, not shipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "sglang_blackwell_gap.py"


def _bench():  # type: ignore[no-untyped-def]
    return load_benchmark(SCRIPT, "sglang_blackwell_gap")


def test_prefill_rate_is_the_prompt_growth_over_the_ttft_growth() -> None:
    b = _bench()
    # Mean prompts 921.6 and 7372.8 tokens: 6451.2 more in 0.5 s on 4 GPUs.
    assert b.prefill_rate_per_gpu(921.6, 0.1, 7372.8, 0.6, 4) == pytest.approx(6451.2 / 0.5 / 4)
    assert b.prefill_rate_per_gpu(921.6, 0.3, 7372.8, 0.2, 4) == float("inf")


def test_gap_ratio_and_implied_acceptance() -> None:
    b = _bench()
    assert abs(b.LINEAR - 8.0) < 1e-9
    assert b.gap_ratio((200.0, 100.0), (900.0, 100.0)) == pytest.approx(8.0)
    assert b.gap_ratio((90.0, 100.0), (900.0, 100.0)) == float("inf")
    # A TPOT 30% above the model's at its iteration time: E is 1/1.3 of the model's.
    assert b.implied_acceptance(2.58, 5.0, 6.5) == pytest.approx(2.58 / 1.3)


def test_script_prints_the_readings_for_one_deployment(capsys: pytest.CaptureFixture[str]) -> None:
    _bench().main(["--only", r"b300_sglang_fp4_none_agg_tp4ep4_(1024|8192)x1024_c4_"])
    out = capsys.readouterr().out
    assert "b300 fp4 none tp4ep4 2026-04-17" in out
    rate = [line for line in out.splitlines() if line.startswith("  b300 fp4")]
    measured, modelled = (float(v) for v in rate[0].split()[-2:])
    # Read at the prompts the server counted (about 5x the client's, client_tokenizer), the
    # runs prefill faster than the model does, not five times slower as read at the ISL.
    assert modelled < measured < 2.0 * modelled
