"""`gpuscale infer --decode-routing`: how the router picks a decode worker, through the real
entry point: priced, shown in the notes and the JSON, refused with one line where it does not
apply or is not a routing."""

from __future__ import annotations

import json

DISAGG = (
    "infer", "deepseek-r1", "--gpu", "h200-sxm", "--engine", "tensorrt-llm",
    "--prefill-workers", "1", "--prefill-tp", "8", "--prefill-ep", "8",
    "--decode-workers", "4", "--decode-tp", "8", "--decode-ep", "8", "--decode-batch", "1",
    "--concurrency", "4",
)  # fmt: skip


def test_a_random_deal_waits_for_busy_workers(gpuscale) -> None:
    runs = {}
    for routing in ("least-loaded", "random"):
        proc = gpuscale(*DISAGG, "--decode-routing", routing, "--json")
        assert proc.returncode == 0, proc.stderr
        runs[routing] = json.loads(proc.stdout)["options"][0]
    assert runs["random"]["decode_routing"] == "random"
    assert runs["random"]["ttft_ms"] > 5 * runs["least-loaded"]["ttft_ms"]
    assert any("picked at random" in n for n in runs["random"]["notes"])
    assert not any("picked" in n for n in runs["least-loaded"]["notes"])


def test_bad_routing_is_one_line_and_exit_2(gpuscale) -> None:
    proc = gpuscale(*DISAGG, "--decode-routing", "nearest")
    assert proc.returncode == 2
    assert "least-loaded" in proc.stderr and "Traceback" not in proc.stderr
    agg = gpuscale(
        "infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4",
        "--decode-routing", "random",
    )  # fmt: skip
    assert agg.returncode == 2
    assert agg.stderr.strip().count("\n") == 0
    assert "applies only to disaggregated serving" in agg.stderr
