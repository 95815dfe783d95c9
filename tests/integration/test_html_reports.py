"""``--html`` on fit, estimate, infer and cluster simulate: one self-contained page with the
answer in words, its plots and every figure of its ``--json``; a bad path fails before any work."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["fit", "llama3.1-70b", "--gpu", "h100-sxm"], "does not fit"),
        (["estimate", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8"], "tokens/s"),
        (["infer", "llama3.1-8b", "--gpu", "h100-sxm", "--concurrency", "16"], "TTFT"),
        (["infer", "llama2-7b", "--gpu", "h100-sxm", "--tp", "1,2"], "TP"),
    ],
)
def test_html_report_holds_the_answer_plots_and_figures(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
    args: list[str],
    words: str,
) -> None:
    page = tmp_path / "report.html"
    proc = gpuscale(*args, "--html", str(page), "--json")
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert html.startswith("<!doctype html>") and "Plotly.newPlot" in html
    assert "<h2>Answer</h2>" in html and "<table" in html and words in html
    assert '<script src="http' not in html  # plotly.js is inlined: opens without a network


def test_cluster_simulate_html(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path
) -> None:
    trace = tmp_path / "t.csv"
    made = gpuscale("cluster", "trace", "--synthetic", "philly", "--jobs", "100", "-o", str(trace))
    assert made.returncode == 0, made.stderr
    page = tmp_path / "sim.html"
    proc = gpuscale(
        "cluster", "simulate", "--cluster", str(ROOT / "examples" / "lab-64.yaml"),
        "--trace", str(trace), "--policy", "all", "--html", str(page), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    assert "Plotly.newPlot" in html and "lowest average job completion time" in html


@pytest.mark.parametrize(
    "command",
    [
        ["fit", "llama3.1-8b", "--gpu", "h100-sxm"],
        ["estimate", "llama3.1-8b", "--gpu", "h100-sxm", "--gpus", "8"],
    ],
)
def test_html_to_a_missing_folder_is_one_line(
    gpuscale: Callable[..., subprocess.CompletedProcess[str]], tmp_path: Path, command: list[str]
) -> None:
    proc = gpuscale(*command, "--html", str(tmp_path / "missing" / "r.html"))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr
    assert not (tmp_path / "missing").exists()
