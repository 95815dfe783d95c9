"""Eager prefill iterations: engines that run prompt-carrying batches without CUDA graphs
(TensorRT-LLM PyTorch backend, SGLang before piecewise graphs) cannot finish such an iteration
before their host has launched every kernel of the forward; vLLM replays piecewise graphs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog import serving_engines
from gpuscale.catalog.serving_engines import EngineProfile, engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import gemm_precision, weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model


def _it(model: str, eng: EngineProfile, weights: str = "fp8", tp: int = 8) -> IterationModel:
    cl = catalog.cluster("h200-sxm", tp)
    prof = load_profile(eng.cost_profile)
    return _iteration_model(
        catalog.model(model), cl, Parallelism(tp=tp), weight_format(weights), "fp8", prof, eng
    )


def _prefill(it: IterationModel, tokens: float, n_decode: float = 0.0) -> float:
    p = np.array([tokens])
    return float(it.time_s(np.array([n_decode]), np.array([2048.0]), p, p / 2.0)[0])


def test_profile_reproduces_its_source_measurement() -> None:
    # sgl-project/sglang PR #12160: a 1-new-token DeepSeek-V3 prefill forward cost 82.6 ms
    # eagerly. The per-kernel host cost in the engine profile spreads that over this model's
    # kernel count of DeepSeek-V3; the floor must give the measurement back (within rounding
    # of the profile's whole microseconds).
    it = _it("deepseek-v3", engine("sglang"))
    assert it.eager_prefill_floor_s() == pytest.approx(82.6e-3, rel=0.02)
    assert _prefill(it, 1.0) == pytest.approx(82.6e-3, rel=0.05)


def test_short_prefill_is_host_bound_long_prefill_is_not() -> None:
    eager = _it("deepseek-v3", engine("sglang"))
    graphs = _it("deepseek-v3", dataclasses.replace(engine("sglang"), prefill_cuda_graph=True))
    # A short prompt: the GPU work is far below the host's launches, so the floor sets the time.
    assert _prefill(graphs, 64.0) < 0.5 * eager.eager_prefill_floor_s()
    assert _prefill(eager, 64.0) > 0.95 * eager.eager_prefill_floor_s()
    # A long prompt keeps the GPU busier than the host: max(host, GPU) adds nothing.
    assert _prefill(eager, 8192.0) == pytest.approx(_prefill(graphs, 8192.0), rel=1e-12)


def test_decode_only_iterations_replay_graphs() -> None:
    eager = _it("deepseek-v3", engine("sglang"))
    graphs = _it("deepseek-v3", dataclasses.replace(engine("sglang"), prefill_cuda_graph=True))
    assert _prefill(eager, 0.0, n_decode=4.0) == _prefill(graphs, 0.0, n_decode=4.0)
    assert _prefill(eager, 0.0, n_decode=4.0) < 0.5 * eager.eager_prefill_floor_s()


def test_floor_scales_with_the_kernels_of_the_architecture() -> None:
    # A dense Llama layer launches fewer kernels than an MLA + MoE layer.
    eng = engine("tensorrt-llm")
    ds = _it("deepseek-v3", eng)
    llama = _it("llama3.1-70b", eng)
    prec = gemm_precision(weight_format("fp8"), catalog.gpu("h200-sxm"))
    for it in (ds, llama):
        assert it.eager_prefill_floor_s() == pytest.approx(
            it.serial_kernels(prec) * eng.eager_host_us_per_kernel * 1e-6
        )
    per_layer_ds = ds.eager_prefill_floor_s() / ds.model.num_layers
    per_layer_llama = llama.eager_prefill_floor_s() / llama.model.num_layers
    assert per_layer_llama < 0.6 * per_layer_ds


def test_engine_profiles() -> None:
    assert engine("vllm").prefill_cuda_graph
    for name in ("sglang", "tensorrt-llm"):
        eng = engine(name)
        assert not eng.prefill_cuda_graph
        assert eng.eager_host_us_per_kernel > 0.0
    assert _it("deepseek-v3", engine("vllm")).eager_prefill_host_s_per_kernel == 0.0


def test_light_load_ttft_carries_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    # One request at a time, a short prompt: its TTFT holds one prefill iteration, which the
    # eager engine stretches to the host floor; with prefill graphs the same engine is faster by
    # about (floor - GPU prefill time).
    kw = dict(gpu="h200-sxm", weights="fp8", input_len=128, output_len=64, concurrency=1, tp=8)
    eager = infer("deepseek-v3", engine="sglang", **kw).to_dict()["options"][0]["ttft_ms"]
    it = _it("deepseek-v3", engine("sglang"))
    profiles = dict(serving_engines.engines())
    profiles["sglang"] = dataclasses.replace(profiles["sglang"], prefill_cuda_graph=True)
    monkeypatch.setattr(serving_engines, "engines", lambda: profiles)
    graphs = infer("deepseek-v3", engine="sglang", **kw).to_dict()["options"][0]["ttft_ms"]
    graphs_it = _it("deepseek-v3", engine("sglang"))
    assert graphs_it.eager_prefill_host_s_per_kernel == 0.0
    gap_ms = (_prefill(it, 128.0) - _prefill(graphs_it, 128.0)) * 1e3
    assert gap_ms > 40.0
    assert eager - graphs == pytest.approx(gap_ms, rel=0.25)
