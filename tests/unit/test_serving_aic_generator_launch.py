"""AIConfigurator gap-analysis rows at Dynamo 0.8.0 engine versions read with the launch its
generator writes (``serving_launches.aic_generator_launch``)."""

from __future__ import annotations

from gpuscale.validation import DATA_DIR
from gpuscale.validation.serving_fields import AIC_GAP_SOURCE
from gpuscale.validation.serving_launches import (
    AIC_GENERATOR_VERSIONS,
    AIC_PREFILL_SLACK,
    AIC_TRT_FREE_MEMORY_FRACTION,
    aic_generator_launch,
)
from gpuscale.validation.serving_rows import load

ROWS = DATA_DIR / "serving" / "aiconfigurator_silicon_hopper.csv"


def _row(backend: str, version: str, **extra: str) -> dict[str, str]:
    base = {
        "backend": backend,
        "backend_version": version,
        "mode": "agg",
        "silicon_data_source": f"source_file=/x/{AIC_GAP_SOURCE}/data/h200_sxm/{backend}/v.csv",
        "isl": "4000",
        "batch_size": "128",
    }
    return {**base, **extra}


def test_sglang_rows_get_mixed_chunks_the_prefill_limit_and_the_batch_as_cap() -> None:
    opts = aic_generator_launch(_row("sglang", "0.5.6.post2"), 256)
    assert opts == {
        "mixed_chunk": True,
        "max_prefill_tokens": 4000 + AIC_PREFILL_SLACK,
        "max_num_seqs": 128,
    }


def test_trtllm_rows_get_the_generator_token_budget() -> None:
    opts = aic_generator_launch(_row("trtllm", "1.2.0rc6.post1"), 256)
    assert opts == {
        "max_num_seqs": 128,
        "max_num_batched_tokens": 128 + 4000 + AIC_PREFILL_SLACK,
        "chunked_prefill": False,
        "memory_fraction": AIC_TRT_FREE_MEMORY_FRACTION,
    }
    # no batch recorded: no cap and no batch-sized budget, the template's defaults still apply
    assert aic_generator_launch(_row("trtllm", "1.2.0rc6.post1", batch_size=""), 256) == {
        "chunked_prefill": False,
        "memory_fraction": AIC_TRT_FREE_MEMORY_FRACTION,
    }


def test_vllm_rows_get_only_the_cap() -> None:
    # vllm/cli_args.0.12.0.j2 renders --max-num-seqs but no --max-num-batched-tokens
    assert aic_generator_launch(_row("vllm", "0.12.0"), 256) == {"max_num_seqs": 128}
    # a cap at the client's concurrency never binds a closed loop: left out
    assert aic_generator_launch(_row("vllm", "0.12.0"), 128) == {}
    assert "max_num_seqs" not in aic_generator_launch(_row("sglang", "0.5.6.post2"), 100)


def test_other_versions_sources_and_modes_keep_the_defaults() -> None:
    assert aic_generator_launch(_row("trtllm", "1.0.0rc3"), 8) == {}
    assert aic_generator_launch(_row("sglang", "0.5.1.post1"), 8) == {}
    assert aic_generator_launch(_row("sglang", "0.5.6.post2", mode="disagg"), 8) == {}
    other = _row("sglang", "0.5.6.post2", silicon_data_source="source_file=2026-01-02_x.csv")
    assert aic_generator_launch(other, 8) == {}


def test_the_rows_read_this_way_are_the_gap_rows_at_those_versions() -> None:
    rows = [r for r in load(ROWS) if r.mode == "agg" and r.expressible]
    got = [r for r in rows if aic_generator_launch(r.raw, r.concurrency)]
    assert got
    for r in got:
        assert AIC_GAP_SOURCE in r.raw["silicon_data_source"]
        assert (r.raw["backend"], r.raw["backend_version"]) in AIC_GENERATOR_VERSIONS
        assert r.kwargs["engine_options"] == aic_generator_launch(r.raw, r.concurrency)
    llama = [r for r in got if r.raw["backend"] == "sglang" and "Llama" in r.raw["model_path"]]
    assert len(llama) == 46
    # the recorded batch is the client's concurrency on every one of these rows: no cap binds
    assert all(r.raw["batch_size"] == str(r.concurrency) for r in llama)
    assert not any("max_num_seqs" in r.kwargs["engine_options"] for r in llama)
