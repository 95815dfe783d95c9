"""``gpuscale fit`` names the cheapest ways to fit on the same GPUs, in text and JSON."""

from __future__ import annotations

import json


def test_fit_lists_savers_with_their_memory(gpuscale) -> None:  # type: ignore[no-untyped-def]
    result = gpuscale("fit", "llama3.1-8b", "--gpu", "h100-sxm", "--seq", "4096", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["fits"] is False
    savers = doc["savers"]
    assert savers and all(s["fits"] for s in savers)
    assert all(s["memory_gib"] < doc["capacity_gib"] for s in savers)
    assert {"key", "change", "cost", "memory_gib", "saved_gib", "fits"} <= set(savers[0])
    text = gpuscale("fit", "llama3.1-8b", "--gpu", "h100-sxm", "--seq", "4096")
    assert text.returncode == 0, text.stderr
    assert "fits 1 GPU(s) with 8-bit AdamW" in " ".join(text.stdout.split())


def test_fit_that_fits_lists_no_saver(gpuscale) -> None:  # type: ignore[no-untyped-def]
    result = gpuscale("fit", "llama3.2-3b", "--gpu", "h100-sxm", "--finetune", "lora", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["savers"] == []
