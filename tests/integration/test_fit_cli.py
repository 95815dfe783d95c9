"""``gpuscale fit`` through the real entry point: answers, JSON, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _json(result) -> dict:  # type: ignore[no-untyped-def]
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_int4_8b_serves_on_a_24gb_card_and_table_is_printed(gpuscale) -> None:  # type: ignore[no-untyped-def]
    result = gpuscale(
        "fit",
        "llama3.1-8b",
        "--gpu",
        "rtx-4090",
        "--mode",
        "infer",
        "--weights",
        "int4",
        "--context",
        "8192",
    )
    assert result.returncode == 0, result.stderr
    assert "KV cache" in result.stdout and "fits:" in result.stdout


def test_config_json_model_is_accepted(gpuscale) -> None:  # type: ignore[no-untyped-def]
    doc = _json(
        gpuscale(
            "fit",
            str(CONFIGS / "mistral-7b.json"),
            "--gpu",
            "a100-sxm-80gb",
            "--finetune",
            "lora",
            "--json",
        )
    )
    assert doc["params"] == 7_241_732_096
    assert doc["schema_version"] == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["llama3.1-8b", "--gpu", "h100"], "did you mean"),
        (["llama3-8b"], "unknown model 'llama3-8b'; did you mean"),
        (
            ["llama3.1-8b", "--finetune", "lora", "--lora-targets", "q,x"],
            "--lora-targets: unknown layer 'x'",
        ),
        (["llama3.1-8b", "--seq", "0"], "--seq must be 1 to 131072"),
        (["llama3.1-8b", "--cp", "3"], "--seq 4096 is not divisible by 2 x --cp = 6"),
        (["llama3.1-8b", "--mode", "infer", "--zero", "3"], "--zero applies to --mode train"),
        (["llama3.1-8b", "--mode", "serve"], "Invalid value for '--mode'"),
        (
            ["llama3.1-8b", "--mode", "infer", "--framework", "megatron"],
            "--framework applies to --mode train",
        ),
        (["llama3.1-8b", "--framework", "megatronn"], "unknown profile 'megatronn'"),
        (["llama3.1-8b", "--gbs", "3"], "No such option"),
        (["./missing/config.json"], "no such model or file"),
        (["llama3.1-8b", "--dp", "2", "--zero", "7"], "--zero"),
        (["llama3.1-8b", "--paged-optimizer", "--offload", "optimizer"], "alternatives"),
        (["llama3.1-8b", "--tp", "3"], "does not divide the 32 attention heads"),
        (["llama3.1-8b", "--pp", "64"], "leaves a pipeline stage without layers (32 layers"),
    ],
)
def test_bad_input_is_one_line_exit_2(gpuscale, args: list[str], fragment: str) -> None:  # type: ignore[no-untyped-def]
    result = gpuscale("fit", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_config_json_is_one_line_exit_2(gpuscale, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "hidden_size": "big"}')
    result = gpuscale("fit", str(path))
    assert result.returncode == 2
    assert result.stderr.startswith("gpuscale: ") and result.stderr.count("\n") == 1
