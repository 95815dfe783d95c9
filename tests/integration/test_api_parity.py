"""Each command's ``--json`` is its API result's ``to_dict()``, and its bad input is one line
that names the flag the user typed."""

from __future__ import annotations

import json
from typing import Any

import pytest

import gpuscale as library

ESTIMATE = [
    "estimate",
    "llama3.1-70b",
    "--gpu",
    "h100-sxm",
    "--gpus",
    "64",
    "--tp",
    "8",
    "--pp",
    "2",
    "--mbs",
    "1",
    "--gbs",
    "256",
    "--seq",
    "4096",
]


def _json(gpuscale_cli: Any, *args: str) -> dict[str, Any]:
    proc = gpuscale_cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def _untimed(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != "search_s"}


def test_estimate_json_is_the_api_result(gpuscale: Any) -> None:
    api = library.estimate(
        "llama3.1-70b", gpu="h100-sxm", gpus=64, tp=8, pp=2, mbs=1, gbs=256, seq=4096
    )
    assert _json(gpuscale, *ESTIMATE) == api.to_dict()


def test_fit_json_is_the_api_result(gpuscale: Any) -> None:
    doc = _json(gpuscale, "fit", "llama3.1-8b", "--gpu", "a100-sxm-80gb", "--seq", "8192")
    assert doc == library.fit("llama3.1-8b", gpu="a100-sxm-80gb", seq=8192).to_dict()


def test_plan_and_scale_json_are_the_api_results(gpuscale: Any) -> None:
    doc = _json(gpuscale, "plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "16", "--top", "3")
    api = library.plan("llama3.1-8b", gpu="h100-sxm", gpus=16, top=3).to_dict()
    assert _untimed(doc) == _untimed(api)
    doc = _json(gpuscale, "scale", "gpt3-350m", "--gpu", "a100-sxm-80gb", "--max-gpus", "16")
    api = library.scale("gpt3-350m", gpu="a100-sxm-80gb", max_gpus=16).to_dict()
    assert _untimed(doc) == _untimed(api)


def test_advise_comm_json_is_the_api_result(gpuscale: Any) -> None:
    doc = _json(gpuscale, "advise-comm", "llama3.1-8b", "--gpus", "16", "--inter", "roce-100")
    api = library.advise_comm("llama3.1-8b", gpus=16, inter="roce-100")
    assert doc == api.to_dict()


def test_estimate_without_gbs_prints_its_assumption(gpuscale: Any) -> None:
    argv = [a for a in ESTIMATE if a not in ("--gbs", "256")]
    proc = gpuscale(*argv)
    assert proc.returncode == 0, proc.stderr
    assert "assumed" in proc.stdout and "global batch 1024" in proc.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gpus", "0"], "--gpus must be a positive integer, got 0"),
        (["--gbs", "0"], "--gbs must be a positive integer, got 0"),
        (["--slowest-gpu", "b200"], "--slowest-gpu b200 is faster than the cluster's h100-sxm"),
        (["--nics-per-node", "1000"], "--nics-per-node must be 1 to 8"),
        (["--finetune", "lora", "--lora-rank", "100000"], "--lora-rank must be 1 to 8192"),
        (["--tp", "3", "--gpus", "48"], "--tp 3 does not divide"),
    ],
)
def test_estimate_bad_input_names_the_flag(gpuscale: Any, args: list[str], needle: str) -> None:
    argv = list(ESTIMATE)
    for flag, value in zip(args[::2], args[1::2], strict=True):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    proc = gpuscale(*argv)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--gbs", "0"], "--gbs must be a positive integer"),
        (["--nics-per-node", "1000"], "--nics-per-node must be 1 to 8"),
    ],
)
def test_plan_bad_input_names_the_flag(gpuscale: Any, args: list[str], needle: str) -> None:
    proc = gpuscale("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "16", *args)
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


def test_static_infer_json_is_the_api_result(gpuscale: Any) -> None:
    doc = _json(
        gpuscale, "infer", "llama2-7b", "--gpu", "h100-sxm", "--tp", "1,2,4", "--batch", "4"
    )
    api = library.api.infer_static("llama2-7b", gpu="h100-sxm", tp=[1, 2, 4], batch=4)
    assert doc == api.to_dict()


@pytest.mark.parametrize("kind", ["gpus", "links", "models"])
def test_catalog_json_is_the_api_result(gpuscale: Any, kind: str) -> None:
    assert _json(gpuscale, "catalog", kind) == library.api.catalog_listing(kind).to_dict()
