"""Disaggregated rows of the public serving data with a stated or twin deployment: the error
bound the figures in docs/investigations/serving-disaggregated.md ("Disaggregated rows: the
client and the recipes")
quote. Before the sa-bench client and the recipes' decode caps the mean TTFT error was 61%."""

from __future__ import annotations

import statistics

from gpuscale.api import infer
from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import RECIPE, STATED, TWIN, load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _errors(kinds: tuple[str, ...]) -> tuple[list[float], list[float]]:
    ttft, tpot = [], []
    for row in load(ROWS):
        if row.mode != "disagg" or row.kind not in kinds:
            continue
        o = infer(row.raw["model_path"], **row.kwargs).to_dict()["options"][0]
        ttft.append(abs(o["ttft_ms"] - row.ttft_ms) / row.ttft_ms)
        tpot.append(abs(o["tpot_ms"] - row.tpot_ms) / row.tpot_ms)
    return ttft, tpot


def test_stated_and_twin_rows_within_the_recorded_error() -> None:
    ttft, tpot = _errors((STATED, TWIN))
    assert len(ttft) == 90
    # 36.1% / 10.2% mean (branch disagg-ttft: the capacity resolved between grid throughputs
    # exposes the H100 decode-slot rows' TPOT miss; branch grid-cap resolves it to 1e-6, not
    # 0.5%: 36.9% -> 37.1%; branch disagg-ttft of 2026-12-02 follows the sa-bench closed loop
    # request by request: 36.9% -> 36.1%); the bound leaves room for other cost terms
    assert statistics.fmean(ttft) < 0.38
    assert statistics.fmean(tpot) < 0.15


def test_rows_read_from_the_configuration_are_predicted() -> None:
    ttft, tpot = _errors((RECIPE,))
    # 11 non-speculative recipes and 29 rows whose only entry is one TensorRT-LLM MTP recipe
    # (branch mtp: read as MTP with the recipe's draft count); branch disagg-read: 14 more (8
    # measurements): the H200 TensorRT-LLM min-latency c1 recipes of the run dates (4 rows at
    # 11, 4 at 13) and 6 SGLang rows whose one entry, with the export's prefill TP/EP, is an
    # MTP recipe whose file gives its draft count
    assert len(ttft) == 54
    assert all(e == e and e < 1.0 for e in ttft + tpot)  # finite, within 100%
