"""What the model answers, asked through the public API (these used to go through the CLI only
to reach the model; the CLI tests keep parsing, rendering and exit codes)."""

from __future__ import annotations

import pytest

import gpuscale

GB = 1e9
GIB = 2**30

BOUND = {"gpus": 64, "inter": "eth-10", "nics_per_node": 1, "gpu": "a100-sxm-80gb"}


def test_llama_405b_cannot_train_on_one_80gb_card() -> None:
    r = gpuscale.fit("llama3.1-405b", gpu="h100-sxm")
    doc = r.to_dict()
    assert r.fits is False
    # The article's figure: ~810 GB for the bf16 weights alone.
    assert doc["breakdown_gib"]["weights"] * GIB / GB == pytest.approx(811.7, rel=0.01)
    assert doc["headroom_gib"] < -700
    assert r.smallest, "a multi-GPU layout must be proposed"
    assert all(o.gpus >= 11 and o.memory_bytes <= 80 * GIB for o in r.smallest)


def test_llama_405b_cannot_be_served_from_one_80gb_card() -> None:
    r = gpuscale.fit("llama3.1-405b", gpu="a100-sxm-80gb", mode="infer")
    assert r.fits is False
    assert r.memory_bytes["weights"] / GB == pytest.approx(811.7, rel=0.01)
    assert min(o.gpus for o in r.smallest) >= 11


def test_qlora_fits_where_full_finetuning_does_not() -> None:
    common = {"gpu": "rtx-4090", "seq": 2048, "recompute": "full"}
    full = gpuscale.fit("llama3.1-8b", **common)  # type: ignore[arg-type]
    qlora = gpuscale.fit("llama3.1-8b", **common, finetune="qlora", lora_rank=8)  # type: ignore[arg-type]
    assert full.fits is False and qlora.fits is True


def test_bandwidth_bound_job_gets_a_hook_and_its_gain() -> None:
    r = gpuscale.advise_comm("gpt3-350m", **BOUND)  # type: ignore[arg-type]
    rows = r.advice.rows
    assert r.advice.bandwidth_bound is True
    assert r.recommendation is not None
    pick = rows[r.recommendation]
    assert pick.speedup > 1.02
    assert pick.step_s < rows["default"].step_s
    assert f"{pick.speedup:.2f}x" in r.verdict


def test_compute_bound_job_is_told_to_keep_the_default() -> None:
    r = gpuscale.advise_comm("llama3.2-1b", gpus=16, inter="ib-ndr400", seq=8192)
    assert r.advice.bandwidth_bound is False
    assert r.recommendation is None
    assert r.verdict.startswith("not bandwidth-bound")
    # Hidden sync still slows the compute it overlaps, so fewer bytes help, but not enough to
    # pass the advisor's bar.
    assert all(row.speedup < 1.0 + r.min_gain for row in r.advice.rows.values())


def test_hidden_sync_still_pays_when_its_interference_is_large() -> None:
    # BERT-large at seq 8192 on 100 GbE: the all-reduce fits under backward, but it slows a
    # tenth of the step; sending half the bytes clears the advisor's bar.
    r = gpuscale.advise_comm(
        "bert-large", gpus=16, inter="eth-100", seq=8192, mbs=2, gpu="a100-sxm-80gb"
    )
    assert r.advice.bandwidth_bound is False
    assert r.recommendation is not None
    gain = r.advice.rows[r.recommendation].speedup
    assert gain >= 1.0 + r.min_gain
    assert r.verdict.startswith("not bandwidth-bound") and f"{gain:.2f}x" in r.verdict


def test_default_step_is_the_estimate_step() -> None:
    r = gpuscale.advise_comm("gpt3-350m", **BOUND)  # type: ignore[arg-type]
    est = gpuscale.estimate(
        "gpt3-350m",
        gpu="a100-sxm-80gb",
        gpus=64,
        inter="eth-10",
        nics_per_node=1,
        dp=64,
        gbs=64,
        seq=4096,
    )
    assert r.advice.step_s == est.step_time_s
    assert r.advice.rows["default"].step_s == pytest.approx(r.advice.step_s, rel=1e-12)
