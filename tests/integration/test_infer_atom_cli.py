"""`gpuscale infer --engine atom` through the real entry point: aggregated runs answer with
--json, what ATOM cannot run exits 2 with one line."""

from __future__ import annotations

import json

ATOM = (
    "infer", "deepseek-ai/DeepSeek-R1", "--gpu", "mi355x", "--engine", "atom",
    "--weights", "fp8_block", "--kv-dtype", "fp8", "--input", "1024", "--output", "256",
    "--concurrency", "8",
)  # fmt: skip


def test_atom_aggregated_answers_in_json(gpuscale) -> None:
    proc = gpuscale(*ATOM, "--tp", "8", "--json")
    assert proc.returncode == 0, proc.stderr
    o = json.loads(proc.stdout)["options"][0]
    assert o["gpus"] == 8 and o["ttft_ms"] > 0 and o["output_tokens_per_s"] > 0


def test_what_atom_cannot_run_exits_2_with_one_line(gpuscale) -> None:
    for bad, words in (
        (("--tp", "16"), "within one node of 8 GPUs"),
        (("--tp", "8", "--pp", "2"), "no pipeline parallelism"),
        (
            ("--prefill-workers", "1", "--decode-workers", "1", "--prefill-tp", "8",
             "--decode-tp", "8"),
            "modelled aggregated only",
        ),
        (("--tp", "8", "--engine-options", "chunked_prefill=true"), "not atom's"),
        (("--tp", "8", "--gpu", "h200-sxm"), "engine atom runs on AMD GPUs, not on h200-sxm"),
    ):  # fmt: skip
        proc = gpuscale(*ATOM, *bad)
        assert proc.returncode == 2, bad
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert words in proc.stderr, proc.stderr
