"""`gpuscale infer` through the real entry point."""

from __future__ import annotations

import json

import pytest


def test_tensor_parallel_lowers_per_token_latency_on_nvlink(gpuscale) -> None:
    # The article claims one H100 at 45 ms/token beats 4xH100 at 82 ms; on NVLink the physics
    # says the opposite: decode reads 1/4 of the weights per GPU and pays two small all-reduces.
    proc = gpuscale("infer", "llama2-7b", "--gpu", "h100-sxm", "--tp", "1,4", "--json")
    assert proc.returncode == 0, proc.stderr
    options = {o["tp"]: o for o in json.loads(proc.stdout)["options"]}
    assert options[4]["tpot_ms"] < options[1]["tpot_ms"]
    assert options[1]["output_tokens_per_s_per_gpu"] > options[4]["output_tokens_per_s_per_gpu"]
    assert options[4]["breakdown"]["decode_tp_comm"] > 0


def test_405b_does_not_fit_one_card_in_bf16(gpuscale) -> None:
    proc = gpuscale("infer", "llama3.1-405b", "--gpu", "h100-sxm", "--tp", "1,8", "--json")
    assert proc.returncode == 0, proc.stderr
    options = {o["tp"]: o for o in json.loads(proc.stdout)["options"]}
    assert options[1]["fits"] is False and options[1]["memory_per_gpu_gib"] > 750
    assert options[8]["fits"] is False  # 810 GB of bf16 weights exceed 8 x 80 GB too


def test_bad_tp_is_one_line(gpuscale) -> None:
    proc = gpuscale("infer", "llama2-7b", "--gpu", "h100-sxm", "--tp", "3")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "gpuscale: --tp 3 does not divide the model's 32 attention heads; accepted: divisors of 32"
    )


def test_default_tp_list_skips_degrees_the_model_cannot_use(gpuscale) -> None:
    proc = gpuscale("infer", "qwen2.5-7b", "--gpu", "h100-sxm", "--json")  # 28 heads: no TP=8
    assert proc.returncode == 0, proc.stderr
    assert [o["tp"] for o in json.loads(proc.stdout)["options"]] == [1, 2, 4]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bert-large", "--gpu", "h100-sxm"], "is an encoder"),
        (["llama2-7b", "--gpu", "a100-sxm-80gb", "--weights", "fp8"], "no fp8 tensor-core rate"),
    ],
)
def test_requests_the_hardware_or_model_cannot_serve_are_refused(gpuscale, args, needle) -> None:
    proc = gpuscale("infer", *args)
    assert (
        proc.returncode == 2
        and needle in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1
    )
