"""``infer_static`` (the static-batch table) and ``catalog_listing`` through the library."""

from __future__ import annotations

import pytest

from gpuscale import catalog
from gpuscale.api import catalog_listing, infer_static
from gpuscale.api.catalog import GpuRow, LinkRow, ModelRow
from gpuscale.errors import InputError


def test_default_degrees_skip_those_that_do_not_divide_the_heads() -> None:
    # qwen2.5-7b has 28 heads: 8 does not divide them, so the default list stops at 4.
    result = infer_static("qwen2.5-7b", gpu="h100-sxm")
    assert [o.tp for o in result.options] == [1, 2, 4]
    assert [r["tp"] for r in result.to_dict()["options"]] == [1, 2, 4]


def test_named_degree_that_does_not_divide_is_an_error_on_tp() -> None:
    with pytest.raises(InputError, match="--tp 8 does not divide") as err:
        infer_static("qwen2.5-7b", gpu="h100-sxm", tp=[1, 8])
    assert err.value.field == "tp"


@pytest.mark.parametrize("tp", ["1,x", "2,2", "0", 0, 2.5, True, {"tp": 2}, None.__class__])
def test_bad_degree_text_is_an_error_on_tp(tp: object) -> None:
    with pytest.raises(InputError) as err:
        infer_static("llama2-7b", gpu="h100-sxm", tp=tp)
    assert err.value.field == "tp"


def test_one_degree_may_be_a_number() -> None:
    """``tp=8`` failed as 'int' object is not iterable."""
    doc = infer_static("llama2-7b", gpu="h100-sxm", tp=8).to_dict()
    assert [row["tp"] for row in doc["options"]] == [8]


def test_serving_only_format_is_refused_on_weights() -> None:
    with pytest.raises(InputError, match="serving format") as err:
        infer_static("llama2-7b", gpu="h100-sxm", weights="nvfp4")
    assert err.value.field == "weights"


def test_more_tp_shortens_the_token_and_the_verdict_names_it() -> None:
    result = infer_static("llama2-7b", gpu="h100-sxm", tp="1,4")
    one, four = (o.estimate for o in result.options)
    assert four.tpot_s < one.tpot_s
    doc = result.to_dict()
    assert doc["schema_version"] >= 1 and doc["kv_dtype"] == "bf16" and doc["engine"] == "generic"
    assert doc["verdict"] == result.verdict and "lowest latency at TP=4" in result.verdict


def test_nothing_fits_says_so() -> None:
    result = infer_static("llama3.1-405b", gpu="a100-sxm-40gb", tp=[1, 2])
    assert not any(o.estimate.fits for o in result.options)
    assert result.verdict.startswith("fits at none of these TP degrees")


@pytest.mark.parametrize(
    ("kind", "row_type", "entries"),
    [("gpus", GpuRow, catalog.gpus), ("links", LinkRow, catalog.links)],
)
def test_listing_has_one_typed_row_per_entry(kind: str, row_type: type, entries: object) -> None:
    listing = catalog_listing(kind)
    assert all(isinstance(r, row_type) for r in listing.rows)
    assert [r.id for r in listing.rows] == list(entries())  # type: ignore[operator]
    assert all(r.source for r in listing.rows)


def test_model_rows_count_parameters() -> None:
    rows = {r.id: r for r in catalog_listing("models").rows}
    assert all(isinstance(r, ModelRow) for r in rows.values())
    llama = rows["llama3.1-8b"]
    assert isinstance(llama, ModelRow) and 7.9 < llama.params_b < 8.1  # Meta: "8B" (8.03B)
    doc = catalog_listing("models").to_dict()
    assert list(doc) == ["schema_version", "models"] and doc["models"][0]["id"]


def test_unknown_kind_is_an_error_on_kind() -> None:
    with pytest.raises(InputError, match="accepted: gpus, links, models") as err:
        catalog_listing("racks")
    assert err.value.field == "kind"
