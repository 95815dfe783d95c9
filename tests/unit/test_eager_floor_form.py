"""benchmarks/eager_floor_form.py: the additive reading of the eager host floor it tries (host
launches + GPU work) against the shipped one (the larger of the two), and that trying it leaves
the model as shipped."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model
from tests.benchmark_scripts import load_benchmark

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "eager_floor_form.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark(SCRIPT, "eager_floor_form_benchmark")


def _it(eng: str, model: str = "deepseek-r1", weights: str = "fp8_block") -> IterationModel:
    e = engine(eng)
    return _iteration_model(
        catalog.model(model),
        catalog.cluster("h200-sxm", 8),
        Parallelism(tp=8),
        weight_format(weights),
        "bf16",
        load_profile(e.cost_profile),
        e,
    )


def _total(it: IterationModel, n_dec: float, prompt: float) -> float:
    p = np.array([prompt])
    return float(it.parts_s(np.array([n_dec]), np.array([2048.0]), p, p / 2.0)["total"][0])


def test_the_datum_read_as_host_plus_gpu(bench: ModuleType) -> None:
    # PR #12160: 82.6 ms eager, 23.1 ms replayed; host + GPU leaves 59.5 ms to the host.
    assert pytest.approx(59.5 / 82.6) == bench.DATUM_HOST_SHARE


@pytest.mark.parametrize("prompt", [1.0, 1024.0, 8192.0])
def test_additive_form_adds_the_floor_to_the_gpu_work(bench: ModuleType, prompt: float) -> None:
    trt = _it("tensorrt-llm")
    shipped = _total(trt, 4.0, prompt)
    graphs = _total(_no_floor(trt), 4.0, prompt)
    floor = trt.eager_prefill_floor_s()
    with bench.form(1.0):
        summed = _total(trt, 4.0, prompt)
    with bench.form(bench.DATUM_HOST_SHARE):
        datum = _total(trt, 4.0, prompt)
    assert summed == pytest.approx(graphs + floor, rel=1e-12)
    assert datum == pytest.approx(graphs + bench.DATUM_HOST_SHARE * floor, rel=1e-12)
    # The shipped form takes the larger of host and GPU work, never more than their sum.
    assert max(graphs, floor) <= shipped + 1e-12 <= summed + 1e-12


def _no_floor(it: IterationModel) -> IterationModel:
    return dataclasses.replace(it, eager_prefill_host_s_per_kernel=0.0)


def test_decode_iterations_and_graph_engines_are_untouched(bench: ModuleType) -> None:
    trt, vllm = _it("tensorrt-llm"), _it("vllm", "llama3.1-70b", "fp8")
    decode, graphs = _total(trt, 16.0, 0.0), _total(vllm, 4.0, 1024.0)
    with bench.form(1.0):
        assert _total(trt, 16.0, 0.0) == decode
        assert _total(vllm, 4.0, 1024.0) == graphs


def test_the_shipped_method_is_restored(bench: ModuleType) -> None:
    shipped = IterationModel.parts_s
    with bench.form(1.0):
        assert IterationModel.parts_s is not shipped
    assert IterationModel.parts_s is shipped
    with pytest.raises(RuntimeError), bench.form(1.0):
        raise RuntimeError
    assert IterationModel.parts_s is shipped
