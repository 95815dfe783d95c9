"""``IterationModel.parts_s``: the iteration time term by term. The terms must add up to what
``time_s`` returns (the pricing is one code path), and each must answer to its own input: the
experts to the routed tokens, attention to the context, the host floor only to eager
prompt-carrying iterations."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import GPU_TERMS, IterationModel, Parallelism
from gpuscale.planner.serving.deployment import _iteration_model


def _it(model: str, eng: str, weights: str, tp: int = 8, pp: int = 1, ep: int = 1):
    e = engine(eng)
    return _iteration_model(
        catalog.model(model),
        catalog.cluster("h200-sxm", tp * pp),
        Parallelism(tp=tp, pp=pp, ep=ep),
        weight_format(weights),
        "bf16",
        load_profile(e.cost_profile),
        e,
    )


def _parts(it: IterationModel, n_dec: float, prompt: float) -> dict[str, float]:
    p = np.array([prompt])
    parts = it.parts_s(np.array([n_dec]), np.array([2048.0]), p, p / 2.0)
    return {k: float(v[0]) for k, v in parts.items()}


@pytest.mark.parametrize(
    ("model", "eng", "weights", "tp", "pp", "ep"),
    [
        ("gpt-oss-120b", "tensorrt-llm", "mxfp4", 8, 1, 1),
        ("deepseek-r1", "sglang", "fp8_block", 8, 1, 8),
        ("llama3.1-70b", "vllm", "fp8", 4, 2, 1),
    ],
)
@pytest.mark.parametrize(("n_dec", "prompt"), [(0.0, 1024.0), (16.0, 0.0), (8.0, 4096.0)])
def test_parts_add_up_to_time(
    model: str, eng: str, weights: str, tp: int, pp: int, ep: int, n_dec: float, prompt: float
) -> None:
    it = _it(model, eng, weights, tp, pp, ep)
    parts = _parts(it, n_dec, prompt)
    total = float(
        it.time_s(
            np.array([n_dec]), np.array([2048.0]), np.array([prompt]), np.array([prompt / 2])
        )[0]
    )
    assert parts["total"] == total
    # The GPU terms make the pipelined GPU time: each stage holds 1/pp of the layer terms.
    assert set(parts) == {*GPU_TERMS, "gpu", "host_floor", "draft", "overhead", "total"}
    layer_terms = sum(parts[k] for k in GPU_TERMS if k not in ("head", "pipeline_hops"))
    assert parts["gpu"] == pytest.approx(layer_terms + parts["head"] + parts["pipeline_hops"])
    busy = max(parts["gpu"], parts["host_floor"] + parts["head"] + parts["pipeline_hops"])
    assert total == pytest.approx(busy + parts["draft"] + parts["overhead"], rel=1e-12)
    assert all(v >= 0.0 for v in parts.values())


def test_dense_model_has_no_expert_terms() -> None:
    parts = _parts(_it("llama3.1-70b", "vllm", "fp8", tp=4), 0.0, 2048.0)
    assert parts["experts"] == 0.0 and parts["moe_other"] == 0.0
    assert parts["dense_mlp"] > 0.0


def test_expert_term_grows_with_the_prompt_and_attention_with_its_square() -> None:
    it = _it("gpt-oss-120b", "tensorrt-llm", "mxfp4", tp=1)
    short, long = _parts(it, 0.0, 1024.0), _parts(it, 0.0, 8192.0)
    # Eight times the routed tokens: the experts leave the weight-read floor and grow with them.
    assert 3.0 < long["experts"] / short["experts"] <= 8.0 * 1.01
    # Causal attention over half the prompt: the pairs grow with the square (sliding-window
    # layers and the per-kernel floor keep it below 64x).
    assert long["attention"] / short["attention"] > 8.0


def test_host_floor_only_on_eager_prompt_iterations() -> None:
    trt = _it("gpt-oss-120b", "tensorrt-llm", "mxfp4", tp=8)
    assert _parts(trt, 0.0, 1024.0)["host_floor"] == pytest.approx(trt.eager_prefill_floor_s())
    assert _parts(trt, 16.0, 0.0)["host_floor"] == 0.0
    # vLLM replays piecewise graphs for prompt-carrying batches: no floor.
    assert _parts(_it("gpt-oss-120b", "vllm", "mxfp4", tp=8), 0.0, 1024.0)["host_floor"] == 0.0
