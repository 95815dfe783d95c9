"""Inputs the API cannot answer are refused in one line naming the argument, never priced
silently, ignored, or left to a traceback or a search that runs out of memory."""

from __future__ import annotations

from typing import Any

import pytest

import gpuscale
from gpuscale.api.planning import MAX_GPUS
from gpuscale.api.serving_search import search as serving_search
from gpuscale.errors import InputError

LOAD: dict[str, Any] = {"gpu": "h100-sxm", "concurrency": 8, "input_len": 128, "output_len": 16}


def _refused(field: str | None, call: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(InputError) as err:
        call(*args, **kwargs)
    assert err.value.field == field
    message = str(err.value)
    assert "\n" not in message
    return message


def test_expert_parallelism_beyond_the_experts_is_refused() -> None:
    # Mixtral has 8 experts: a 16-way expert split leaves ranks without an expert.
    message = _refused("ep", gpuscale.infer, "mixtral-8x7b", tp=16, ep=16, **LOAD)
    assert "8 experts" in message and "accepted: 1 to 8" in message
    message = _refused(
        "decode_ep",
        gpuscale.infer,
        "mixtral-8x7b",
        prefill_workers=1,
        decode_workers=1,
        decode_tp=16,
        decode_ep=16,
        **LOAD,
    )
    assert message.startswith("--decode-ep 16")


def test_attention_data_parallelism_needs_a_moe_model() -> None:
    message = _refused("attention_dp", gpuscale.infer, "llama3.1-8b", tp=2, attention_dp=2, **LOAD)
    assert "dense" in message and "accepted: 1" in message
    # The same layout on a MoE model is priced.
    assert gpuscale.infer("mixtral-8x7b", tp=2, attention_dp=2, **LOAD).to_dict()["options"]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"prefill_workers": 1, "decode_workers": 1, "tp": 4}, "tp"),
        ({"prefill_workers": 1, "decode_workers": 1, "replicas": 2}, "replicas"),
        ({"prefill_tp": 2}, "prefill_tp"),
        ({"decode_batch": 1}, "decode_batch"),
    ],
)
def test_the_other_deployments_layout_is_refused_not_ignored(
    kwargs: dict[str, Any], field: str
) -> None:
    message = _refused(field, gpuscale.infer, "llama3.1-8b", **LOAD, **kwargs)
    assert "applies only to" in message


def test_an_open_loop_needs_at_least_one_request() -> None:
    load = {**LOAD, "concurrency": None, "request_rate": 1.0}
    assert "--num-requests" in _refused(
        "num_requests", gpuscale.infer, "llama3.1-8b", num_requests=0, **load
    )


@pytest.mark.parametrize("gpus", [0, MAX_GPUS + 1, 10**12])
def test_plan_and_scale_bound_the_gpu_count(gpus: int) -> None:
    # 2^30 GPUs took 95 s and 18 GB before the bound; the message names the range.
    assert f"must be 1 to {MAX_GPUS:,}" in _refused(
        "gpus", gpuscale.plan, "llama3.1-8b", gpu="h100-sxm", gpus=gpus
    )
    assert f"must be 1 to {MAX_GPUS:,}" in _refused(
        "max_gpus", gpuscale.scale, "llama3.1-8b", gpu="h100-sxm", max_gpus=gpus
    )


def test_advise_comm_bounds_the_gpu_count() -> None:
    assert f"must be 1 to {MAX_GPUS:,}" in _refused(
        "gpus", gpuscale.advise_comm, "llama3.1-8b", gpus=10**12
    )


def test_an_empty_model_id_is_refused_not_read_from_the_current_folder(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Path("") is the current folder: its config.json was read without being named.
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert "empty model id" in _refused("model", gpuscale.fit, "", gpu="h100-sxm")


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("llama3.1-8b\x01", r"'llama3.1-8b\x01'"),  # an invisible character made visible
        ("x" * 5000, "(5000 characters)"),  # cut to one readable line
    ],
)
def test_an_unknown_id_is_shown_readably(name: str, shown: str) -> None:
    message = _refused(None, gpuscale.fit, name, gpu="h100-sxm")
    assert shown in message and len(message) < 1000


@pytest.mark.parametrize(
    ("field", "value"), [("storage_gbps", -1.0), ("checkpoint_every", -1), ("checkpoint_gbps", 0.0)]
)
def test_job_terms_name_their_flag(field: str, value: float) -> None:
    # The message said "checkpoint interval must be >= 0" without the flag to change.
    message = _refused(
        field, gpuscale.estimate, "llama3.1-8b", gpu="h100-sxm", gpus=8, **{field: value}
    )
    assert message.startswith(f"--{field.replace('_', '-')} must be")


def test_an_unexplainable_step_time_names_the_step_time_flag() -> None:
    # The refusal named --measured-tokens-per-s though the user gave --measured-step-s.
    message = _refused(
        "measured_step_s",
        gpuscale.calibrate_run,
        "llama3.1-8b",
        gpu="h100-sxm",
        gpus=8,
        measured_step_s=1e-9,
    )
    assert "beyond what any parameter" in message


def test_a_job_or_deployment_beyond_the_gpu_bound_is_refused() -> None:
    # 10^15 GPUs were priced without a word (a step time, a cluster nobody built).
    assert f"must be 1 to {MAX_GPUS:,}" in _refused(
        "gpus", gpuscale.estimate, "llama3.1-8b", gpu="h100-sxm", gpus=10**15
    )
    message = _refused("replicas", gpuscale.infer, "llama3.1-8b", replicas=10**15, **LOAD)
    assert f"more than {MAX_GPUS:,}" in message


def test_a_negative_seed_is_refused() -> None:
    # numpy's SeedSequence raised a ValueError traceback.
    assert ">= 0" in _refused("seed", gpuscale.api.cluster_trace, jobs=10, seed=-1)


def test_requests_longer_than_the_context_are_refused_by_every_serving_question() -> None:
    # A 10M-token prompt on a 131,072-token model was priced without a word.
    long = {"input_len": 130_000, "output_len": 2_000}
    load = {**LOAD, **long}
    assert "maximum context of 131,072" in _refused(
        "input_len", gpuscale.infer, "llama3.1-8b", **load
    )
    _refused("input_len", gpuscale.infer_static, "llama3.1-8b", gpu="h100-sxm", **long)
    _refused("input_len", serving_search, "llama3.1-8b", gpu="h100-sxm", gpus=8, **long)


@pytest.mark.parametrize("per_node", [0, -8])
@pytest.mark.parametrize(
    ("call", "kwargs"),
    [
        (gpuscale.infer, LOAD),
        (gpuscale.infer, {**LOAD, "prefill_workers": 1, "decode_workers": 1}),
        (serving_search, {"gpu": "h100-sxm", "gpus": 8}),
        (gpuscale.infer_static, {"gpu": "h100-sxm"}),
    ],
    ids=["aggregated", "disaggregated", "search", "static"],
)
def test_a_node_holds_at_least_one_gpu(per_node: int, call: Any, kwargs: dict[str, Any]) -> None:
    # 0 GPUs per node ended in a ZeroDivisionError in the serving placement and the search;
    # -8 was named as a placement that does not fit "-8-GPU nodes".
    message = _refused("gpus_per_node", call, "llama3.1-8b", **kwargs, gpus_per_node=per_node)
    assert message.startswith(f"--gpus-per-node must be a positive integer, got {per_node}")


def test_the_default_run_of_a_closed_loop_is_one_run_at_most() -> None:
    # 20 x concurrency measured requests by default: 20,000,000 at concurrency 10^6, past the
    # 10^6 of a stated run; the disaggregated closed loop followed them for 87 s and 5.6 GB.
    disagg = {"prefill_workers": 1, "decode_workers": 1}
    for kwargs in ({"concurrency": 50_001}, {"concurrency": 10**6, **disagg}):
        message = _refused("concurrency", gpuscale.infer, "llama3.1-8b", **{**LOAD, **kwargs})
        assert "more than 1,000,000 (the most one benchmark run holds)" in message
        assert "accepted: --num-requests up to 1,000,000, or --concurrency up to 50,000" in message
    # a stated count, or the largest default, is priced
    assert gpuscale.infer("llama3.1-8b", **{**LOAD, "concurrency": 50_001, "num_requests": 1000})
    assert gpuscale.infer("llama3.1-8b", **{**LOAD, "concurrency": 50_000})


def test_the_search_refuses_an_encoder() -> None:
    # bert-large's deployments were ranked by output tokens/s, which an encoder never makes.
    message = _refused("model", serving_search, "bert-large", gpu="h100-sxm", gpus=8)
    assert message == "bert-large is an encoder; serving applies to decoders"
    assert message == _refused("model", gpuscale.infer, "bert-large", **LOAD)


@pytest.mark.parametrize(
    ("call", "kwargs", "field", "expected"),
    [
        # "" was served as bf16, vLLM and the generic profile without a word.
        (gpuscale.infer, {**LOAD, "weights": ""}, "weights", "--weights '' is not a known format"),
        (serving_search, {"gpu": "h100-sxm", "gpus": 8, "weights": ""}, "weights", "'' is not"),
        (gpuscale.infer, {**LOAD, "engine": ""}, "engine", "unknown engine ''"),
        (
            gpuscale.infer_static,
            {"gpu": "h100-sxm", "engine": ""},
            "engine",
            "--engine '' unknown to the static-batch table; accepted: atom, deepspeed",
        ),
        # A serving engine is its kernel profile (ATOM's is SGLang's): "unknown profile 'atom'".
        (gpuscale.infer_static, {"gpu": "mi355x", "engine": "atomm"}, "engine", "accepted: atom"),
        # "bogus" was called a serving format.
        (
            gpuscale.infer_static,
            {"gpu": "h100-sxm", "weights": "bogus"},
            "weights",
            "--weights 'bogus' is not a known format; the static-batch table (--batch) takes auto",
        ),
        # inf was taken: every option at 0 tokens per dollar.
        (
            serving_search,
            {"gpu": "h100-sxm", "gpus": 8, "price": float("inf")},
            "price",
            "--price must be a finite number of USD per GPU-hour, got inf",
        ),
        # A subnormal price made tokens per dollar overflow to inf.
        (
            serving_search,
            {"gpu": "h100-sxm", "gpus": 8, "price": 1e-310},
            "price",
            "--price must be a finite number of USD per GPU-hour, got 1e-310; accepted: 0.0001",
        ),
        (
            serving_search,
            {"gpu": "h100-sxm", "gpus": 8, "slo_ttft_ms": float("inf")},
            "slo_ttft_ms",
            "--slo-ttft-ms must be a finite number of milliseconds > 0, got inf",
        ),
        (
            serving_search,
            {"gpu": "h100-sxm", "gpus": 8, "resolved_places": "1"},
            "resolved_places",
            "resolved_places must be a whole number, got '1'",
        ),
    ],
)
def test_empty_or_unknown_names_are_refused_not_defaulted(
    call: Any, kwargs: dict[str, Any], field: str | None, expected: str
) -> None:
    assert expected in _refused(field, call, "llama3.1-8b", **kwargs)


DISAGG: dict[str, Any] = {"prefill_workers": 1, "decode_workers": 1}


@pytest.mark.parametrize(
    ("call", "kwargs", "field"),
    [
        # Each was priced as given: 1.5 replicas as 1.5 GPUs, True as one client, 2.5 cut to 2.
        (gpuscale.infer, {**LOAD, "replicas": 1.5}, "replicas"),
        (gpuscale.infer, {**LOAD, "concurrency": True}, "concurrency"),
        (gpuscale.infer, {**LOAD, "concurrency": 8.5}, "concurrency"),
        (gpuscale.infer, {**LOAD, "num_requests": 2.5}, "num_requests"),
        (gpuscale.infer, {**LOAD, "input_len": 128.5}, "input_len"),
        (gpuscale.infer, {**LOAD, "tp": True}, "tp"),
        (gpuscale.infer, {**LOAD, "gpus_per_node": 2.5}, "gpus_per_node"),
        (
            gpuscale.infer,
            {**LOAD, "adp_balance_timeout_iters": 10**30},
            "adp_balance_timeout_iters",
        ),
        (gpuscale.infer, {**LOAD, **DISAGG, "decode_workers": 1.5}, "decode_workers"),
        (gpuscale.infer, {**LOAD, **DISAGG, "prefill_batch": 2.5}, "prefill_batch"),
        (gpuscale.api.infer_sweep, {**LOAD, "concurrency": [1.5, 2]}, "concurrency"),
        (gpuscale.infer_static, {"gpu": "h100-sxm", "tp": [2.5]}, "tp"),
        (gpuscale.infer_static, {"gpu": "h100-sxm", "tp": []}, "tp"),
        # a TypeError traceback
        (serving_search, {"gpu": "h100-sxm", "gpus": 8.5}, "gpus"),
    ],
)
def test_counts_are_whole_numbers(call: Any, kwargs: dict[str, Any], field: str) -> None:
    _refused(field, call, "llama3.1-8b", **kwargs)


def test_numpy_integers_are_whole_numbers() -> None:
    # A sweep built with numpy passes numpy integers: they are counts like Python ints.
    import numpy as np

    result = gpuscale.infer(
        "llama3.1-8b", **{**LOAD, "concurrency": np.int64(8)}, replicas=np.int64(2)
    )
    assert result.to_dict()["options"][0]["gpus"] == 2
    assert gpuscale.infer_static("llama3.1-8b", gpu="h100-sxm", tp=[np.int64(2)]).to_dict()
