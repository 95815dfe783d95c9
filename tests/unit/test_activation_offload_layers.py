"""Offloading the first N layers' activations (Megatron-Core ``--cpu-offloading-num-layers``,
Transformer Engine's CPU offload): the device keeps the other layers' saved activations, and the
GPU waits only for the copies its host link cannot move while the other layers compute."""

from __future__ import annotations

import numpy as np
import pytest

from gpuscale import api, catalog
from gpuscale.costmodel.activation_offload import host_link_bytes_per_s, offload_wait_s
from gpuscale.costmodel.activations import saved_layer_bytes
from gpuscale.costmodel.compute import layer_compute
from gpuscale.costmodel.profile import load_profile
from gpuscale.errors import InputError
from gpuscale.specs import Plan, PlanBatch, Training

GIB = 2**30
RUN = dict(gpu="h100-sxm", tp=8, dp=8, seq=8192, mbs=1, framework="megatron")


def test_the_device_keeps_the_layers_not_offloaded() -> None:
    kept = api.fit("llama3.1-70b", **RUN)
    offloaded = api.fit("llama3.1-70b", activation_offload_layers=60, **RUN)
    model, plan = catalog.model("llama3.1-70b"), Plan(tp=8, dp=8, micro_batch=1, global_batch=8)
    training = Training(seq_len=8192, low_precision_saved_inputs=False)
    one_layer = float(saved_layer_bytes(model, training, PlanBatch.from_plans([plan]))[0])
    freed = kept.memory_bytes["activations"] - offloaded.memory_bytes["activations"]
    assert freed == pytest.approx(60 * one_layer, rel=1e-9)
    # ... and they are in host memory instead (fit's host line), not in the device total
    assert offloaded.memory_bytes["host"] == pytest.approx(60 * one_layer, rel=1e-9)
    assert kept.memory_bytes["host"] == 0
    assert offloaded.job["activation_offload_layers"] == 60


def test_estimate_and_fit_agree_and_echo_the_layers() -> None:
    est = api.estimate(
        "llama3.1-70b",
        gpus=64,
        gbs=8,
        activation_offload_layers=40,
        **RUN,  # type: ignore[arg-type]
    )
    fitted = api.fit("llama3.1-70b", activation_offload_layers=40, **RUN)
    assert est.memory_per_gpu_gib == pytest.approx(fitted.total_gib, rel=1e-9)
    assert est.to_dict()["activation_offload_layers"] == 40


def test_the_wait_is_what_the_host_link_cannot_hide() -> None:
    model, device = catalog.model("llama3.1-8b"), catalog.gpu("a100-sxm-80gb")
    profile = load_profile("megatron")
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=4, global_batch=32)])
    training = Training(seq_len=8192, activation_offload_layers=24)
    lc = layer_compute(model, device, training, plans, profile)
    copy = 24 * saved_layer_bytes(model, training, plans) / host_link_bytes_per_s(device, profile)
    window = model.num_layers - 1
    expected = np.maximum(copy - window * lc.layer_forward_s, 0) + np.maximum(
        copy - window * lc.layer_backward_s, 0
    )
    wait = offload_wait_s(model, device, training, plans, profile, lc)
    assert wait[0] == pytest.approx(expected[0]) and wait[0] > 0  # PCIe 4: 32 GB/s
    # In the step it is the "other" part, per micro-batch.
    kw = dict(gpu="a100-sxm-80gb", gpus=8, mbs=4, gbs=32, seq=8192, framework="megatron")
    base = api.estimate("llama3.1-8b", **kw)  # type: ignore[arg-type]
    slow = api.estimate("llama3.1-8b", activation_offload_layers=24, **kw)  # type: ignore[arg-type]
    assert slow.parts_s["other"] - base.parts_s["other"] == pytest.approx(wait[0], rel=1e-9)
    assert slow.step_time_s - base.step_time_s == pytest.approx(wait[0], rel=1e-9)


def test_grace_superchips_offload_over_nvlink_c2c() -> None:
    profile = load_profile("megatron")
    gb200, b200 = catalog.gpu("gb200"), catalog.gpu("b200")
    assert host_link_bytes_per_s(gb200, profile) > 3 * host_link_bytes_per_s(b200, profile)
    # Llama 3 70B, Megatron-Bridge's GB200 FP8 recipe (40 of 80 layers offloaded): hidden.
    kw = dict(gpu="gb200", gpus=64, mbs=2, gbs=128, seq=8192, zero=3, precision="fp8")
    base = api.estimate("llama3.1-70b", framework="megatron", **kw)  # type: ignore[arg-type]
    off = api.estimate(
        "llama3.1-70b",
        framework="megatron",
        activation_offload_layers=40,
        **kw,  # type: ignore[arg-type]
    )
    assert off.step_time_s == pytest.approx(base.step_time_s, rel=1e-12)
    assert off.memory_per_gpu_gib < base.memory_per_gpu_gib - 100


@pytest.mark.parametrize(
    ("over", "message"),
    [
        (dict(pp=2, dp=4), "--activation-offload-layers runs without pipeline parallelism"),
        (dict(recompute="selective"), "got --recompute selective; accepted: --recompute none"),
        (dict(activation_offload_layers=80), "must be fewer than the 80 layers of llama3.1-70b"),
        (dict(activation_offload_layers=-1), "a whole number of layers, 0 or more, got -1"),
        (dict(activation_offload_layers=2.5), "activation.offload.layers must be a whole number"),
        (dict(activation_offload=True), "are alternatives"),
    ],
)
def test_refusals_are_one_line(over: dict[str, object], message: str) -> None:
    kw: dict[str, object] = {**RUN, "activation_offload_layers": 20, **over}
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        api.fit("llama3.1-70b", **kw)  # type: ignore[arg-type]
    if "activation_offload" not in over:
        est = {k: v for k, v in kw.items() if k not in ("dp",)}
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            api.estimate("llama3.1-70b", gpus=64, **est)  # type: ignore[arg-type]


def test_fit_offers_the_fewest_layers_that_fit() -> None:
    run = dict(gpu="gb200", dp=64, zero=3, mbs=2, seq=8192, precision="fp8", framework="megatron")
    result = api.fit("llama3.1-70b", **run)  # type: ignore[arg-type]
    saver = next(s for s in result.savers if s.key == "activation-offload-layers")
    layers = int(saver.change.rsplit(" ", 1)[1].rstrip(")"))
    assert f"(--activation-offload-layers {layers})" in saver.change
    budget = 173 * GIB * (1 - load_profile("megatron").const("memory_headroom_fraction"))
    at = api.fit("llama3.1-70b", activation_offload_layers=layers, **run)  # type: ignore[arg-type]
    fewer = api.fit("llama3.1-70b", activation_offload_layers=layers - 1, **run)  # type: ignore[arg-type]
    assert at.total_gib * GIB <= budget < fewer.total_gib * GIB
    assert saver.memory_bytes == pytest.approx(at.total_gib * GIB, rel=1e-9)
    # The fewest layers also fill the host least; a count whose activations overflow what a
    # GPU may use of host memory is not offered, nor is offloading every layer then.
    host = at.memory_bytes["host"]
    assert host <= load_profile("megatron").const("host_memory_gib_per_gpu") * GIB
    tight = api.fit(
        "llama3.1-70b",
        **{**run, "mbs": 4},  # type: ignore[arg-type]
    )
    assert all(
        s.key not in ("activation-offload-layers", "activation-offload") for s in tight.savers
    )
    # Megatron-Core cannot offload under pipeline parallelism: not offered there.
    piped = api.fit("llama3.1-70b", **{**run, "dp": 32, "pp": 2})  # type: ignore[arg-type]
    assert all(s.key != "activation-offload-layers" for s in piped.savers)
