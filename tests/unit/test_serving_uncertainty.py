"""Serving error bands: the lookup (costmodel.serving.uncertainty) and their computation
(validation.serving_bands)."""

from __future__ import annotations

import pytest

from gpuscale.api.serving import infer
from gpuscale.costmodel.serving.uncertainty import serving_band
from gpuscale.validation.serving_bands import HELD_OUT, IN_SAMPLE, MIN_ROWS, RunError, regimes

DOC = {
    "validated": {"generations": ["blackwell", "hopper"], "engines": ["sglang", "vllm"]},
    "regimes": {
        "held_out/all": {"rows": 300, "ttft_ms": [0.9, 3.0], "tpot_ms": [0.9, 1.5]},
        "held_out/sglang": {"rows": 200, "ttft_ms": [1.0, 4.0], "tpot_ms": [0.9, 1.7]},
        "held_out/sglang/disagg": {"rows": 150, "ttft_ms": [0.8, 4.2], "tpot_ms": [0.9, 1.6]},
        "in_sample/vllm/agg": {"rows": 400, "ttft_ms": [0.7, 1.9], "tpot_ms": [0.8, 1.2]},
    },
}


def test_held_out_runs_of_the_engine_and_mode_come_first() -> None:
    band = serving_band("sglang", "disaggregated", "blackwell", True, DOC)
    assert band.held_out and band.warnings == ()
    assert band.ratios == {"ttft_ms": (0.8, 4.2), "tpot_ms": (0.9, 1.6)}
    assert band.regime == "held-out sglang disaggregated, 150 runs"


def test_every_step_away_from_the_measured_runs_is_said() -> None:
    # no aggregated sglang regime: the engine's own, and it says which mode it is
    agg = serving_band("sglang", "aggregated", "hopper", True, DOC)
    assert agg.regime == "held-out sglang, 200 runs"
    assert agg.warnings == ("no measured aggregated run of sglang: the band is disaggregated",)
    # no held-out vLLM run: the rows the model was built against, said so
    vllm = serving_band("vllm", "agg", "hopper", False, DOC)
    assert not vllm.held_out and vllm.regime == "in-sample vllm aggregated, 400 runs"
    assert "the band is from the runs the model was built against" in vllm.warnings[0]
    # an engine never measured, on a generation never measured, a dense model
    other = serving_band("atom", "agg", "ampere", False, DOC)
    assert other.regime == "held-out all engines, 300 runs"
    assert len(other.warnings) == 3
    assert "ampere" in other.warnings[0] and "atom" in other.warnings[1]
    assert "mixture-of-experts" in other.warnings[2]


def _run(kind: str, engine: str, ratio: float) -> RunError:
    return RunError(kind, engine, "agg", "hopper", {"ttft_ms": ratio * 100}, {"ttft_ms": 100.0})


def test_a_band_is_the_10th_to_90th_percentile_of_measured_over_predicted() -> None:
    runs = [_run(HELD_OUT, "sglang", 1 + i / 100) for i in range(101)]  # 1.00 .. 2.00
    runs += [_run(IN_SAMPLE, "vllm", 1.0) for _ in range(MIN_ROWS - 1)]  # too few for a band
    out = regimes(runs)
    assert out["held_out/sglang/agg"] == {"rows": 101, "ttft_ms": [1.1, 1.9]}
    assert out["held_out/all"]["ttft_ms"] == [1.1, 1.9]
    assert not any(key.startswith(IN_SAMPLE) for key in out)
    # a metric the runs do not measure gets no band
    assert "tpot_ms" not in out["held_out/sglang"]


@pytest.mark.parametrize(
    ("model", "kw", "regime"),
    [
        (
            "deepseek-ai/DeepSeek-R1",
            {"gpu": "b200", "engine": "sglang", "tp": 8},
            "held-out sglang",
        ),
        ("llama3.1-8b", {"gpu": "h100-sxm", "engine": "vllm"}, "in-sample vllm"),
    ],
)
def test_infer_says_how_far_off_it_was_on_runs_like_this(model, kw, regime) -> None:
    doc = infer(model, concurrency=4, **kw).to_dict()
    band = doc["uncertainty"]
    assert band["regime"].startswith(regime)
    low, high = band["measured_over_predicted_p10_p90"]["tpot_ms"]
    assert 0 < low < 1 < high


def test_the_slo_search_is_an_answer_of_the_package() -> None:
    # gpuscale.infer_search is the function `infer --search` and the web page call
    import gpuscale
    from gpuscale.api import SearchResult
    from gpuscale.api.serving_search import search

    assert gpuscale.infer_search is search
    result = gpuscale.infer_search("llama3.1-8b", gpu="h100-sxm", gpus=8, slo_ttft_ms=500)
    assert isinstance(result, SearchResult) and result.to_dict()["options"]
