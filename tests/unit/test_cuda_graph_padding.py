"""Padded CUDA graphs (TensorRT-LLM ``cuda_graph_config.enable_padding``): a decode-only batch
runs the smallest captured size at least its own, and the dummy requests cost GEMM work."""

from __future__ import annotations

import dataclasses
import itertools
import subprocess
import sys

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api import InputError, infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.planner.serving.deployment import _iteration_model

OVERVIEW = (1, 2, 4, 8, 16, 32, 64, 128, 256, 384, 512, 1024, 2048, 4096, 8192)


def _trt(**changes: object):
    return dataclasses.replace(engine("tensorrt-llm"), **changes)


def test_the_engine_keeps_the_sizes_it_can_run_and_pads_to_its_cap() -> None:
    eng = _trt(cuda_graph_batch_sizes=OVERVIEW, max_num_seqs=224, max_num_batched_tokens=2048)
    # TensorRT-LLM _filter_cuda_graph_batch_sizes: sizes above min(cap, budget) go, and the
    # cap itself is padded to instead.
    assert eng.decode_graph_sizes() == (1, 2, 4, 8, 16, 32, 64, 128, 224)
    small = _trt(cuda_graph_batch_sizes=(1, 2, 4), max_num_seqs=224)
    assert small.decode_graph_sizes() == (1, 2, 4)
    assert engine("tensorrt-llm").decode_graph_sizes() == ()  # enable_padding defaults off
    tight = _trt(cuda_graph_batch_sizes=OVERVIEW, max_num_seqs=4096, max_num_batched_tokens=3000)
    assert tight.decode_graph_sizes()[-1] == 3000  # a decode batch cannot exceed the budget


def _model(sizes: tuple[float, ...]):
    eng = engine("tensorrt-llm")
    it = _iteration_model(
        catalog.model("llama3.1-70b"), catalog.cluster("h200-sxm", 1), Parallelism(),
        weight_format("fp8"), "fp8", load_profile(eng.cost_profile), eng,
    )  # fmt: skip
    return dataclasses.replace(it, decode_graph_sizes=sizes)


def test_decode_only_batches_pad_and_prompt_batches_do_not() -> None:
    it = _model((128.0, 224.0))
    n = np.array([201.0, 201.0, 128.0, 300.0])
    p = np.array([0.0, 512.0, 0.0, 0.0])
    assert it.padded_decodes(n, p).tolist() == [224.0, 201.0, 128.0, 300.0]
    plain = _model(())
    ctx = np.full(4, 1100.0)
    padded_t = it.parts_s(n, ctx, p, ctx)
    plain_t = plain.parts_s(n, ctx, p, ctx)
    # The padded batch pays the GEMMs of 224 requests, and the attention of its 201.
    assert padded_t["dense_mlp"][0] > plain_t["dense_mlp"][0] * 1.05
    assert padded_t["attention"][0] == pytest.approx(plain_t["attention"][0])
    # Unpadded where a prompt rides along, at a captured size, or above the largest.
    for i in (1, 2, 3):
        assert padded_t["total"][i] == pytest.approx(plain_t["total"][i])


def test_padding_slows_a_compute_bound_decode_and_not_one_at_a_captured_size() -> None:
    kw = {"gpu": "h200-sxm", "engine": "tensorrt-llm", "weights": "fp8", "kv_dtype": "fp8",
          "input_len": 128, "output_len": 2048, "num_requests": 2000}  # fmt: skip
    base = {"max_num_seqs": 224, "max_num_batched_tokens": 2048}
    pad = {**base, "cuda_graph_batch_sizes": OVERVIEW}
    plain = infer("llama3.1-70b", concurrency=200, engine_options=base, **kw).to_dict()
    padded = infer("llama3.1-70b", concurrency=200, engine_options=pad, **kw).to_dict()
    assert padded["options"][0]["tpot_ms"] > 1.05 * plain["options"][0]["tpot_ms"]
    exact = {**base, "max_num_seqs": 128}
    at_size = infer(
        "llama3.1-70b", concurrency=128, engine_options={**exact, "cuda_graph_batch_sizes": OVERVIEW},
        **kw,
    ).to_dict()  # fmt: skip
    unpadded = infer("llama3.1-70b", concurrency=128, engine_options=exact, **kw).to_dict()
    # (the same, but for the interpolation grid of the simulation's clock)
    assert at_size["options"][0]["tpot_ms"] == pytest.approx(
        unpadded["options"][0]["tpot_ms"], rel=1e-4
    )


@pytest.mark.parametrize(
    ("value", "engine_name"),
    [((4, 2), "tensorrt-llm"), ((), "tensorrt-llm"), ((0, 8), "tensorrt-llm"), ((1, 2), "vllm"),
     ("1:2", "tensorrt-llm"), ((1.5, 2), "tensorrt-llm")],
)  # fmt: skip
def test_bad_graph_sizes_are_refused_by_name(value: object, engine_name: str) -> None:
    with pytest.raises(InputError) as exc:
        infer("llama3.1-8b", gpu="h100-sxm", engine=engine_name, concurrency=4,
              engine_options={"cuda_graph_batch_sizes": value})  # fmt: skip
    assert exc.value.field == "engine_options"
    assert "cuda_graph_batch_sizes" in str(exc.value)


def test_one_size_and_numpy_sizes_are_taken() -> None:
    kw = {"gpu": "h100-sxm", "engine": "tensorrt-llm", "concurrency": 4}
    one = infer("llama3.1-8b", engine_options={"cuda_graph_batch_sizes": 8}, **kw).to_dict()
    same = infer("llama3.1-8b", engine_options={"cuda_graph_batch_sizes": (8,)}, **kw).to_dict()
    assert one["options"][0] == same["options"][0]
    arr = np.array([1, 2, 4, 8])
    a = infer("llama3.1-8b", engine_options={"cuda_graph_batch_sizes": arr}, **kw).to_dict()
    b = infer("llama3.1-8b", engine_options={"cuda_graph_batch_sizes": (1, 2, 4, 8)}, **kw)
    assert a["options"][0] == b.to_dict()["options"][0]


def test_a_padded_closed_loop_keeps_its_clients_in_flight() -> None:
    # Random lengths (the steady state): every figure is read at the load that holds the
    # clients in flight, so Little's law holds and TPOT never falls as clients are added.
    kw = {"gpu": "h200-sxm", "engine": "tensorrt-llm", "weights": "fp8", "kv_dtype": "fp8",
          "input_len": 1024, "output_len": 1024, "input_cv": 0.3, "output_cv": 0.3,
          "engine_options": {"cuda_graph_batch_sizes": OVERVIEW[:11]}}  # fmt: skip
    tpots = []
    for c in (112, 128, 144, 176, 192):
        o = infer("llama3.1-70b", concurrency=c, **kw).to_dict()["options"][0]
        assert o["requests_per_s"] * o["e2e_s"] == pytest.approx(c, rel=0.01)
        tpots.append(o["tpot_ms"])
    assert all(b >= a for a, b in itertools.pairwise(tpots))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from gpuscale.cli.main import entry; entry()", "infer",
         "llama3.1-8b", "--gpu", "h100-sxm", "--engine", "tensorrt-llm", "--concurrency", "64",
         "--json", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_cli_takes_a_list_joined_by_colons() -> None:
    ok = _cli("--engine-options", "cuda_graph_batch_sizes=1:2:4:8:16:32:64:128")
    assert ok.returncode == 0, ok.stderr
    bad = _cli("--engine-options", "cuda_graph_batch_sizes=1:x:4")
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "joined by ':'" in bad.stderr
