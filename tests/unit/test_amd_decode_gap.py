"""benchmarks/amd_decode_gap.py: its arithmetic, the DeepSeek-R1 GEMM shapes it derives, and the
diagnosis it prints on a handful of held-out AMD records (a few model calls, well under a
second)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from gpuscale import catalog
from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "amd_decode_gap.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "amd_decode_gap_benchmark")


def test_dense_shapes_are_the_ones_aiter_tunes_for_gfx950(bench: ModuleType) -> None:
    # The shapes come from the catalog's DeepSeek-R1; AITER's gfx950 config files name them
    # independently (v0.1.10.post3): every one must be among them.
    shapes = bench.dense_fp8_gemms(catalog.model("deepseek-ai/DeepSeek-R1"), 8)
    nk = {(n, k) for _, n, k, _ in shapes}
    assert (2112, 7168) in nk and (3072, 1536) in nk and (7168, 2048) in nk
    assert nk <= bench.AITER_TUNED_SHAPES["gfx950"]
    assert not nk & bench.AITER_TUNED_SHAPES["gfx942"]
    calls = {name: c for name, _, _, c in shapes}
    assert calls["q_a+kv_a"] == 61 and calls["shared down"] == 58 and calls["dense down"] == 3


def test_generic_grid_and_tile_floor(bench: ModuleType) -> None:
    # One row of 128-wide tiles at decode batch sizes; a second row past 128 requests.
    assert bench.generic_workgroups(4, 2112) == 17
    assert bench.generic_workgroups(64, 7168) == 56
    assert bench.generic_workgroups(129, 512) == 8
    # 7168 / 128 = 56 K steps of a 2 x 128^3 tile at a 304th of 304 TFLOP/s: 56 x 4.19 us.
    floor = bench.generic_tile_floor_s(2112, 7168, 4, "gfx942", 304e12)
    assert floor == pytest.approx(56 * 2 * 128**3 / 1e12)
    # The floor does not depend on the batch below 128 rows: the tile computes 128 anyway.
    assert bench.generic_tile_floor_s(2112, 7168, 64, "gfx942", 304e12) == floor


def test_line_fit_recovers_a_plane(bench: ModuleType) -> None:
    x = np.array([[4.0, 1.0], [8.0, 3.0], [16.0, 2.0], [64.0, 9.0]])
    y = 14.0 + 0.1 * x[:, 0] + 0.5 * x[:, 1]
    assert bench.line_fit(x, y) == pytest.approx([14.0, 0.1, 0.5])


def test_mi300x_gap_is_per_step_and_mi355x_has_none(bench: ModuleType) -> None:
    rows = {
        (r.hardware, r.record["precision"], r.concurrency, r.record["isl"], r.record["osl"]): r
        for r in bench.amd_rows(("mi300x", "mi355x"))
    }
    # 1k/1k at C = 4 and 64: InferenceX 2026-02-27 (MI300X) and 2026-05-03 (MI355X) runs.
    gap = [bench.step(rows[("mi300x", "fp8", c, "1024", "1024")]) for c in (4, 64)]
    ok = [bench.step(rows[("mi355x", "fp8", c, "1024", "1024")]) for c in (4, 64)]
    for s in gap:
        assert s.residual_ms > 10.0
        assert s.parts_ms["total"] == pytest.approx(s.model_ms, rel=0.25)
    for s in ok:
        assert abs(s.residual_ms) < 0.1 * s.measured_ms
    # A per-step cost: the residual grows far less than the batch (16x) does.
    assert gap[1].residual_ms < 2.0 * gap[0].residual_ms


def test_bad_hardware_is_refused(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--hardware", "h200"])
    assert exc.value.code == 2
    assert "accepted mi300x, mi325x, mi355x" in capsys.readouterr().err
