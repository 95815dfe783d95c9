"""Serving error bands: the lookup (costmodel.serving.uncertainty) and their computation
(validation.serving_bands)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuscale.api.serving import infer
from gpuscale.costmodel.serving.uncertainty import serving_band
from gpuscale.validation.serving_bands import HELD_OUT, IN_SAMPLE, MIN_ROWS, RunError, regimes


def _regime(rows: int, gens: list[str], modes: list[str], spec: list[bool], ttft: float) -> dict:
    return {
        "rows": rows,
        "generations": gens,
        "models": ["deepseek-r1"],
        "modes": modes,
        "speculative": spec,
        "ttft_ms": [0.9, ttft, 3.0],
        "tpot_ms": [0.9, 1.1, 1.5],
    }


DOC: dict[str, Any] = {
    "regimes": {
        "held_out/all": _regime(300, ["blackwell", "cdna4"], ["agg", "disagg"], [False, True], 1.4),
        "held_out/sglang": _regime(200, ["blackwell"], ["disagg"], [False, True], 1.6),
        "held_out/sglang/disagg": _regime(150, ["blackwell"], ["disagg"], [False, True], 1.5),
        "held_out/sglang/disagg/plain": _regime(100, ["blackwell"], ["disagg"], [False], 1.7),
        "in_sample/sglang/disagg": _regime(40, ["hopper"], ["disagg"], [False], 1.2),
        "in_sample/vllm/agg": _regime(400, ["hopper"], ["agg"], [False], 1.3),
    },
}


def _band(**kw: Any) -> Any:
    given = {
        "engine": "sglang",
        "mode": "disaggregated",
        "generation": "blackwell",
        "model": "deepseek-r1",
        "speculative": False,
        "open_loop": False,
        "data": DOC,
    }
    return serving_band(**{**given, **kw})


def test_held_out_runs_like_the_deployment_come_first() -> None:
    band = _band()
    assert band.held_out and band.warnings == ()
    assert dict(band.ratios)["ttft_ms"] == (0.9, 1.7, 3.0)
    assert band.regime == "held-out sglang disaggregated without MTP, 100 runs"
    # with MTP there is no narrower regime: the engine and mode's, which hold MTP runs
    assert _band(speculative=True).regime == "held-out sglang disaggregated, 150 runs"


def test_the_gpu_generation_picks_the_regime_before_held_out_does() -> None:
    # on a Hopper GPU the rows the model was built against are the runs like it
    band = _band(generation="hopper")
    assert not band.held_out and band.regime == "in-sample sglang disaggregated, 40 runs"
    assert band.warnings == (
        "the band is of runs the model was built against (no held-out sglang disaggregated run "
        "on hopper GPUs)",
    )


def test_every_difference_from_the_bands_runs_is_said() -> None:
    agg = _band(mode="aggregated", generation="ampere", model="llama3.1-8b", open_loop=True)
    assert agg.regime == "held-out sglang, 200 runs"
    text = " | ".join(agg.warnings)
    for said in ("blackwell GPUs, not ampere", "served deepseek-r1, not llama3.1-8b",
                 "disaggregated, not aggregated", "closed-loop"):  # fmt: skip
        assert said in text
    vllm = _band(engine="vllm", mode="agg", generation="hopper")
    assert not vllm.held_out and "disaggregated" not in " ".join(vllm.warnings)
    unknown = _band(engine="atom")
    assert unknown.regime == "held-out all engines, 300 runs"
    assert "no measured run of atom" in unknown.warnings[0]


def _run(kind: str, engine: str, ratio: float, speculative: bool = False) -> RunError:
    return RunError(
        kind=kind,
        engine=engine,
        mode="agg",
        speculative=speculative,
        generation="hopper",
        model="deepseek-r1",
        measured={"ttft_ms": ratio * 100},
        predicted={"ttft_ms": 100.0},
    )


def test_a_band_is_the_10th_50th_90th_percentile_of_measured_over_predicted() -> None:
    runs = [_run(HELD_OUT, "sglang", 1 + i / 100) for i in range(101)]  # 1.00 .. 2.00
    runs += [_run(IN_SAMPLE, "vllm", 1.0) for _ in range(MIN_ROWS - 1)]  # too few for a band
    out = regimes(runs)
    assert out["held_out/sglang/agg/plain"]["ttft_ms"] == [1.1, 1.5, 1.9]
    assert out["held_out/all"]["rows"] == 101
    assert out["held_out/all"]["speculative"] == [False]
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
    low, mid, high = band["measured_over_predicted_p10_p50_p90"]["tpot_ms"]
    assert 0 < low < 1 < high and low <= mid <= high


def test_a_deployment_that_does_not_fit_has_no_band() -> None:
    doc = infer("llama3.1-405b", gpu="h100-sxm", engine="vllm", concurrency=4).to_dict()
    assert doc["options"][0]["fits"] is False and doc["uncertainty"] == {}


def test_the_slo_search_is_an_answer_of_the_package() -> None:
    # gpuscale.infer_search is the function `infer --search` and the web page call
    import gpuscale
    from gpuscale.api import SearchResult
    from gpuscale.api.serving_search import search

    assert gpuscale.infer_search is search
    result = gpuscale.infer_search("llama3.1-8b", gpu="h100-sxm", gpus=8, slo_ttft_ms=500)
    assert isinstance(result, SearchResult) and result.to_dict()["options"]


def test_a_generation_with_enough_runs_has_its_own_band() -> None:
    doc = {"regimes": {**DOC["regimes"], "held_out/sglang/disagg/plain/cdna4": _regime(
        30, ["cdna4"], ["disagg"], [False], 2.5)}}  # fmt: skip
    band = _band(generation="cdna4", data=doc)
    assert band.regime == "held-out sglang disaggregated without MTP on cdna4 GPUs, 30 runs"
    assert band.warnings == () and dict(band.ratios)["ttft_ms"][1] == 2.5
    # the other generations keep the pooled band
    assert _band(data=doc).regime == "held-out sglang disaggregated without MTP, 100 runs"
