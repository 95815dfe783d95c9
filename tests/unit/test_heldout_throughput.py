"""benchmarks/heldout_throughput.py: the model's output rate against the client's on the
held-out records, by engine, mode and queueing (diagnostic, not shipped)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "heldout_throughput.py"


def _bench():  # type: ignore[no-untyped-def]
    return load_benchmark(SCRIPT, "heldout_throughput")


def test_ratios_are_quartiles_per_key() -> None:
    out = _bench().ratios([("a", 1.0), ("a", 2.0), ("a", 3.0), ("b", 0.5)])
    assert out["a"]["n"] == 3 and out["a"]["median"] == pytest.approx(2.0)
    assert out["a"]["p25"] <= out["a"]["median"] <= out["a"]["p75"]
    assert out["b"] == {"n": 1, "p25": 0.5, "median": 0.5, "p75": 0.5}


def test_rows_exclude_the_seen_gpus_and_records_without_a_rate() -> None:
    rows = _bench().rows()
    assert rows and all(r.hardware not in ("h100", "h200") for r in rows)
    assert all(r.measured["output_tokens_per_s"] > 0 for r in rows)
    # The 2025-10-06 MI355X records predate InferenceX's output-rate field.
    assert not any(r.record["date"] == "2025-10-06" for r in rows)


def test_script_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    _bench().main(["--limit", "60"])
    out = capsys.readouterr().out
    assert "model / client" in out and "SGLang runs that queued" in out
    assert "trtllm" in out and "model/measured median" in out
