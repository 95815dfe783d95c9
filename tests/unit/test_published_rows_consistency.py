"""Transcription checks: each published row's measured value agrees with the other figures its
source printed beside it and the row's notes repeat.

A value read from the wrong line or column of a table, or mistyped, fails here. The arithmetic is
the source's own:

- llm-foundry's benchmark tables (``scripts/train/benchmarking/README.md``): MFU is
  (6 N + 12 L d s) FLOPs per token over the GPU's 312 (A100) or 989.5 (H100) TFLOP/s, with N the
  table's NumParams column. The tokens/s/GPU column is truncated to an integer
  (``collect_results.py``: ``int(throughput * seq_len / gpu_num)``) and MFU is printed to two
  decimals.
- the Megatron-LM README model table (``images/model_table.png`` @f2e5db402c): MFU is the
  per-GPU TFLOP/s over 989, printed as a whole percent, and the aggregate PFLOP/s is the per-GPU
  figure times the GPU count, printed to one decimal.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuscale.validation.published_runs import RUN_FILES, load_rows, source_of
from tests.conftest import validation_data

LLMFOUNDRY_PEAK = {"A100": 312e12, "H100": 1.979e15 / 2}
"""bf16 dense FLOP/s per GPU family as llm-foundry's ``collect_results.py`` takes them from
Composer's ``GPU_AVAILABLE_FLOPS`` (``a100`` 312e12, ``h100-sxm`` 1.979e15 / 2)."""
H100_BF16_PEAK_TFLOPS = 989.0


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    data: Path = validation_data()
    return [row for name in RUN_FILES for row in load_rows(data / name)]


def _llmfoundry_mfu(row: dict[str, str], num_params: int) -> float:
    """MFU in percent from the row's tokens/s/GPU, as llm-foundry's README defines it."""
    layers, width, seq = int(row["layers"]), int(row["hidden"]), int(row["seq_len"])
    family = next(f for f in LLMFOUNDRY_PEAK if f in row["gpu"])
    per_token = 6.0 * num_params + 12.0 * layers * width * seq
    return 100.0 * float(row["value"]) * per_token / LLMFOUNDRY_PEAK[family]


def test_llmfoundry_rows_agree_with_their_mfu_column(rows: list[dict[str, str]]) -> None:
    checked = 0
    for row in rows:
        if not source_of(row["id"]).startswith("llmfoundry"):
            continue
        assert row["metric"] == "tokens_per_s_per_gpu", row["id"]
        mfu = re.search(r"MFU ([\d.]+)%", row["notes"])
        params = re.search(r"NumParams (\d+)", row["notes"])
        assert mfu is not None and params is not None, f"{row['id']}: notes lack MFU/NumParams"
        stated = float(mfu.group(1))
        recomputed = _llmfoundry_mfu(row, int(params.group(1)))
        # Truncating tokens/s/GPU loses under one token/s: stated/value of MFU, plus rounding.
        tolerance = stated / float(row["value"]) + 0.006
        assert abs(recomputed - stated) <= tolerance, (row["id"], recomputed, stated)
        # The row's parameter count is the table's NumParams, in billions.
        assert abs(float(row["params_b"]) - int(params.group(1)) / 1e9) < 5e-4, row["id"]
        checked += 1
    assert checked == 67


def test_megatron_readme_rows_agree_with_their_mfu_and_aggregate(
    rows: list[dict[str, str]],
) -> None:
    checked = 0
    for row in rows:
        if not row["id"].startswith("megatron-readme") or row["metric"] != "tflops_per_gpu":
            continue
        tflops, n = float(row["value"]), int(row["n_gpus"])
        mfu = re.search(r"MFU (\d+)%", row["notes"])
        aggregate = re.search(r"aggregate ([\d.]+) PFLOP/s", row["notes"])
        assert mfu is not None and aggregate is not None, row["id"]
        assert abs(100.0 * tflops / H100_BF16_PEAK_TFLOPS - int(mfu.group(1))) <= 0.5, row["id"]
        assert abs(tflops * n / 1000.0 - float(aggregate.group(1))) <= 0.05 + 1e-9, row["id"]
        # Every weak-scaling row is tp * pp * dp GPUs, as the table's columns say.
        assert int(row["tp"]) * int(row["pp"]) * int(row["dp"]) == n, row["id"]
        checked += 1
    assert checked == 9
