"""SGLang's EAGLE worker without the overlap scheduler (spec v1): the host time of a speculative
step sits between the GPU's passes (``speculative_step_host_us``, sourced from sgl-project/sglang
PR #12128: 1.964 ms a step on DeepSeek-R1 TP8)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpuscale import catalog
from gpuscale.api.serving import infer
from gpuscale.catalog.serving_engines import engine
from gpuscale.costmodel.profile import load_profile_for
from gpuscale.costmodel.serving.formats import weight_format
from gpuscale.costmodel.serving.iteration import Parallelism
from gpuscale.costmodel.serving.speculative import Speculation
from gpuscale.errors import InputError
from gpuscale.planner.serving.deployment import _iteration_model

R1 = "deepseek-ai/DeepSeek-R1"
STEP_S = 1.964e-3
LOAD = {
    "gpu": "h200-sxm", "engine": "sglang", "weights": "fp8_block", "tp": 8,
    "input_len": 64, "output_len": 512, "concurrency": 1,
    "speculative": "mtp", "draft_tokens": 2,
}  # fmt: skip


def _it(overlap: bool, name: str = "sglang"):  # type: ignore[no-untyped-def]
    eng = dataclasses.replace(
        engine(name).for_device(catalog.gpu("h200-sxm")), overlap_scheduler=overlap
    )
    spec = Speculation(method="mtp", draft_tokens=2, acceptance=0.85, draft_layers=1, source="")
    return _iteration_model(
        catalog.model(R1),
        catalog.cluster("h200-sxm", 8),
        Parallelism(tp=8),
        weight_format("fp8_block"),
        "fp8",
        load_profile_for(eng.cost_profile, None),
        eng,
        spec,
    )


def test_the_profile_states_the_measured_step() -> None:
    assert engine("sglang").speculative_step_host_us == pytest.approx(STEP_S * 1e6)
    for name in ("vllm", "tensorrt-llm"):
        assert engine(name).speculative_step_host_us == 0.0


def test_decoding_iterations_pay_it_only_without_the_overlap() -> None:
    off, on = _it(False), _it(True)
    assert off.speculative_step_host_s == pytest.approx(STEP_S)
    assert on.speculative_step_host_s == 0.0
    args = [np.array([4.0, 0.0]), np.array([1000.0, 0.0]), np.array([0.0, 2048.0])]
    args.append(np.array([0.0, 1024.0]))
    diff = off.time_s(*args) - on.time_s(*args)
    # A decode step pays the host time; a prompt-only (prefill) batch does not.
    assert diff[0] == pytest.approx(STEP_S) and diff[1] == pytest.approx(0.0)
    # The draft passes inside the step do not pay it again.
    assert off.draft_model(3).speculative_step_host_s == 0.0


def test_an_engine_without_the_term_is_unchanged() -> None:
    args = [np.array([4.0]), np.array([1000.0]), np.array([0.0]), np.array([0.0])]
    assert _it(False, "tensorrt-llm").time_s(*args) == pytest.approx(
        _it(True, "tensorrt-llm").time_s(*args)
    )


def test_tpot_grows_by_the_step_over_the_tokens_it_emits() -> None:
    on = infer(R1, **LOAD, engine_options={"overlap_scheduler": True}).to_dict()["options"][0]
    off = infer(R1, **LOAD, engine_options={"overlap_scheduler": False}).to_dict()["options"][0]
    tokens = on["tokens_per_iteration"]
    assert off["tpot_ms"] - on["tpot_ms"] == pytest.approx(STEP_S * 1e3 / tokens, rel=0.05)


def test_the_prefill_workers_keep_their_own_overlap_scheduler() -> None:
    # A launch that gives only the decode workers EAGLE (MoRI-SGLang): their overlap is off,
    # the prefill workers' stays on (engine option prefill_overlap_scheduler).
    kw = {k: v for k, v in LOAD.items() if k != "tp"}
    pools = {"prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1, "decode_tp": 8}
    opts = {"overlap_scheduler": False}
    one = infer(R1, **kw, **pools, decode_batch=8, engine_options=opts).to_dict()["options"][0]
    split = {**opts, "prefill_overlap_scheduler": True}
    two = infer(R1, **kw, **pools, decode_batch=8, engine_options=split).to_dict()["options"][0]
    assert two["tpot_ms"] == pytest.approx(one["tpot_ms"], rel=0.02)
    # The prefill workers' overlap scheduler returns a prompt's KV one iteration later.
    assert two["ttft_ms"] > one["ttft_ms"]
    with pytest.raises(InputError, match="prefill_overlap_scheduler"):
        infer(R1, **LOAD, engine_options={"prefill_overlap_scheduler": True})


def test_prefill_workers_without_the_draft_module() -> None:
    """A launch that gives the speculative flags to the decode workers only (MoRI-SGLang):
    the prefill workers load and run no draft module (engine option prefill_speculative
    false), so a prompt's prefill is shorter and the decode workers are as before."""
    kw = {k: v for k, v in LOAD.items() if k not in ("tp", "input_len")}
    pools = {"prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1, "decode_tp": 8}
    both = infer(R1, **kw, **pools, input_len=8192, decode_batch=8).to_dict()["options"][0]
    opts = {"prefill_speculative": False}
    decode_only = infer(
        R1, **kw, **pools, input_len=8192, decode_batch=8, engine_options=opts
    ).to_dict()["options"][0]
    assert decode_only["tpot_ms"] == pytest.approx(both["tpot_ms"], rel=0.01)
    # One MTP block over each 8k prompt on top of 61 layers: about 1/61 of the prefill.
    assert decode_only["ttft_ms"] < both["ttft_ms"] < 1.05 * decode_only["ttft_ms"]
    with pytest.raises(InputError, match="prefill_speculative"):
        infer(R1, **LOAD, engine_options=opts)
    plain = {k: v for k, v in kw.items() if k not in ("speculative", "draft_tokens")}
    with pytest.raises(InputError, match="does not run; give --speculative"):
        infer(R1, **plain, **pools, input_len=1024, decode_batch=8, engine_options=opts)


def test_prefill_workers_without_the_draft_module_hold_more_kv() -> None:
    """The memory check of the prefill workers prices the pool the launch loads: a fraction
    that leaves one 8k prompt no room beside the draft module holds it without."""
    kw = {k: v for k, v in LOAD.items() if k not in ("tp", "input_len")}
    pools = {"prefill_workers": 1, "prefill_tp": 8, "decode_workers": 1, "decode_tp": 8}
    fraction = {"prefill_memory_fraction": 0.5757}
    with pytest.raises(InputError, match=r"prefill_memory_fraction=0\.5757"):
        infer(R1, **kw, **pools, input_len=8192, decode_batch=8, engine_options=fraction)
    options = {**fraction, "prefill_speculative": False}
    got = infer(R1, **kw, **pools, input_len=8192, decode_batch=8, engine_options=options)
    assert got.to_dict()["options"][0]["fits"]
