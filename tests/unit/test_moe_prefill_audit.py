"""benchmarks/moe_prefill_audit.py: its arithmetic on hand-made figures, and the deployments it
reads from the validation rows."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "moe_prefill_audit.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "moe_prefill_audit_benchmark")


def _audit(bench: ModuleType, meas_slope: float, gpu_slope: float, experts_hi: float) -> object:
    terms = {k: 0.0 for k in bench.GPU_TERMS}
    terms.update(gpu=gpu_slope, experts=gpu_slope / 2.0, rest=0.0)
    return bench.Audit(
        key=("trtllm", "-", "m", "h200", 1, 1, 1, 4),
        lengths=(1000.0, 8000.0),
        meas=(50.0, meas_slope),
        model=(30.0, gpu_slope),
        terms=terms,
        floor_ms=0.0,
        experts_hi_ms=experts_hi,
        expert_flops_hi=4e13,
        peak_flops=1e15,
        copies_per_k=4.0,
        engine_copies_per_k=1.0,
    )


def test_line_fit_gives_a_line_back(bench: ModuleType) -> None:
    a, b = bench.line_fit([1000.0, 4000.0, 8000.0], [40.0, 130.0, 250.0])
    assert a == pytest.approx(10.0) and b == pytest.approx(0.03)
    with pytest.raises(ValueError):
        bench.line_fit([1.0, 1.0], [2.0, 3.0])


def test_excess_and_what_the_experts_would_need(bench: ModuleType) -> None:
    # 30 ms per 1k measured against 20 modelled: 10 ms per 1k over a 7k span = 70 ms more, on
    # top of 100 ms of expert GEMMs for the longest prompt: the experts x1.7, at 0.4 -> 0.235.
    a = _audit(bench, 30.0, 20.0, 100.0)
    assert a.excess == pytest.approx(10.0)
    assert a.excess_hi_ms == pytest.approx(70.0)
    assert a.experts_factor == pytest.approx(1.7)
    assert a.model_share == pytest.approx(0.4)
    assert a.implied_share == pytest.approx(0.4 / 1.7)
    # A model slower than the measurement: a factor below 1, a higher implied rate.
    slow = _audit(bench, 15.0, 20.0, 100.0)
    assert slow.experts_factor == pytest.approx(0.65) and slow.implied_share > slow.model_share


def test_copy_pass_counts_are_per_engine(bench: ModuleType) -> None:
    assert set(bench.ENGINE_COPY_PASSES) == {"vllm", "sglang", "trtllm"}
    assert all(v < bench.MODEL_COPY_PASSES for v in bench.ENGINE_COPY_PASSES.values())


def test_the_rows_give_moe_deployments_at_their_lowest_concurrency(bench: ModuleType) -> None:
    deps = bench.deployments(4, "trtllm", "gpt-oss")
    assert deps, "the TensorRT-LLM gpt-oss-120b sweeps start at concurrency 4"
    for rows in deps.values():
        assert len({r.concurrency for r in rows}) == 1
        assert len({r.kwargs["input_len"] for r in rows}) >= 2
        assert all(r.engine == "trtllm" and "gpt-oss" in r.raw["model_path"] for r in rows)
    # Dense models are left out.
    assert not bench.deployments(4, "vllm", "Llama-3.1-70B")


def test_expert_flops_count_the_padded_experts(bench: ModuleType) -> None:
    rows = next(iter(bench.deployments(4, "trtllm", "gpt-oss").values()))
    one = [r for r in rows if r.kwargs["tp"] == 1] or rows
    it = bench.iteration_model(one[0])
    he, f = it.moe_expert_dims()
    # gate and up over K = he, down out to N = 3,072 (TensorRT-LLM's n_alignment on Hopper)
    assert it.moe_expert_out_hidden() == 3072.0
    expected = 2.0 * 1000.0 * 4 / it.par.ep * (2.0 * he + 3072.0) * f * 36
    assert bench.expert_flops(it, 1000.0) == pytest.approx(expected)


def test_the_audit_reads_the_models_copy_passes(bench: ModuleType) -> None:
    # The audit prices "the model's" copy passes: the model's own constant, not a second 4.0
    # that would silently disagree once the model's count changes.
    from gpuscale.costmodel.serving import iteration

    assert bench.MODEL_COPY_PASSES is iteration.MOE_ROUTED_COPY_PASSES
