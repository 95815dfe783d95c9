"""inferencex_mori_launch: the MI355X MoRI-SGLang launches' per-rank prefill prompt caps and
decode running caps and per-worker prefill chunks, by precision, day and image."""

from __future__ import annotations

from typing import Any

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_api import COLUMNS, load_records, read_record
from gpuscale.validation.inferencex_mori_launch import LAUNCHES, mori_launch
from gpuscale.validation.inferencex_tables import load_tables

FP8 = "rocm/sgl-dev:sglang-0.5.8-rocm700-mi35x-mori-0210"
FP4_0227_2 = "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-2"
FP4_0227_3 = "rocm/sgl-dev:sglang-0.5.9-rocm720-mi35x-mori-0227-3"


def _rec(**kw: str) -> dict[str, str]:
    rec = dict.fromkeys(COLUMNS, "")
    rec.update(
        page_offset="0",
        hardware="mi355x",
        framework="mori-sglang",
        model="dsr1",
        precision="fp8",
        spec_method="none",
        disagg="true",
        is_multinode="true",
        prefill_num_workers="1",
        prefill_tp="8",
        prefill_ep="8",
        prefill_dp_attention="true",
        num_prefill_gpu="8",
        decode_num_workers="2",
        decode_tp="8",
        decode_ep="8",
        decode_dp_attention="true",
        num_decode_gpu="16",
        isl="1024",
        osl="1024",
        conc="2048",
        image=FP8,
        date="2026-02-23",
        run_url="1/1",
    )
    rec.update({k: "0.1" for k in COLUMNS if k.startswith(("mean_", "median_", "p99_"))})
    rec.update(kw)
    return rec


def _kw(rec: dict[str, str]) -> dict[str, Any]:
    def stage(p: str) -> dict[str, int]:
        gpus = int(rec[f"{p}_tp"])
        return {
            f"{p}_tp": gpus,
            f"{p}_ep": int(rec[f"{p}_ep"]),
            f"{p}_attention_dp": gpus if rec[f"{p}_dp_attention"] == "true" else 1,
        }

    return {**stage("prefill"), **stage("decode")}


def test_attention_dp_stages_split_the_launch_over_their_ranks() -> None:
    rec = _rec()
    got, note = mori_launch(rec, _kw(rec))
    # Prefill --max-running-requests 24 over 8 ranks and --chunked-prefill-size 16384 x TP per
    # worker (the model splits it, EngineProfile.per_attention_rank); decode
    # --max-running-requests 160 x TP over 8 ranks; the router deals decode workers at random
    # (sglang_router --decode-policy random); both stages run attention DP, so their MoE layers
    # exchange tokens by MoRI's all-to-all (--moe-a2a-backend mori among the DP flags).
    assert got == {
        "prefill_batch": 3,
        "decode_batch": 160,
        "max_num_batched_tokens": 131072,
        "decode_routing": "random",
        "kv_dtype": "fp8",
        "moe_a2a_deepep": True,
    }
    assert "InferenceX@8d81e0bf4" in note and "picked at random" in note
    assert "FP8 KV cache" in note and "MoRI all-to-all under attention DP" in note


def test_without_attention_dp_the_worker_caps_and_chunk() -> None:
    rec = _rec(
        date="2026-02-16", prefill_ep="1", prefill_dp_attention="false", decode_dp_attention="false"
    )
    got, note = mori_launch(rec, _kw(rec))
    # Prefill 128 prompts and the chunk 262144 as launched (the model applies SGLang's
    # --max-prefill-tokens 16384 next to it); decode with EP and no DP 256 (both sglang_disagg
    # versions in force on 2026-02-16 agree).
    # Their router is not read: no routing, and the note says so.
    assert got == {
        "prefill_batch": 128,
        "decode_batch": 256,
        "max_num_batched_tokens": 262144,
        "kv_dtype": "fp8",
    }
    assert "953f7c512" in note and "14606ff7c" in note and "router not read" in note
    assert "decode_routing not applied" not in note
    no_ep = _rec(date="2026-02-16", decode_ep="1", decode_dp_attention="false")
    assert mori_launch(no_ep, _kw(no_ep))[0]["decode_batch"] == 128


def test_versions_that_disagree_on_a_day_leave_that_value_out() -> None:
    # 953f7c512 (to 2026-02-16) runs 256 x TP on attention-DP decode, 14606ff7c 160 x TP.
    rec = _rec(date="2026-02-16")
    got, note = mori_launch(rec, _kw(rec))
    assert "decode_batch" not in got and got["prefill_batch"] == 3
    assert "decode_batch not applied" in note
    assert mori_launch(_rec(date="2026-02-15"), _kw(rec))[0]["decode_batch"] == 256


def test_fp4_versions_by_image() -> None:
    rec = _rec(precision="fp4", date="2026-03-13", image=FP4_0227_3, prefill_tp="4")
    rec.update(prefill_ep="4", num_prefill_gpu="4")
    # 4230b97ca: MORI_MAX_DISPATCH_TOKENS_PREFILL x TP per worker; 24 over 4 ranks.
    got = mori_launch(rec, _kw(rec))[0]
    assert got["max_num_batched_tokens"] == 65536 and got["prefill_batch"] == 6
    # 4706e7009 (image 0227-2, to 2026-03-13): a fixed 16384 per worker.
    old = {**rec, "image": FP4_0227_2}
    assert mori_launch(old, _kw(old))[0]["max_num_batched_tokens"] == 16384


def test_unread_launches_and_other_records_get_nothing() -> None:
    plain = {"prefill_dp_attention": "false", "decode_dp_attention": "false", "prefill_ep": "1"}
    for rec in (
        _rec(date="2026-02-12", **plain),  # sglang_disagg 21c60a1f9: not public
        _rec(precision="fp4", date="2026-02-13", image=FP4_0227_2, **plain),
        _rec(image="rocm/sgl-dev:other", **plain),
        _rec(hardware="b200"),
        _rec(framework="sglang-disagg"),
    ):
        assert mori_launch(rec, _kw(rec)) == ({}, "")
    # An unread launch with attention DP still runs MoRI's all-to-all (every version read).
    unread = _rec(date="2026-02-12")
    got, note = mori_launch(unread, _kw(unread))
    assert got == {"moe_a2a_deepep": True} and "not read" in note
    assert all(ln.first <= ln.last for ln in LAUNCHES)


def test_held_out_record_gets_the_caps() -> None:
    row = read_record(_rec())
    assert row.expressible, row.reason
    assert (row.kwargs["prefill_batch"], row.kwargs["decode_batch"]) == (3, 160)
    assert row.kwargs["engine_options"]["max_num_batched_tokens"] == 131072
    # --kv-cache-dtype fp8_e4m3 on both stages (models.yaml base_flags).
    assert row.kwargs["kv_dtype"] == "fp8"
    # --moe-a2a-backend mori among the DP flags: the all-to-all, not SGLang's gather.
    assert row.kwargs["engine_options"]["moe_a2a_deepep"] is True
    assert any(a.startswith("MoRI launch") for a in row.assumptions)


def test_the_all_to_all_follows_attention_dp() -> None:
    """The launchers append the DP flags (MoRI's all-to-all among them) to a stage with
    attention DP only: one such stage suffices (the option acts on the DP pools alone), none
    leaves SGLang's default."""
    one = _rec(prefill_dp_attention="false", prefill_ep="1")
    got, note = mori_launch(one, _kw(one))
    assert got["moe_a2a_deepep"] is True and "MoRI all-to-all" in note
    none = _rec(
        prefill_ep="1", decode_ep="1", prefill_dp_attention="false", decode_dp_attention="false"
    )
    got, note = mori_launch(none, _kw(none))
    assert "moe_a2a_deepep" not in got and "all-to-all" not in note


def test_mtp_decode_workers_run_eagle_without_the_overlap_scheduler() -> None:
    # No launch read before 2026-05-07 exports SGLANG_ENABLE_SPEC_V2, and the MTP flags go to
    # the decode workers only: SGLang turns their overlap scheduler off, the prefill workers'
    # stays on.
    rec = _rec(spec_method="mtp")
    got, note = mori_launch(rec, _kw(rec))
    assert got["overlap_scheduler"] is False and got["prefill_overlap_scheduler"] is True
    assert "EAGLE without the overlap scheduler" in note
    # ... and their prefill workers run no draft module.
    assert got["prefill_speculative"] is False and "MTP on the decode workers only" in note
    plain = _rec()
    assert "overlap_scheduler" not in mori_launch(plain, _kw(plain))[0]
    assert "prefill_speculative" not in mori_launch(plain, _kw(plain))[0]
    # The reader applies them to a held-out MTP record's deployment (its draft count read from
    # the multi-node MTP table, so the record is expressible).
    held_out = next(
        r
        for r in load_records(DATA_DIR / "serving" / "inferencex_api_dsr1.csv")
        if r["framework"] == "mori-sglang"
        and r["spec_method"] == "mtp"
        and r["date"] == "2026-03-03"
    )
    row = read_record(held_out, load_tables(DATA_DIR / "serving"))
    assert row.expressible, row.reason
    options = row.kwargs["engine_options"]
    assert options["overlap_scheduler"] is False and options["prefill_overlap_scheduler"] is True
    assert options["prefill_speculative"] is False
    assert "overlap_scheduler" not in read_record(plain).kwargs.get("engine_options", {})
