"""``gpuscale plan`` through the real entry point: JSON contract, text, HTML, one-line errors."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., subprocess.CompletedProcess[str]]

CONTRACT = {
    "fits",
    "memory_per_gpu_gib",
    "step_time_s",
    "tokens_per_s",
    "tflops_per_gpu",
    "mfu",
    "breakdown",
}


def test_plan_json_ranks_fitting_plans_and_explains(gpuscale: Run) -> None:
    proc = gpuscale(
        "plan",
        "llama3.1-70b",
        "--gpu",
        "h100-sxm",
        "--gpus",
        "64",
        "--top",
        "3",
        "--price",
        "2.5",
        "--tokens",
        "1T",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["schema_version"] == 1
    assert doc["num_gpus"] == 64 and doc["objective"] == "throughput"
    assert set(doc["assumed"]) == {"seq", "gbs"}  # --tokens was given
    plans = doc["plans"]
    assert 1 <= len(plans) <= 3
    for row in plans:
        assert set(row) >= CONTRACT
        assert row["fits"] is True
        assert row["num_gpus"] == 64
        p = row["plan"]
        assert p["tp"] * p["pp"] * p["dp"] * p["cp"] == 64
        assert row["cost_usd"] == pytest.approx(row["gpu_hours"] * 2.5)
        assert row["time_to_train_days"] * 86400 * row["tokens_per_s"] == pytest.approx(1e12)
    speeds = [row["tokens_per_s"] for row in plans]
    assert speeds == sorted(speeds, reverse=True)
    assert doc["why"].startswith(plans[0]["description"])
    assert doc["verdict"]["choice"] in ("one GPU", "one node", "a cluster")
    assert doc["evaluated"] >= doc["fitting"] > 0


def test_plan_text_and_html_report(gpuscale: Run, tmp_path: Path) -> None:
    report = tmp_path / "plan.html"
    proc = gpuscale(
        "plan",
        "gpt3-1.3b",
        "--gpu",
        "a100-sxm-80gb",
        "--gpus",
        "16",
        "--inter",
        "roce-100",
        "--objective",
        "cost",
        "--html",
        str(report),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Why:" in proc.stdout and "Verdict:" in proc.stdout
    assert "assumed: global batch" in proc.stdout
    html = report.read_text()
    assert "plotly" in html and "Top plans" in html


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpu", "h100", "--gpus", "8"], "unknown GPU 'h100'; did you mean"),
        (
            ["--gpu", "h100-sxm", "--gpus", "12"],
            "--gpus (12) must be a multiple of --gpus-per-node (8)",
        ),
        (["--gpu", "h100-sxm", "--gpus", "8", "--inter", "infiniband"], "unknown fabric"),
        (
            ["--gpu", "h100-sxm", "--gpus", "8", "--tokens", "lots"],
            "--tokens 'lots' is not a count",
        ),
        (["--gpu", "h100-sxm", "--gpus", "8", "--framework", "megatorn"], "unknown profile"),
        (["--gpu", "h100-sxm", "--gpus", "16", "--seq", "0"], "--seq must be 1 to 131072"),
        (
            ["--gpu", "h100-sxm", "--gpus", "16", "--html", "/proc/x/y.html"],
            "cannot write --html '/proc/x/y.html'",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(gpuscale: Run, args: list[str], message: str) -> None:
    proc = gpuscale("plan", "llama3.1-8b", *args)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_no_plan_fits_is_one_line_exit_2(gpuscale: Run) -> None:
    proc = gpuscale("plan", "llama3.1-405b", "--gpu", "rtx-4090", "--gpus", "8")
    assert proc.returncode == 2
    assert proc.stderr.startswith("gpuscale: no plan fits llama3.1-405b on 8 x rtx-4090")
    assert proc.stderr.count("\n") == 1


def test_every_ranked_plan_carries_an_error_band_and_its_extrapolations(gpuscale) -> None:
    proc = gpuscale("plan", "mixtral-8x7b", "--gpu", "b200", "--gpus", "16", "--json")
    assert proc.returncode == 0, proc.stderr
    plans = json.loads(proc.stdout)["plans"]
    assert plans and all(p["uncertainty"]["relative"] > 0 for p in plans)
    warnings = " ".join(plans[0]["uncertainty"]["warnings"])
    assert "blackwell" in warnings and "mixture-of-experts" in warnings


def test_plan_text_and_json_state_the_memory_headroom(gpuscale: Run) -> None:
    args = ("plan", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--top", "1")
    text = gpuscale(*args)
    assert text.returncode == 0, text.stderr
    assert "assumed: plans keep 10% of each GPU free" in " ".join(text.stdout.split())
    doc = json.loads(gpuscale(*args, "--json").stdout)
    assert doc["memory_assumption"].startswith("plans keep 10% of each GPU free")


def test_plan_compile_flag_speeds_up_an_eager_stack(gpuscale: Run) -> None:
    args = ["plan", "llama3.1-8b", "--gpu", "h100-sxm-500w", "--gpus", "8"]
    args += ["--framework", "torchtitan", "--top", "1", "--json"]
    eager, compiled = gpuscale(*args), gpuscale(*args, "--compile")
    assert eager.returncode == 0 and compiled.returncode == 0, eager.stderr + compiled.stderr
    e, c = json.loads(eager.stdout), json.loads(compiled.stdout)
    assert (e["compile"], c["compile"]) == (False, True)
    assert c["plans"][0]["tokens_per_s"] > e["plans"][0]["tokens_per_s"]
