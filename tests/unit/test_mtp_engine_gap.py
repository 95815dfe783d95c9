"""benchmarks/mtp_engine_gap.py: MTP's measured speedup over the same deployment without it,
against the modelled one, by engine (held-out set; diagnostic, not shipped)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "mtp_engine_gap.py"
H200_C1 = r"dsr1_h200_dynamo-sglang_fp8_(mtp|none)_disagg_1xtp8ep1-9xtp8ep1_1024x1024_c1_"
"""One H200 Dynamo-SGLang deployment at concurrency 1, run with and without MTP (2 drafts)."""


def _bench() -> ModuleType:
    return load_benchmark(SCRIPT, "mtp_engine_gap")


def test_speedup_ratio_and_implied_tokens() -> None:
    b = _bench()
    measured, modelled, ratio = b.speedup_ratio(9.0, 6.0, 8.0, 4.0)
    assert (measured, modelled) == pytest.approx((1.5, 2.0))
    assert ratio == pytest.approx(0.75)
    # A TPOT 30% above the model's at its iteration time: E is 1/1.3 of the model's.
    assert b.implied_tokens(2.58, 5.0, 6.5) == pytest.approx(2.58 / 1.3)


def test_twin_key_leaves_out_the_speculative_method() -> None:
    b = _bench()
    rec = {f: "x" for f in b.TWIN_FIELDS}
    assert b.twin_key({**rec, "spec_method": "mtp"}) == b.twin_key({**rec, "spec_method": "none"})
    assert b.twin_key(rec) != b.twin_key({**rec, "conc": "y"})


def test_pairs_an_mtp_run_with_its_plain_twin() -> None:
    data = _bench().readings(H200_C1)
    assert list(data) == ["h200 dynamo-sglang disagg k2"]
    g = data["h200 dynamo-sglang disagg k2"]
    assert g["e_model"] == pytest.approx(2.58)
    ((conc, measured, modelled, ratio),) = g["speedup"]
    assert conc == 1
    # The run gained 1.12x from MTP; the model, at the published E, more than twice that.
    assert measured == pytest.approx(8.923 / 7.965, rel=1e-3)
    assert modelled > 2.0
    assert ratio < 0.6
