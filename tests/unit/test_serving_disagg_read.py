"""Disaggregated InferenceX rows without worker counts read from the configuration's entries:
which export fields may narrow the entries (prefill TP/EP only), the entries added from the run
dates' configuration and recipe files, SGLang MTP draft counts, and the rows that stay refused
(plain vs MTP at one key; AIConfigurator gap-analysis rows without a concurrency)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from gpuscale.validation import DATA_DIR
from gpuscale.validation.inferencex_memory import MEM_FRACTIONS_FILE, load_fractions
from gpuscale.validation.serving_export_agreement import export_field_agreement
from gpuscale.validation.serving_recipes import (
    EXPORT_FIELDS,
    EXPORT_RELIABLE,
    RECIPES_FILE,
    _export_candidates,
    entry_draft_tokens,
    load_recipes,
    recipe_draft_tokens,
)
from gpuscale.validation.serving_rows import NOT_EXPRESSIBLE, RECIPE, load, read_rows

from .test_serving_rows import _row

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"
EXPORT = "source_file=2026-03-25.csv; model=DeepSeek-R1; silicon_concurrency={c}; measured=x"


def _entry(**kw: str) -> dict[str, str]:
    e = {
        "system": "h200_sxm",
        "backend": "sglang",
        "isl": "1024",
        "osl": "1024",
        "concurrency": "512",
        "spec": "none",
        "prefill_workers": "1",
        "prefill_tp": "8",
        "prefill_ep": "1",
        "prefill_attention_dp": "1",
        "decode_workers": "6",
        "decode_tp": "8",
        "decode_ep": "1",
        "decode_attention_dp": "1",
        "decode_max_batch": "",
        "draft_tokens": "",
        "recipe": "recipes/h200/1k1k/bs256-1p6d-tp.yaml",
        "inferencex_commit": "fcc04aaa2",
    }
    e.update(kw)
    return e


TP = _entry()
DEP = _entry(
    prefill_ep="8",
    prefill_attention_dp="8",
    decode_ep="8",
    decode_attention_dp="8",
    recipe="recipes/h200/1k1k/bs256-1p6d-dep.yaml",
)


def _export(prefill_ep: str, **kw: str) -> dict[str, str]:
    """An export row as InferenceX's CSV writes it: the prefill's tp/ep in both stages."""
    fields = {
        "id": "x",
        "backend": "sglang",
        "silicon_data_source": EXPORT.format(c=512),
        "prefill_tp_size": "8",
        "prefill_moe_ep_size": prefill_ep,
        "decode_tp_size": "8",
        "decode_moe_ep_size": prefill_ep,
    }
    return _row(**{**fields, **kw})


def test_export_prefill_labels_pick_tep_or_dep() -> None:
    (dep,) = read_rows([_export("8")], [TP, DEP])
    assert dep.kind == RECIPE
    kw = dep.kwargs
    assert (kw["prefill_attention_dp"], kw["decode_attention_dp"], kw["decode_workers"]) == (
        8,
        8,
        6,
    )
    (tep,) = read_rows([_export("1")], [TP, DEP])
    assert tep.kind == RECIPE and tep.kwargs["decode_attention_dp"] == 1
    # an export label no entry carries leaves no candidate
    (none,) = read_rows([_export("4")], [TP, DEP])
    assert none.kind == NOT_EXPRESSIBLE and "no entry" in none.reason


def test_decode_parallelism_comes_from_the_entry_not_the_export() -> None:
    # H200 SGLang 8k/1k bs128-1p1d-dep: prefill tp 8 ep 1, decode DEP 8; the export writes the
    # prefill's ep 1 in the decode columns too
    dep = _entry(
        isl="8192",
        decode_workers="1",
        decode_ep="8",
        decode_attention_dp="8",
        recipe="recipes/h200/8k1k/bs128-1p1d-dep.yaml",
    )
    (row,) = read_rows([_export("1", isl="8192")], [dep])
    assert row.kind == RECIPE
    assert (row.kwargs["decode_ep"], row.kwargs["decode_attention_dp"]) == (8, 8)
    assert row.kwargs["prefill_ep"] == 1


def test_plain_and_mtp_at_one_key_stay_refused_with_the_reason() -> None:
    mtp = _entry(spec="mtp", draft_tokens="2", recipe="recipes/h200/1k1k/bs256-1p6d-tp-mtp.yaml")
    (row,) = read_rows([_export("1")], [TP, mtp])
    assert row.kind == NOT_EXPRESSIBLE
    assert "plain and an MTP recipe" in row.reason and "spec_method" in row.reason
    # the filter removes the DEP pair; the TEP pair remains
    (row,) = read_rows([_export("1")], [TP, mtp, DEP])
    assert "2 deployments" in row.reason and "bs256-1p6d-dep" not in row.reason


def test_sglang_mtp_recipe_with_its_draft_count_on_file() -> None:
    mtp = _entry(spec="mtp", draft_tokens="2", decode_max_batch="64")
    (row,) = read_rows([_export("1")], [mtp])
    assert row.kind == RECIPE
    assert (row.kwargs["speculative"], row.kwargs["draft_tokens"]) == ("mtp", 2)
    assert row.kwargs["decode_batch"] == 64
    (row,) = read_rows([_export("1")], [_entry(spec="mtp")])
    assert row.kind == NOT_EXPRESSIBLE and "draft count is not on file" in row.reason


def test_entry_draft_tokens() -> None:
    assert entry_draft_tokens(_entry()) is None
    assert entry_draft_tokens(_entry(spec="mtp")) is None
    assert entry_draft_tokens(_entry(spec="mtp", draft_tokens="3")) == 3
    # a plain entry never speculates, whatever the column holds
    assert entry_draft_tokens(_entry(draft_tokens="3")) is None


@given(
    row_ep=st.sampled_from([1, 8, 16]),
    row_tp=st.sampled_from([8, 16]),
    eps=st.lists(st.tuples(st.sampled_from([8, 16]), st.sampled_from([1, 8, 16])), max_size=6),
)
def test_export_filter_keeps_exactly_the_matching_prefill_labels(
    row_ep: int, row_tp: int, eps: list[tuple[int, int]]
) -> None:
    table = [
        _entry(prefill_tp=str(tp), prefill_ep=str(ep), recipe=f"r{i}.yaml")
        for i, (tp, ep) in enumerate(eps)
    ]
    r = _export(str(row_ep), prefill_tp_size=str(row_tp))
    kept = {e["recipe"] for e in _export_candidates(r, 512, table)}
    assert kept == {f"r{i}.yaml" for i, (tp, ep) in enumerate(eps) if (tp, ep) == (row_tp, row_ep)}


def test_export_fields_against_the_known_deployments() -> None:
    """Rule 1's evidence: on the 40 distinct twin export rows (deployment from the database row
    that names its workers) the prefill TP and EP labels agree every time; decode attention DP
    (every DEP decode exported as 1) and decode EP (the prefill's copied) do not."""
    rows = load(ROWS)
    got = export_field_agreement(rows, load_recipes(ROWS.parent / RECIPES_FILE))
    assert set(got) == set(EXPORT_FIELDS)
    n = got["prefill_tp"][1]
    assert n == 40
    for f in EXPORT_RELIABLE:
        assert got[f] == (n, n)
    assert got["decode_attention_dp"] == (25, n)
    assert got["decode_ep"] == (37, n)


def test_recipes_table_states_each_entrys_parallelism_and_drafts() -> None:
    recipes = load_recipes(ROWS.parent / RECIPES_FILE)
    for e in recipes:
        for stage in ("prefill", "decode"):
            dp, tp = int(e[f"{stage}_attention_dp"]), int(e[f"{stage}_tp"])
            # attention DP is 1 or the worker's width (nvidia-master.yaml dp-attn: true)
            assert dp in (1, tp)
        if e["backend"] == "trtllm":
            assert (entry_draft_tokens(e) or None) == recipe_draft_tokens(e["recipe"])
        if e["spec"] == "none":
            assert e["draft_tokens"] == ""
    # the H200 TensorRT-LLM min-latency recipes (InferenceX #698, 49f8ceee0): the concurrency
    # their benchmark section names, not conc-list x decode workers
    c1 = {
        e["recipe"].rsplit("/", 1)[1]: int(e["concurrency"])
        for e in recipes
        if "/c1_" in e["recipe"]
    }
    assert c1 == {
        "c1_ctx1_gen9_tep8_batch1_eplb0_mtp0.yaml": 11,
        "c1_ctx1_gen11_tep8_batch1_eplb0_mtp3.yaml": 13,
        "c1_ctx1_gen7_tep8_batch1_eplb0_mtp0.yaml": 9,
        "c1_ctx1_gen7_tep8_batch1_eplb0_mtp3.yaml": 9,
    }


def test_public_rows_read_from_the_added_entries() -> None:
    rows = list(load(ROWS))
    by = {r.id: r for r in rows}
    h200 = "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_disagg_"
    c11 = [r for r in rows if r.id.startswith(h200 + "1024x1024_c11_")]
    c13 = [r for r in rows if r.id.startswith(h200 + "1024x1024_c13_")]
    assert len(c11) == len(c13) == 2
    for r in c11:
        assert r.kind == RECIPE and "speculative" not in r.kwargs
        assert (r.kwargs["decode_workers"], r.kwargs["decode_batch"]) == (9, 1)
    for r in c13:
        assert r.kind == RECIPE and r.kwargs["draft_tokens"] == 3
        assert r.kwargs["decode_workers"] == 11
    # 8k/1k at 9: the plain and the MTP c1_ctx1_gen7 recipes; nothing says which
    c9 = [r for r in rows if r.id.startswith(h200 + "8192x1024_c9_")]
    assert c9 and all(r.kind == NOT_EXPRESSIBLE and "plain and an MTP" in r.reason for r in c9)
    # SGLang: the only entry at the key is an MTP recipe whose file was read (EAGLE 2 steps)
    sg = by["2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_disagg_8192x1024_c512_tp8_0_ep1_0_910"]
    assert sg.kind == RECIPE and sg.kwargs["draft_tokens"] == 2
    # bs128-1p1d-dep-mtp: max-running-requests 192 over 8 attention-DP ranks
    assert (sg.kwargs["decode_ep"], sg.kwargs["decode_batch"]) == (8, 24)
    # and --mem-fraction-static 0.85 on its decode workers (inferencex_mem_fractions.csv)
    assert sg.kwargs["engine_options"]["memory_fraction"] == 0.85
    h100 = [r for r in rows if re.match(r"2026_0[34]_\d\d_deepseek_r1_h100_sxm_sglang", r.id)]
    read = {r.concurrency for r in h100 if r.kind == RECIPE}
    assert read == {128}  # only 1p*-max-tp-mtp runs 128; below, TEP and DEP share every point
    # never read from the measured latency: other latencies, the same reading
    raw = [dict(r.raw) for r in rows]
    for r, row in zip(raw, rows, strict=True):
        if row.kind == RECIPE:
            for k in ("silicon_ttft_ms", "silicon_tpot_ms"):
                r[k] = str(float(r[k]) * 1.37)
    again = {
        r.id: r
        for r in read_rows(
            raw,
            load_recipes(ROWS.parent / RECIPES_FILE),
            fractions=load_fractions(ROWS.parent / MEM_FRACTIONS_FILE),
        )
    }
    assert all(again[r.id].kwargs == r.kwargs for r in rows if r.kind == RECIPE)


def test_gap_analysis_disagg_rows_name_the_concurrency_sweep() -> None:
    gap = [
        r
        for r in load(ROWS)
        if r.mode == "disagg" and "aic-auto-gap-analysis" in r.raw["silicon_data_source"]
    ]
    assert len(gap) == 7
    for r in gap:
        assert r.kind == NOT_EXPRESSIBLE and "sweeps several client concurrencies" in r.reason
        assert r.guess  # still compared apart, as AIConfigurator's decode batch x workers x DP
