"""benchmarks/cp_step_increments.py and ring_step_kernels.py: the per-ring-step figures quoted in
docs/investigations/training-throughput.md ("The 8B ring's cost per step", branch tt-cp2)."""

from __future__ import annotations

import json

import pytest

from gpuscale.costmodel.profile import load_profile
from gpuscale.validation import DATA_DIR
from gpuscale.validation.published_runs import load_all, predict, to_case
from tests.benchmark_scripts import run_benchmark


@pytest.fixture(scope="module")
def figures() -> dict[str, object]:
    out = run_benchmark("cp_step_increments", "--json")
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_rows_are_the_validation_rows_and_the_parts_add_up(figures: dict[str, object]) -> None:
    rows = {r["id"]: r for r in load_all(DATA_DIR)}
    small = figures["rows_8b"]
    assert isinstance(small, dict) and len(small) == 4
    for rid, p in small.items():
        case = to_case(rows[rid])
        tokens = case.plan.micro_batch * case.training.seq_len / case.plan.cp
        assert tokens == 32768  # every row runs the same local length (the premise)
        assert p["measured_step_s"] == pytest.approx(tokens / case.measured_tokens_per_s_per_gpu)
        # The modelled step is the one benchmarks/validate.py prices.
        predicted = predict(case, load_profile(case.framework))
        assert p["model_step_s"] == pytest.approx(tokens / predicted, rel=1e-9)
        parts = p["attention_kernels_s"] + p["ring_passes_s"] + p["ring_comm_s"] + p["rest_s"]
        assert parts == pytest.approx(p["model_step_s"], rel=1e-12)
        assert min(p["attention_kernels_s"], p["ring_passes_s"], p["ring_comm_s"]) >= 0.0
        # No ring runs without context parallelism.
        assert (p["ring_passes_s"] == 0.0) == (p["cp"] == 1.0)
    # The part outside attention does not depend on the ring (same layers, tokens, FSDP).
    rests = [p["rest_s"] for p in small.values()]
    assert max(rests) - min(rests) < 0.01 * max(rests)


def test_the_quoted_increments_and_line(figures: dict[str, object]) -> None:
    increments = figures["increments_8b"]
    assert isinstance(increments, list) and len(increments) == 3
    # The model prices each added ring step alike; the measured CP 2 -> 4 and 4 -> 8 steps cost
    # 1.5-1.9x that, CP 1 -> 2 less than it.
    model = [i["model_per_step_s"] for i in increments]
    assert max(model) - min(model) < 0.1 * max(model)
    ratios = [i["measured_per_step_s"] / i["model_per_step_s"] for i in increments]
    assert ratios[0] < 1.0 < 1.4 < ratios[2] < ratios[1]
    line = figures["line_8b"]
    assert isinstance(line, dict)
    residuals = line["residuals"]
    assert all(abs(residuals[cp]) < 0.01 for cp in ("1", "4", "8"))
    assert residuals["2"] < -0.15


def test_ring_step_kernels_needs_a_gpu_and_says_so_in_one_line() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the script measures instead")
    out = run_benchmark("ring_step_kernels")
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "CUDA" in out.stderr
    bad = run_benchmark("ring_step_kernels", "--tokens", "1000")
    assert bad.returncode == 2 and "multiple of 256" in bad.stderr
