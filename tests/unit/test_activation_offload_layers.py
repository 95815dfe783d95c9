"""Offloading the first N layers' activations (Megatron-Core ``--cpu-offloading-num-layers``,
Transformer Engine's CPU offload): the device keeps the other layers' saved activations, and the
GPU waits only for the copies its host link cannot move while the other layers compute."""

from __future__ import annotations

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


def _te_schedule_stall(layers: int, offloaded: int, compute: float, copy: float) -> float:
    """Stall of one pass under Transformer Engine's default offload schedule, by event
    simulation (cpu_offload.py ``OffloadSynchronizer._default_offload_sync_init``): forward
    step j starts the copy of layer j - 1 on the one offload stream and waits for the copy of
    layer i = j - (layers - N); the backward mirrors it (reload i starts at the backward of
    layer layers - 1 - N + i, the backward of layer i waits for it)."""
    now = stream_free = 0.0
    done: dict[int, float] = {}
    for j in range(layers):
        if 0 <= j - 1 < offloaded:
            stream_free = max(now, stream_free) + copy
            done[j - 1] = stream_free
        due = j - (layers - offloaded)
        if 0 <= due < offloaded:
            now = max(now, done[due])
        now += compute
    return now - layers * compute


def test_the_wait_is_what_te_schedule_leaves_exposed() -> None:
    model, device = catalog.model("llama3.1-8b"), catalog.gpu("a100-sxm-80gb")
    profile = load_profile("megatron")
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=4, global_batch=32)])
    for n in (1, 8, 16, 24, 31):  # up to every layer but one: few layers left to hide behind
        training = Training(seq_len=8192, activation_offload_layers=n)
        lc = layer_compute(model, device, training, plans, profile)
        link = host_link_bytes_per_s(device, profile)
        copy = float(saved_layer_bytes(model, training, plans)[0]) / link
        L = model.num_layers
        expected = _te_schedule_stall(
            L, n, float(lc.layer_forward_s[0]), copy
        ) + _te_schedule_stall(L, n, float(lc.layer_backward_s[0]), copy)
        wait = offload_wait_s(model, device, training, plans, profile, lc)
        assert wait[0] == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert wait[0] > 0  # PCIe 4: 32 GB/s
    # In the step it is the "other" part, per micro-batch.
    kw = dict(gpu="a100-sxm-80gb", gpus=8, mbs=4, gbs=32, seq=8192, framework="megatron")
    base = api.estimate("llama3.1-8b", **kw)  # type: ignore[arg-type]
    slow = api.estimate("llama3.1-8b", activation_offload_layers=31, **kw)  # type: ignore[arg-type]
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


def test_suggestions_keep_the_offload_valid() -> None:
    # fit's other suggestions keep the user's offload: no pipelined layout, no recompute
    # (Megatron-Core refuses both with it).
    run = dict(gpu="h100-sxm", tp=8, seq=8192, mbs=2, framework="megatron")
    result = api.fit("llama3.1-70b", activation_offload_layers=10, **run)  # type: ignore[arg-type]
    assert result.smallest and all(o.pp == 1 for o in result.smallest)
    assert all("recompute" not in s.key for s in result.savers)
    assert not any("recompute" in note for note in result.notes)


def test_host_memory_beyond_a_gpus_share_is_said() -> None:
    run = dict(gpu="gb200", zero=3, mbs=4, seq=8192, precision="fp8", framework="megatron")
    fitted = api.fit("llama3.1-70b", dp=72, activation_offload_layers=79, **run)  # type: ignore[arg-type]
    assert any("GiB of host memory per GPU, more than the 200 GiB" in n for n in fitted.notes)
    est = api.estimate(
        "llama3.1-70b",
        gpus=72,
        gbs=288,
        activation_offload_layers=79,
        **run,  # type: ignore[arg-type]
    )
    assert est.host_memory_per_gpu_gib == pytest.approx(fitted.memory_bytes["host"] / GIB)
    assert any("host memory per GPU" in w for w in est.warnings)
    fine = api.estimate("llama3.1-70b", gpus=72, gbs=288, activation_offload_layers=10, **run)  # type: ignore[arg-type]
    assert 0 < fine.host_memory_per_gpu_gib < 200
    assert not any("host memory" in w for w in fine.warnings)


def test_calibrate_run_echoes_what_the_run_was_priced_with() -> None:
    result = api.calibrate_run(
        "llama3.1-70b",
        gpu="h100-sxm",
        gpus=64,
        tp=8,
        mbs=1,
        gbs=64,
        seq=8192,
        framework="megatron",
        activation_offload_layers=40,
        measured_step_s=12.0,
    )
    doc = result.to_dict()
    assert doc["activation_offload_layers"] == 40 and doc["loss"] == "standard"
    assert doc["profile"]["fit"]["run"]["activation_offload_layers"] == 40


def test_the_copies_are_the_bytes_the_memory_model_keeps() -> None:
    # Under Megatron's FP8 the saved linear inputs are FP8 (profile low_precision_saved_inputs):
    # the offload copies those bytes, the same the host line holds.
    model, device = catalog.model("llama3.1-8b"), catalog.gpu("h100-sxm")
    profile = load_profile("megatron")
    plans = PlanBatch.from_plans([Plan(dp=8, micro_batch=4, global_batch=32)])
    training = Training(seq_len=8192, precision="fp8", activation_offload_layers=31)
    host = api.fit(
        "llama3.1-8b", gpu="h100-sxm", dp=8, mbs=4, seq=8192, precision="fp8",
        framework="megatron", activation_offload_layers=31,
    ).memory_bytes["host"]  # fmt: skip
    lc = layer_compute(model, device, training, plans, profile)
    copy = host / 31 / host_link_bytes_per_s(device, profile)
    expected = _te_schedule_stall(32, 31, float(lc.layer_forward_s[0]), copy) + _te_schedule_stall(
        32, 31, float(lc.layer_backward_s[0]), copy
    )
    wait = offload_wait_s(model, device, training, plans, profile, lc)
    assert expected > 0 and wait[0] == pytest.approx(expected, rel=1e-9)
