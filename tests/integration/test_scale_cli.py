"""``gpuscale scale`` through the real entry point."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

Run = Callable[..., subprocess.CompletedProcess[str]]


def test_scale_json_compares_fabrics_and_runs(gpuscale: Run, tmp_path: Path) -> None:
    report = tmp_path / "scale.html"
    proc = gpuscale(
        "scale",
        "gpt3-1.3b",
        "--gpu",
        "h100-sxm",
        "--max-gpus",
        "256",
        "--inter",
        "roce-100,ib-ndr400",
        "--runs",
        "4",
        "--tokens",
        "26B",
        "--html",
        str(report),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    slow, fast = doc["curves"]
    assert [slow["fabric"], fast["fabric"]] == ["roce-100", "ib-ndr400"]
    counts = [p["num_gpus"] for p in slow["points"]]
    assert counts == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert slow["baseline_gpus"] == 1
    assert slow["points"][0]["efficiency"] == 1.0
    days_slow = slow["points"][-1]["time_to_train_days"]
    days_fast = fast["points"][-1]["time_to_train_days"]
    assert days_fast < days_slow, "InfiniBand NDR trains a DP job on 256 GPUs faster than 100 GbE"
    assert fast["break_even_gpus"] >= slow["break_even_gpus"]
    runs = doc["runs"]
    assert runs["runs"] == 4 and runs["gpus_per_run"] == 64
    assert doc["verdict"]["num_gpus"] == slow["break_even_gpus"]
    html = report.read_text()
    assert "Per-GPU efficiency" in html and "Cost against time" in html


def test_scale_text_when_the_model_does_not_fit_one_card(gpuscale: Run) -> None:
    proc = gpuscale(
        "scale", "llama3.1-70b", "--gpu", "h100-sxm", "--max-gpus", "64", "--price", "3"
    )
    assert proc.returncode == 0, proc.stderr
    assert "does not fit one GPU: efficiency relative to" in proc.stdout
    assert "Verdict:" in proc.stdout and "does not fit one card" in proc.stdout


def test_scale_bad_max_gpus_is_one_line_exit_2(gpuscale: Run) -> None:
    proc = gpuscale("scale", "llama3.1-8b", "--gpu", "h100-sxm", "--max-gpus", "20")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "--max-gpus (20) must be a multiple of --gpus-per-node (8)" in proc.stderr


def test_crashes_found_in_review_are_one_line_exit_2(gpuscale: Run) -> None:
    """--seq 0 divided by zero, --gpus-per-node 0 took a modulo by zero, and a bad --html path
    failed after the whole search had printed."""
    for args, message in (
        (["--seq", "0"], "--seq must be 1 to 131072"),
        (["--gpus-per-node", "0"], "--gpus-per-node must be a positive integer, got 0"),
        (["--html", "/proc/x/y.html"], "cannot write --html '/proc/x/y.html'"),
    ):
        proc = gpuscale("scale", "llama3.1-8b", "--gpu", "h100-sxm", "--max-gpus", "64", *args)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_the_fabrics_table_title_is_one_line(gpuscale: Run) -> None:
    # rich wraps a table title to the table's width; three narrow columns split this one in two.
    proc = gpuscale(
        "scale", "gpt3-1.3b", "--gpu", "h100-sxm", "--max-gpus", "16", "--inter",
        "roce-100,ib-ndr400", "--tokens", "26B",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Days to train 26B tokens, by fabric" in proc.stdout
