"""gpuscale.validation.serving_rows: what deployment each measured serving row is read as."""

from __future__ import annotations

import pytest

from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_rows import NOT_EXPRESSIBLE, STATED, TWIN, load, read_rows

FIELDS = [
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "prefill_batch_size",
    "prefill_num_workers",
    "prefill_tp_size",
    "prefill_pp_size",
    "prefill_attention_dp_size",
    "prefill_moe_tp_size",
    "prefill_moe_ep_size",
    "decode_batch_size",
    "decode_num_workers",
    "decode_tp_size",
    "decode_pp_size",
    "decode_attention_dp_size",
    "decode_moe_tp_size",
    "decode_moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]


def _row(**kw: str) -> dict[str, str]:
    r = dict.fromkeys(FIELDS, "")
    r.update(
        id="r",
        silicon_data_source="x=1",
        backend="trtllm",
        model_path="deepseek-ai/DeepSeek-R1",
        system="h200_sxm",
        mode="disagg",
        isl="1024",
        osl="1024",
        gemm_quant_mode="fp8",
        prefill_tp_size="8",
        prefill_moe_ep_size="8",
        decode_tp_size="8",
        decode_moe_ep_size="8",
        silicon_ttft_ms="1000.0",
        silicon_tpot_ms="20.0",
    )
    r.update(kw)
    return r


def _named(**kw: str) -> dict[str, str]:
    return _row(
        id="named",
        prefill_num_workers="2",
        prefill_batch_size="1",
        decode_num_workers="3",
        decode_tp_size="1",
        decode_attention_dp_size="8",
        decode_batch_size="4",
        **kw,
    )


def test_named_row_keeps_its_workers_and_drops_the_prefill_batch() -> None:
    (row,) = read_rows([_named(silicon_data_source="silicon_concurrency=96")])
    assert row.kind == STATED and row.expressible
    assert row.concurrency == 96
    kw = row.kwargs
    assert (kw["prefill_workers"], kw["prefill_tp"], kw["prefill_ep"]) == (2, 8, 8)
    # decode: tp 1 x attention-DP 8 = 8 GPUs per worker, 4 running requests per rank
    assert (kw["decode_workers"], kw["decode_tp"], kw["decode_attention_dp"]) == (3, 8, 8)
    # AIConfigurator's batch sizes are its modelling inputs (prefill 1; decode = concurrency /
    # (workers x attention-DP)), not engine caps
    assert "prefill_batch" not in kw and "decode_batch" not in kw


def test_row_without_concurrency_is_not_expressible_and_guessed_as_aiconfigurator_reads_it() -> (
    None
):
    (row,) = read_rows([_named()])
    assert row.kind == NOT_EXPRESSIBLE and row.kwargs == {}
    assert "concurrency not stated" in row.reason
    # the comparison reading: decode batch 4 x 3 decode workers x 8 attention-DP ranks
    assert row.guess["concurrency"] == 4 * 3 * 8
    assert row.guess["decode_workers"] == 3 and row.guess["prefill_workers"] == 2


def test_twin_takes_the_named_rows_deployment() -> None:
    named = _named(silicon_data_source="silicon_concurrency=96")
    twin = _row(id="twin", silicon_data_source="silicon_concurrency=96")
    rows = {r.id: r for r in read_rows([twin, named])}
    assert rows["twin"].kind == TWIN
    assert rows["twin"].kwargs["decode_workers"] == 3
    assert rows["twin"].kwargs["decode_attention_dp"] == 8
    assert any("named" in a for a in rows["twin"].assumptions)


@pytest.mark.parametrize(
    "change",
    [
        {"silicon_ttft_ms": "1000.5"},  # a different measurement
        {"silicon_data_source": "silicon_concurrency=48"},  # another load point
        {"isl": "8192"},
        {"backend": "sglang"},
    ],
)
def test_row_without_workers_or_identical_twin_is_not_expressible(change: dict[str, str]) -> None:
    named = _named(silicon_data_source="silicon_concurrency=96")
    lone = _row(id="lone", **{"silicon_data_source": "silicon_concurrency=96", **change})
    rows = {r.id: r for r in read_rows([lone, named])}
    assert rows["lone"].kind == NOT_EXPRESSIBLE and not rows["lone"].expressible
    assert rows["lone"].kwargs == {}
    assert "worker counts not stated" in rows["lone"].reason
    # compared, apart, as one worker of each kind
    assert rows["lone"].guess["prefill_workers"] == rows["lone"].guess["decode_workers"] == 1


def test_aggregated_rows_are_stated() -> None:
    agg = _row(mode="agg", batch_size="16", tp_size="8", moe_tp_size="1", moe_ep_size="8")
    (row,) = read_rows([agg])
    assert row.kind == STATED and row.concurrency == 16
    assert (row.kwargs["tp"], row.kwargs["ep"], row.kwargs["pp"]) == (8, 8, 1)
    assert "decode_workers" not in row.kwargs


def test_public_rows_classes() -> None:
    rows = load(DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv")
    disagg = [r for r in rows if r.mode == "disagg"]
    assert all(r.kind == STATED for r in rows if r.mode == "agg")
    kinds = {k: sum(r.kind == k for r in disagg) for k in (STATED, TWIN, NOT_EXPRESSIBLE)}
    # 43 rows name their workers, 7 of them without a client concurrency; every twin is one
    # of the rows that leave the workers empty
    assert sum(bool(r.raw["prefill_num_workers"]) for r in disagg) == 43
    assert kinds[STATED] == 36
    assert all(r.guess for r in disagg if r.kind == NOT_EXPRESSIBLE)
    assert kinds[TWIN] > 0 and sum(kinds.values()) == len(disagg)
    for r in disagg:
        if r.kind == TWIN:
            assert not r.raw["prefill_num_workers"]
